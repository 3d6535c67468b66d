/**
 * CanUpdateMachineSet / CanUpdateMachine: which part of a change oscar applies in place. Cluster
 * API applies the returned patches to `current` and updates in place only if the result equals
 * `desired`, so oscar answers with patches covering exactly what it can do and nothing else:
 *
 * - `reconcileRef` moving to another reconcile OSC: the node's agent is granted that OSC's
 *   rendering (UpdateMachine) — in place unless `replacementReason` (api/in-place.ts, the rule the
 *   agent refuses by) says the two renderings need a new machine (another OS type, another cgroup
 *   driver), or the new OSC has not rendered yet.
 * - everything else (`provisionRef`, `values`, `format`, `agent`): what they change was written
 *   on the machine at its first boot and is never applied again (the user data is not
 *   regenerated), so only a new machine takes them: not covered, Cluster API rolls out.
 * - the Machine, the infrastructure: not oscar's; not covered.
 */
import { replacementReason } from '../../api/in-place.js';
import { BOOTSTRAP_GROUP } from '../../api/bootstrap/constants.js';
import {
  encodePatch,
  HOOKS_API_VERSION,
  type CanUpdateMachineRequest,
  type CanUpdateMachineResponse,
  type CanUpdateMachineSetRequest,
  type CanUpdateMachineSetResponse,
  type HookObject,
} from './hooks.js';
import type { ReconcileStates } from './reconcile-state.js';

/** The part of an OscarConfig spec the decision reads. */
interface ConfigSpec {
  reconcileRef?: { name?: string };
}

export interface Coverage {
  /** The reconcileRef to patch `current` to, when oscar takes the change in place. */
  reconcileRef?: { name: string };
  /** Why oscar leaves (part of) the change to a rollout, or what it will do: the reply. */
  message: string;
  /** The full reason, for the extension's log only (never in a reply). */
  detail?: string;
  /** The new rendering's checksum when in place: for trusted callers (oscar capi preview), never in a reply. */
  checksum?: string;
}

function isOscar(obj: HookObject | undefined): boolean {
  return (obj?.apiVersion ?? '').split('/')[0] === BOOTSTRAP_GROUP;
}

function specAt(obj: HookObject | undefined, template: boolean): ConfigSpec | undefined {
  if (!template) return obj?.spec;
  const t = obj?.spec?.template as { spec?: ConfigSpec } | undefined;
  return t?.spec;
}

/** Decides, for one current → desired OscarConfig spec, what oscar applies in place. */
export async function reconcileCoverage(
  namespace: string,
  current: ConfigSpec | undefined,
  desired: ConfigSpec | undefined,
  states: ReconcileStates,
): Promise<Coverage> {
  const from = current?.reconcileRef?.name;
  const to = desired?.reconcileRef?.name;
  if (!from || !to) return { message: 'no reconcileRef on both sides: nothing oscar updates' };
  if (from === to) return { message: `reconcileRef unchanged (${to})` };
  const [was, now] = await Promise.all([states.get(namespace, from), states.get(namespace, to)]);
  // The request is unauthenticated input: the reply says no more than the verdict. Whether an OSC
  // exists, why it has no rendering, its checksum and contents stay out of it (the extension's
  // log has them); the OSCs' own status says the rest to whoever may read them.
  if ('missing' in now || 'missing' in was) {
    return {
      message: `not in place: reconcile OSCs ${from} and ${to} do not both have a rendering to compare (see their status)`,
      detail: 'missing' in now ? now.missing : 'missing' in was ? was.missing : '',
    };
  }
  const reason = replacementReason(was.config, now.config);
  if (reason !== undefined) {
    return {
      message: `not in place: the rendering of ${to} needs a new machine (see the OSCs' status)`,
      detail: reason,
    };
  }
  return {
    reconcileRef: { name: to },
    message: `reconcileRef ${from} → ${to} in place`,
    checksum: now.checksum,
  };
}

function namespaceOf(...objs: (HookObject | undefined)[]): string {
  for (const o of objs) if (o?.metadata?.namespace) return o.metadata.namespace;
  return '';
}

/** Where a decision's full reason goes: the extension's log, never the reply. */
export type DetailSink = (detail: string) => void;

export async function canUpdateMachineSet(
  req: CanUpdateMachineSetRequest,
  states: ReconcileStates,
  note: DetailSink = () => undefined,
): Promise<CanUpdateMachineSetResponse> {
  const response: CanUpdateMachineSetResponse = {
    apiVersion: HOOKS_API_VERSION,
    kind: 'CanUpdateMachineSetResponse',
    status: 'Success',
  };
  const cur = req.current?.bootstrapConfigTemplate;
  const des = req.desired?.bootstrapConfigTemplate;
  if (!isOscar(cur) || !isOscar(des)) {
    response.message = 'no OscarConfigTemplate on both sides: nothing oscar updates';
    return response;
  }
  const namespace = namespaceOf(cur, des, req.current?.machineSet);
  const c = await reconcileCoverage(namespace, specAt(cur, true), specAt(des, true), states);
  response.message = c.message;
  if (c.detail !== undefined) note(c.detail);
  if (c.reconcileRef) {
    response.bootstrapConfigTemplatePatch = encodePatch([
      { op: 'add', path: '/spec/template/spec/reconcileRef', value: c.reconcileRef },
    ]);
  }
  return response;
}

export async function canUpdateMachine(
  req: CanUpdateMachineRequest,
  states: ReconcileStates,
  note: DetailSink = () => undefined,
): Promise<CanUpdateMachineResponse> {
  const response: CanUpdateMachineResponse = {
    apiVersion: HOOKS_API_VERSION,
    kind: 'CanUpdateMachineResponse',
    status: 'Success',
  };
  const cur = req.current?.bootstrapConfig;
  const des = req.desired?.bootstrapConfig;
  if (!isOscar(cur) || !isOscar(des)) {
    response.message = 'no OscarConfig on both sides: nothing oscar updates';
    return response;
  }
  const namespace = namespaceOf(cur, des, req.current?.machine);
  const c = await reconcileCoverage(namespace, specAt(cur, false), specAt(des, false), states);
  response.message = c.message;
  if (c.detail !== undefined) note(c.detail);
  if (c.reconcileRef) {
    response.bootstrapConfigPatch = encodePatch([
      { op: 'add', path: '/spec/reconcileRef', value: c.reconcileRef },
    ]);
  }
  return response;
}
