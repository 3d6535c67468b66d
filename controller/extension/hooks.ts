/**
 * Cluster API's Runtime SDK wire format for the hooks oscar serves (hooks.runtime.cluster.x-k8s.io
 * /v1alpha1: discovery and the three in-place update hooks; Go types in cluster-api's
 * api/runtime/hooks/v1alpha1/{discovery,inplaceupdate,common}_types.go). Only the fields oscar
 * reads or writes are typed; the rest of each object passes through as unknown.
 */
export const HOOKS_API_VERSION = 'hooks.runtime.cluster.x-k8s.io/v1alpha1';
export const HOOKS_PATH_PREFIX = `/${HOOKS_API_VERSION}`;

export const HOOKS = ['CanUpdateMachineSet', 'CanUpdateMachine', 'UpdateMachine'] as const;
export type HookName = (typeof HOOKS)[number];

/** The handler name oscar registers for each hook (the path's last segment). */
export const HANDLER_NAMES: Record<HookName, string> = {
  CanUpdateMachineSet: 'can-update-machineset',
  CanUpdateMachine: 'can-update-machine',
  UpdateMachine: 'update-machine',
};

/** `POST <prefix>/<hook lowercase>/<handler>`: the path Cluster API calls a handler at. */
export function handlerPath(hook: HookName): string {
  return `${HOOKS_PATH_PREFIX}/${hook.toLowerCase()}/${HANDLER_NAMES[hook]}`;
}

export const DISCOVERY_PATH = `${HOOKS_PATH_PREFIX}/discovery`;

export type PatchType = 'JSONPatch' | 'JSONMergePatch';

/** On the wire `patch` is base64 (a Go []byte). */
export interface WirePatch {
  patchType: PatchType;
  patch: string;
}

/** A JSON Patch operation (RFC 6902); oscar only ever replaces or adds. */
export interface JsonPatchOp {
  op: 'add' | 'replace';
  path: string;
  value: unknown;
}

export function encodePatch(ops: JsonPatchOp[]): WirePatch {
  return { patchType: 'JSONPatch', patch: Buffer.from(JSON.stringify(ops)).toString('base64') };
}

/** An object as Cluster API sends it (RawExtension or a typed object): what oscar reads of it. */
export interface HookObject {
  apiVersion?: string;
  kind?: string;
  metadata?: {
    name?: string;
    namespace?: string;
    annotations?: Record<string, string>;
    labels?: Record<string, string>;
  };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
}

export interface CanUpdateMachineSetRequest {
  current?: {
    machineSet?: HookObject;
    infrastructureMachineTemplate?: HookObject;
    bootstrapConfigTemplate?: HookObject;
  };
  desired?: CanUpdateMachineSetRequest['current'];
}

export interface CanUpdateMachineRequest {
  current?: {
    machine?: HookObject;
    infrastructureMachine?: HookObject;
    bootstrapConfig?: HookObject;
  };
  desired?: CanUpdateMachineRequest['current'];
}

export interface UpdateMachineRequest {
  desired?: {
    machine?: HookObject;
    infrastructureMachine?: HookObject;
    bootstrapConfig?: HookObject;
  };
}

export type ResponseStatus = 'Success' | 'Failure';

export interface CommonResponse {
  apiVersion: typeof HOOKS_API_VERSION;
  kind: string;
  status: ResponseStatus;
  message?: string;
}

export interface CanUpdateMachineSetResponse extends CommonResponse {
  machineSetPatch?: WirePatch;
  infrastructureMachineTemplatePatch?: WirePatch;
  bootstrapConfigTemplatePatch?: WirePatch;
}

export interface CanUpdateMachineResponse extends CommonResponse {
  machinePatch?: WirePatch;
  infrastructureMachinePatch?: WirePatch;
  bootstrapConfigPatch?: WirePatch;
}

export interface UpdateMachineResponse extends CommonResponse {
  /** > 0: still in progress, call again after it; 0 (with Success): done. */
  retryAfterSeconds: number;
}

export interface DiscoveryResponse extends CommonResponse {
  handlers: {
    name: string;
    requestHook: { apiVersion: string; hook: HookName };
    timeoutSeconds: number;
    failurePolicy: 'Fail' | 'Ignore';
  }[];
}
