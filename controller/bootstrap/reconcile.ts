/**
 * One reconcile of one OscarConfig, in phases: delete → owner (a Cluster API Machine, or none) →
 * pause → node access (the machine's Role follows spec.reconcileRef) → joined → render once
 * (token, Secret) → token upkeep → status. Reads come from caches,
 * writes go through a narrow Writer, so it is unit-tested in memory and integration-tested
 * against the real API server and Cluster API's manager unchanged.
 *
 * Cost per machine, by design: a new machine costs three writes (its token, its Secret, one status
 * write); a running one none; a token refresh one per half TTL until the machine joins; joining
 * two (the token's deletion, one status write). No finalizer: the data Secret carries a controller
 * owner reference (the garbage collector deletes it with the config) and the token, in another
 * namespace, is deleted when the config's deletion is seen (expiring on its own if that is missed).
 * Events only for what an operator must act on.
 *
 * A machine's user data is rendered once: later changes of the config or its OSCs reach the node
 * through the reconcile OSC (the agent, or Cluster API's in-place update), never through new user
 * data. The one exception is a token that expired before the machine joined: the user data is then
 * rendered again with a new token, with a Warning Event.
 */
import { configLabelValue, machineNameTooLong, reservedDataSecretName } from './reserved-names.js';
import {
  ANNOTATION_TOKEN_ID,
  BOOTSTRAP_API_VERSION,
  BOOTSTRAP_TOKEN_NAMESPACE,
  CAPI_CLUSTER_NAME_LABEL,
  CAPI_GROUP,
  CAPI_PAUSED_ANNOTATION,
  LABEL_CONFIG_NAME,
  LABEL_CONFIG_UID,
  OSCAR_CONFIG_KIND,
} from '../../api/bootstrap/constants.js';
import type { OscarConfigStatus } from '../../api/bootstrap/schema.js';
import { formatBytes } from '../../api/bytes.js';
import { formatFieldError, type FieldError } from '../../api/field-error.js';
import type { References } from '../../api/resolve.js';
import { LIMITS, type OperatingSystemConfigSpec } from '../../api/schema.js';
import { KEY_FORMAT, KEY_VALUE } from '../../api/secret.js';
import type { RendererRegistry } from '../../renderers/registry.js';
import { setConditions, type ConditionInput } from '../runtime/conditions.js';
import type { KubeObject, OscObject, OwnerReference } from '../kube/types.js';
import { jsonEqual, splitKey } from '../osc/reconcile.js';
import { PROVISION_SECRET_TYPE } from '../osc/secret-object.js';
import { machineGrantFor, nodeRole, nodeRoleCurrent, nodeRoleName } from '../shared/node-rbac.js';
import { renderMachine } from './render.js';
import {
  awaitingMessage,
  KUBELET_IDENTITY,
  kubeletBootstraps,
  pendingConsumers,
  type TokenConsumer,
} from './consumers.js';
import { caCertHashOrNone } from './ca-hash.js';
import { newTokenSecret, refreshDueAt, tokenIdFor, tokenSecretBody } from './token.js';
import type { ClusterObject, ConfigObject, MachineObject } from './types.js';
import { keyOf } from '../kube/informer.js';

/** What reconcile reads: the informer caches (the OSC controller's, shared, for OSCs and refs). */
export interface BootstrapCaches {
  config(namespace: string, name: string): ConfigObject | undefined;
  /** Metadata of the data Secret with this name, if it is one oscar made for a config. */
  dataSecret(namespace: string, name: string): KubeObject | undefined;
  osc(namespace: string, name: string): OscObject | undefined;
  /** The data of the Secrets and ConfigMaps a spec references. */
  references(namespace: string, spec: OperatingSystemConfigSpec): References;
  /** undefined when Cluster API is not installed, or the Machine is not (yet) in the cache. */
  machine(namespace: string, name: string): MachineObject | undefined;
  cluster(namespace: string, name: string): ClusterObject | undefined;
  /**
   * Whether an OperatingSystemConfigNode with this name exists (its agent has reported) and is
   * not another config's (its oscar.dev/config-uid label, when set, names this config's UID).
   */
  nodeReported(name: string, configUid?: string): boolean;
  /** The machine's Role the identity approver wrote (controller/shared/node-rbac.ts), if any. */
  nodeRole(namespace: string, name: string): RoleObject | undefined;
}

/** A Role, slimmed to what node access compares. */
export interface RoleObject extends KubeObject {
  rules?: unknown;
}

export interface BootstrapEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

/** What reconcile writes; each call is one API request. */
export interface BootstrapWriter {
  /** Server-side apply without force: a token Secret another manager wrote is a TokenConflictError. */
  applyToken(body: Record<string, unknown>): Promise<void>;
  /** Moves the token's expiration; TokenGoneError when it no longer exists. */
  refreshToken(id: string, expiration: string): Promise<void>;
  deleteToken(id: string): Promise<void>;
  /** Creates the data Secret; SecretExistsError when the name is taken. */
  createDataSecret(body: Record<string, unknown>): Promise<KubeObject | undefined>;
  /** Replaces the data Secret oscar made (a token re-issued before the machine joined). */
  replaceDataSecret(body: Record<string, unknown>): Promise<KubeObject | undefined>;
  patchStatus(
    namespace: string,
    name: string,
    status: OscarConfigStatus,
  ): Promise<KubeObject | undefined>;
  event(config: ConfigObject, event: BootstrapEvent): Promise<void>;
  /** Server-side apply of the machine's Role (the identity approver's field manager). */
  applyNodeRole(body: Record<string, unknown>): Promise<KubeObject | undefined>;
  /**
   * Deletes the machine's OperatingSystemConfigNode if it is labelled with this config UID (never
   * another identity's), preconditioned on what was read; whether it deleted one.
   */
  deleteNode(machine: string, configUid: string): Promise<boolean>;
}

export class TokenConflictError extends Error {
  override name = 'TokenConflictError';
}
export class TokenGoneError extends Error {
  override name = 'TokenGoneError';
}
export class SecretExistsError extends Error {
  override name = 'SecretExistsError';
}

export interface BootstrapSettings {
  registry: RendererRegistry;
  apiServer: { url: string; caPem: string };
  /** The agent's source for the cluster (--agent-url, --agent-sha256); a config may override. */
  agent: { url?: string; sha256?: string };
  /** {{ cluster.name }} for machines without a Cluster API Cluster (--cluster-name). */
  clusterName?: string;
  tokenTtlMs: number;
  newTokenSecret?: () => string;
  /**
   * How long after its user data was written a machine may go without asking for its identity
   * before the config says so (NodeIdentity=False, NotRequested, and a Warning Event): the
   * agent's download, checksum or start failed on a machine nobody can see. Unset: never.
   */
  identityWaitMs?: number;
}

/** What the controller remembers of a config's token between passes (not persisted). */
export interface TokenState {
  uid: string;
  id: string;
  expiresAt: Date;
  /** The token was found gone before the machine joined: render the user data again. */
  reissue?: boolean;
}

/** A deleted config's machine, remembered from its last state until its node object is gone. */
export interface Departed {
  machine: string;
  uid: string;
}

/** What a deleted config leaves to clean up outside its owner references. */
export function departedOf(config: ConfigObject): Departed | undefined {
  const uid = config.metadata.uid;
  return uid ? { machine: machineOwner(config)?.name ?? config.metadata.name, uid } : undefined;
}

/** Who used a machine's token, told in-process (controller/identity/): never refresh or re-issue it. */
export interface TokenConsumed {
  reason: string;
  message: string;
}

export interface BootstrapDeps {
  caches: BootstrapCaches;
  writer: BootstrapWriter;
  settings: BootstrapSettings;
  tokens: Map<string, TokenState>;
  /** Configs whose token the identity approver consumed (until their status says so). */
  consumed?: Map<string, TokenConsumed>;
  /** Deleted configs whose machine's node object is still to be deleted, by config key. */
  departed?: Map<string, Departed>;
  now: () => Date;
}

export type BootstrapResult =
  | 'created' // token and Secret written
  | 'reissued' // the token had expired before the machine joined: new token, new user data
  | 'refreshed' // the token's expiration moved
  | 'joined' // the machine joined: its token deleted
  | 'access' // the machine's Role rewritten for the config's reconcile OSC
  | 'unchanged'
  | 'paused'
  | 'waiting' // for its Machine, Cluster, or an OSC
  | 'failed' // a condition says why (invalid provision OSC, name taken, …)
  | 'deleted';

export interface BootstrapOutcome {
  result: BootstrapResult;
  writes: number;
  /** When to look again (a token refresh). */
  requeueAfterMs?: number;
}

/** The data Secret's name: the config's, as Cluster API's kubeadm provider does. */
export function dataSecretNameFor(config: ConfigObject): string {
  return config.metadata.name;
}

/** The Machine that owns the config (Cluster API sets itself as owner), if any. */
export function machineOwner(config: ConfigObject): OwnerReference | undefined {
  return config.metadata.ownerReferences?.find(
    (r) => r.kind === 'Machine' && r.apiVersion.startsWith(`${CAPI_GROUP}/`),
  );
}

interface Target {
  machineName: string;
  clusterName?: string;
  machine?: MachineObject;
  paused: boolean;
}

type Failure = { reason: string; message: string };

// Phase: owner — a Cluster API Machine's config waits for its Machine and Cluster; any other is
// a machine of its own (named like the config).
function target(config: ConfigObject, caches: BootstrapCaches): Target | Failure {
  const ns = config.metadata.namespace ?? '';
  const pausedHere = config.metadata.annotations?.[CAPI_PAUSED_ANNOTATION] !== undefined;
  const owner = machineOwner(config);
  const clusterLabel = config.metadata.labels?.[CAPI_CLUSTER_NAME_LABEL];
  if (!owner) {
    if (clusterLabel !== undefined) {
      // Made for Cluster API (from a template, or labelled so): wait until a Machine owns it,
      // or its user data would lack the machine's name and cluster.
      return {
        reason: 'WaitingForMachine',
        message: `The config is labelled ${CAPI_CLUSTER_NAME_LABEL}=${clusterLabel}; waiting for its Cluster API Machine to own it.`,
      };
    }
    return { machineName: config.metadata.name, paused: pausedHere };
  }
  const machine = caches.machine(ns, owner.name);
  if (!machine) {
    return {
      reason: 'WaitingForMachine',
      message: `Waiting for Machine ${owner.name} (is Cluster API's v1beta2 API installed?).`,
    };
  }
  const clusterName = machine.spec?.clusterName ?? clusterLabel;
  const cluster = clusterName ? caches.cluster(ns, clusterName) : undefined;
  if (!clusterName || !cluster) {
    return {
      reason: 'WaitingForCluster',
      message: `Waiting for Cluster ${clusterName ?? '(unnamed)'} of Machine ${owner.name}.`,
    };
  }
  return {
    machineName: machine.metadata.name,
    clusterName,
    machine,
    paused: pausedHere || cluster.spec?.paused === true,
  };
}

function joined(config: ConfigObject, t: Target, caches: BootstrapCaches): boolean {
  return (
    (t.machine?.status?.nodeRef?.name ?? '') !== '' ||
    caches.nodeReported(t.machineName, config.metadata.uid)
  );
}

function errorsMessage(errors: readonly FieldError[]): string {
  return errors.map(formatFieldError).join('; ');
}

interface Rendered {
  data: Record<string, Buffer>;
  format: string;
  size: number;
  warnings: string[];
  token: { id: string; secret: string };
  /** The provision OSC hands the token to kubeadm join: cluster-info must be signed for it. */
  signing: boolean;
}

function withCaHash(apiServer: { url: string; caPem: string }): {
  url: string;
  caCertHash?: string;
} {
  const hash = caCertHashOrNone(apiServer.caPem);
  return hash === undefined ? { url: apiServer.url } : { url: apiServer.url, caCertHash: hash };
}

// Phase: render — the provision OSC with the machine's values and the bootstrap additions.
async function render(
  config: ConfigObject,
  t: Target,
  deps: BootstrapDeps,
  tokenId: string,
): Promise<Rendered | Failure> {
  const sources = renderSources(config, deps);
  if ('reason' in sources) return sources;
  const { settings } = deps;
  const token = { id: tokenId, secret: (settings.newTokenSecret ?? newTokenSecret)() };
  const rendered = await renderMachine(
    settings.registry,
    machineInput(config, t, deps, sources, token),
  );
  if (!rendered.ok) {
    const where =
      rendered.stage === 'bootstrap'
        ? 'the bootstrap additions'
        : `OperatingSystemConfig "${config.spec.provisionRef.name}"`;
    return {
      reason: rendered.stage === 'resolve' ? 'ReferenceNotFound' : 'InvalidProvisionConfig',
      message: `${where}: ${errorsMessage(rendered.errors)}.`,
    };
  }
  const data = {
    [KEY_VALUE]: rendered.userData,
    [KEY_FORMAT]: Buffer.from(rendered.format, 'utf8'),
  };
  const size = rendered.userData.length + rendered.format.length + 11;
  if (size > LIMITS.secretBytes) {
    return {
      reason: 'TooLarge',
      message: `The user data would be ${formatBytes(size)}, above the ${formatBytes(LIMITS.secretBytes)} a Secret holds.`,
    };
  }
  return {
    data,
    format: rendered.format,
    size,
    warnings: rendered.warnings,
    token,
    signing: rendered.placeholders.has('bootstrap.token'),
  };
}

/** What a machine's user data is made from: the provision OSC and where the agent comes from. */
interface RenderSources {
  provision: NonNullable<ReturnType<BootstrapCaches['osc']>>;
  agent: { url: string; sha256: string };
}

/** Both referenced OSCs exist (the reconcile one for the agent to follow) and an agent source. */
function renderSources(config: ConfigObject, deps: BootstrapDeps): RenderSources | Failure {
  const { caches, settings } = deps;
  const ns = config.metadata.namespace ?? '';
  const { provisionRef, reconcileRef } = config.spec;
  const provision = caches.osc(ns, provisionRef.name);
  if (!provision) {
    return {
      reason: 'ProvisionConfigNotFound',
      message: `spec.provisionRef: OperatingSystemConfig "${provisionRef.name}" not found in namespace ${ns}; create it or fix the name.`,
    };
  }
  const reconcile = caches.osc(ns, reconcileRef.name);
  if (!reconcile) {
    return {
      reason: 'ReconcileConfigNotFound',
      message: `spec.reconcileRef: OperatingSystemConfig "${reconcileRef.name}" not found in namespace ${ns}; create it or fix the name.`,
    };
  }
  if (reconcile.spec.purpose !== 'reconcile') {
    return {
      reason: 'InvalidReconcileConfig',
      message: `spec.reconcileRef: OperatingSystemConfig "${reconcileRef.name}" has purpose ${reconcile.spec.purpose}; the agent follows a reconcile OSC.`,
    };
  }
  const url = config.spec.agent?.url ?? settings.agent.url;
  const sha256 = config.spec.agent?.sha256 ?? settings.agent.sha256;
  if (!url || !sha256) {
    return {
      reason: 'AgentSourceMissing',
      message:
        "No agent source: set the controller's --agent-url and --agent-sha256, or spec.agent.url and spec.agent.sha256.",
    };
  }
  return { provision, agent: { url, sha256 } };
}

/** The machine's placeholders (its name, cluster, API server, token, values) and additions. */
function machineInput(
  config: ConfigObject,
  t: Target,
  deps: BootstrapDeps,
  sources: RenderSources,
  token: { id: string; secret: string },
): Parameters<typeof renderMachine>[1] {
  const { caches, settings } = deps;
  const ns = config.metadata.namespace ?? '';
  const { provisionRef, reconcileRef } = config.spec;
  return {
    provision: { name: provisionRef.name, namespace: ns, spec: sources.provision.spec },
    refs: (spec) => caches.references(ns, spec),
    placeholders: {
      machine: { name: t.machineName, namespace: ns },
      ...((t.clusterName ?? settings.clusterName)
        ? { cluster: { name: t.clusterName ?? settings.clusterName ?? '' } }
        : {}),
      apiServer: withCaHash(settings.apiServer),
      bootstrap: { token: `${token.id}.${token.secret}` },
      values: config.spec.values ?? {},
    },
    bootstrap: {
      machine: { name: t.machineName, namespace: ns },
      configUid: config.metadata.uid ?? '',
      apiServer: settings.apiServer,
      token,
      reconcileOsc: reconcileRef.name,
      agent: sources.agent,
    },
    ...(config.spec.format ? { format: config.spec.format } : {}),
  };
}

function dataSecretBody(
  config: ConfigObject,
  t: Target,
  rendered: Rendered,
): Record<string, unknown> {
  const labels: Record<string, string> = {
    [LABEL_CONFIG_NAME]: configLabelValue(config.metadata.name),
    [LABEL_CONFIG_UID]: config.metadata.uid ?? '',
  };
  if (t.clusterName && t.machine) labels[CAPI_CLUSTER_NAME_LABEL] = t.clusterName;
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    type: PROVISION_SECRET_TYPE,
    metadata: {
      name: dataSecretNameFor(config),
      namespace: config.metadata.namespace,
      labels,
      annotations: { [ANNOTATION_TOKEN_ID]: rendered.token.id },
      ownerReferences: [
        {
          apiVersion: BOOTSTRAP_API_VERSION,
          kind: OSCAR_CONFIG_KIND,
          name: config.metadata.name,
          uid: config.metadata.uid ?? '',
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    data: Object.fromEntries(
      Object.entries(rendered.data).map(([k, v]) => [k, v.toString('base64')]),
    ),
  };
}

const TOKEN_ATTEMPTS = 4;

// Phase: token and Secret — the token first, so the user data never names a token that does not
// exist; a token id someone else holds moves to the next derived id.
async function issue(
  config: ConfigObject,
  t: Target,
  deps: BootstrapDeps,
  replace: boolean,
): Promise<{ rendered: Rendered; writes: number } | Failure> {
  const reserved = reservedDataSecretName(dataSecretNameFor(config));
  if (reserved) return { reason: 'SecretNameReserved', message: reserved };
  const tooLong = machineNameTooLong(t.machineName);
  if (tooLong) return { reason: 'MachineNameTooLong', message: tooLong };
  const uid = config.metadata.uid ?? '';
  let writes = 0;
  for (let attempt = 0; attempt < TOKEN_ATTEMPTS; attempt++) {
    const rendered = await render(config, t, deps, tokenIdFor(uid, attempt));
    if ('reason' in rendered) return rendered;
    const expiresAt = new Date(deps.now().getTime() + deps.settings.tokenTtlMs);
    try {
      await deps.writer.applyToken(
        tokenSecretBody(
          rendered.token,
          expiresAt,
          {
            configNamespace: config.metadata.namespace ?? '',
            configName: config.metadata.name,
            configUid: uid,
            machineName: t.machineName,
          },
          { signing: rendered.signing },
        ),
      );
      writes++;
    } catch (error) {
      if (error instanceof TokenConflictError) continue;
      throw error;
    }
    const body = dataSecretBody(config, t, rendered);
    try {
      if (replace) await deps.writer.replaceDataSecret(body);
      else await deps.writer.createDataSecret(body);
      writes++;
    } catch (error) {
      if (!(error instanceof SecretExistsError)) throw error;
      await deps.writer.deleteToken(rendered.token.id);
      return {
        reason: 'SecretNameTaken',
        message: `A Secret named ${dataSecretNameFor(config)} already exists in namespace ${config.metadata.namespace ?? ''} and was not made for this config; delete or rename it.`,
      };
    }
    // A token this config held before (its Secret was written again under another id) goes.
    const previous = deps.tokens.get(keyOf(config))?.id ?? config.status?.bootstrapTokenID;
    if (previous && previous !== rendered.token.id) {
      await deps.writer.deleteToken(previous);
      writes++;
    }
    deps.tokens.set(keyOf(config), { uid, id: rendered.token.id, expiresAt });
    return { rendered, writes };
  }
  return {
    reason: 'TokenConflict',
    message: `The bootstrap token ids derived for this config are all taken in ${BOOTSTRAP_TOKEN_NAMESPACE}.`,
  };
}

const READY_CREATED: ConditionInput = {
  type: 'Ready',
  status: 'True',
  reason: 'DataSecretAvailable',
  message: 'The user data Secret exists.',
};

/** The status after a pass; only the fields and conditions this controller owns. */
function statusWith(
  config: ConfigObject,
  inputs: ConditionInput[],
  now: Date,
  fields: Partial<OscarConfigStatus> = {},
): OscarConfigStatus {
  const current = config.status ?? {};
  const status: OscarConfigStatus = {};
  for (const k of [
    'dataSecretName',
    'initialization',
    'format',
    'size',
    'bootstrapTokenID',
    'bootstrapTokenNeededBy',
  ] as const) {
    if (current[k] !== undefined) (status as Record<string, unknown>)[k] = current[k];
  }
  Object.assign(status, fields);
  const generation = config.metadata.generation;
  if (generation !== undefined) status.observedGeneration = generation;
  status.conditions = setConditions(current.conditions, inputs, generation, now);
  return status;
}

/**
 * The status that says the token was consumed (by the identity approver), written before the
 * token is deleted so the token's absence is never read as "expired unused".
 */
export function consumedStatus(
  config: ConfigObject,
  consumed: TokenConsumed,
  now: Date,
  consumer: TokenConsumer = 'agent',
  consumedMap?: ReadonlyMap<string, unknown>,
): OscarConfigStatus {
  const identity: ConditionInput = {
    type: consumer === 'agent' ? 'NodeIdentity' : KUBELET_IDENTITY,
    status: 'True',
    reason: 'Issued',
    message: consumed.message,
  };
  if (!kubeletBootstraps(config)) {
    return statusWith(
      config,
      [{ type: 'BootstrapTokenAvailable', status: 'False', ...consumed }, identity],
      now,
    );
  }
  // kubelet bootstraps too: the token goes only once both have their certificates
  const pending = pendingConsumers(config, consumedMap, consumer);
  const token: ConditionInput =
    pending.length === 0
      ? { type: 'BootstrapTokenAvailable', status: 'False', ...consumed }
      : {
          type: 'BootstrapTokenAvailable',
          status: 'True',
          reason: pending.includes('agent') ? 'AwaitingAgent' : 'AwaitingKubelet',
          message: awaitingMessage(config.status?.bootstrapTokenID ?? '', pending),
        };
  return statusWith(config, [token, identity], now, { bootstrapTokenNeededBy: pending });
}

/** NodeIdentity=False: the machine has not asked for its identity in time (see identityWaitMs). */
function notRequested(waitedMs: number): ConditionInput {
  return {
    type: 'NodeIdentity',
    status: 'False',
    reason: 'NotRequested',
    message: `The machine's agent has not asked for its certificate ${String(Math.round(waitedMs / 60_000))} min after the user data was written: the agent's download, sha256 check or start probably failed. On the machine: journalctl -u oscar-agent-install -u oscar-agent.`,
  };
}

async function writeStatus(
  config: ConfigObject,
  status: OscarConfigStatus,
  deps: BootstrapDeps,
): Promise<number> {
  if (jsonEqual(status, config.status ?? {})) return 0;
  await deps.writer.patchStatus(config.metadata.namespace ?? '', config.metadata.name, status);
  return 1;
}

const NOT_PAUSED: ConditionInput = {
  type: 'Paused',
  status: 'False',
  reason: 'NotPaused',
  message: '',
};

// Phase: delete — the token lives in kube-system and the machine's node object is cluster-wide:
// no owner reference reaches either. The node object goes too (a machine Cluster API scaled
// down would otherwise stay in its OSC's counts and rollouts), but only the one labelled with
// this config's UID: an object of the same name issued to another config is never touched.
async function reconcileDelete(
  key: string,
  config: ConfigObject | undefined,
  deps: BootstrapDeps,
): Promise<BootstrapOutcome> {
  const known = deps.tokens.get(key);
  const id = known?.id ?? config?.status?.bootstrapTokenID;
  deps.tokens.delete(key);
  const tokenLive =
    config?.status?.conditions?.find((c) => c.type === 'BootstrapTokenAvailable')?.status !==
    'False';
  let writes = 0;
  if (id && (known || tokenLive)) {
    await deps.writer.deleteToken(id);
    writes++;
  }
  const departed = (config ? departedOf(config) : undefined) ?? deps.departed?.get(key);
  if (departed && (await deps.writer.deleteNode(departed.machine, departed.uid))) writes++;
  deps.departed?.delete(key);
  return { result: 'deleted', writes };
}

// Phase: node access — the Role the identity approver wrote when it issued the machine's
// certificate names the Secrets of the reconcile OSC; when spec.reconcileRef changes (Cluster
// API's in-place update patches it before it asks for the update, or an operator), the Role is
// rewritten for the new OSC, so the node can read the new OSC's revision Secrets before a grant
// of them lands. Only the new OSC: a node never reads an OSC its config no longer names (its
// applied state is on its disk). No Role yet: no identity yet, the approver writes it then
// (from the config as it is then). A Role another config owns (a machine name reused) is left to
// that config. One write when the rules differ, none at steady state.
async function nodeAccess(config: ConfigObject, t: Target, deps: BootstrapDeps): Promise<number> {
  const ns = config.metadata.namespace ?? '';
  const stored = deps.caches.nodeRole(ns, nodeRoleName(t.machineName));
  if (!stored) return 0;
  const owned = stored.metadata.ownerReferences?.some(
    (o) => o.kind === OSCAR_CONFIG_KIND && o.uid === config.metadata.uid,
  );
  if (owned !== true) return 0;
  const desired = nodeRole(machineGrantFor(config, t.machineName));
  if (nodeRoleCurrent(stored, desired)) return 0;
  await deps.writer.applyNodeRole(desired);
  return 1;
}

/** What token upkeep knows of a config whose user data Secret exists. */
interface Upkeep {
  key: string;
  now: Date;
  id: string | undefined;
  secret: KubeObject | undefined;
  /** Ready and Paused, and DataSecretAvailable as the creating pass said it. */
  base: ConditionInput[];
  fields: Partial<OscarConfigStatus>;
  kubelet: boolean;
  pending: TokenConsumer[];
}

function upkeepOf(config: ConfigObject, deps: BootstrapDeps): Upkeep {
  const key = keyOf(config);
  const secret = deps.caches.dataSecret(config.metadata.namespace ?? '', dataSecretNameFor(config));
  const id =
    deps.tokens.get(key)?.id ??
    secret?.metadata.annotations?.[ANNOTATION_TOKEN_ID] ??
    config.status?.bootstrapTokenID;
  // What the creating pass said about the rendering stays (it is not known here).
  const before = config.status?.conditions?.find((c) => c.type === 'DataSecretAvailable');
  const secretAvailable: ConditionInput = {
    type: 'DataSecretAvailable',
    status: 'True',
    reason: 'Created',
    message: before?.status === 'True' ? before.message : 'The user data Secret exists.',
  };
  const fields: Partial<OscarConfigStatus> = {
    dataSecretName: dataSecretNameFor(config),
    initialization: { dataSecretCreated: true },
  };
  if (id) fields.bootstrapTokenID = id;
  const kubelet = kubeletBootstraps(config);
  const pending = pendingConsumers(config, deps.consumed);
  if (kubelet) fields.bootstrapTokenNeededBy = pending;
  return {
    key,
    now: deps.now(),
    id,
    secret,
    base: [READY_CREATED, NOT_PAUSED, secretAvailable],
    fields,
    kubelet,
    pending,
  };
}

// Phase: token upkeep for a machine whose Secret exists.
async function upkeep(
  config: ConfigObject,
  t: Target,
  deps: BootstrapDeps,
): Promise<BootstrapOutcome> {
  const u = upkeepOf(config, deps);
  if (u.kubelet && !u.pending.includes('agent')) {
    return kubeletUpkeep(config, u, deps);
  }
  // Consumed: whoever used the token says so in the status before deleting it (the agent's CSR
  // approver), so a token gone before the node reports is not mistaken for one that expired
  // unused. With kubelet bootstrapping, a registered Node (Machine nodeRef) is no sign the agent
  // is done: only its issued certificate is (kubeletUpkeep).
  const tokenCondition = config.status?.conditions?.find(
    (c) => c.type === 'BootstrapTokenAvailable',
  );
  const consumed = tokenCondition?.status === 'False' || deps.consumed?.get(u.key) !== undefined;
  if ((!u.kubelet && joined(config, t, deps.caches)) || consumed) {
    return retireToken(config, u, consumed, deps);
  }
  return keepToken(config, u, deps);
}

/** The machine joined or the token was used: delete it (if unused) and say why it is gone. */
async function retireToken(
  config: ConfigObject,
  u: Upkeep,
  consumed: boolean,
  deps: BootstrapDeps,
): Promise<BootstrapOutcome> {
  const consumedBy = deps.consumed?.get(u.key);
  const tokenCondition = config.status?.conditions?.find(
    (c) => c.type === 'BootstrapTokenAvailable',
  );
  let writes = 0;
  if (!consumed && u.id) {
    await deps.writer.deleteToken(u.id);
    writes++;
  }
  deps.tokens.delete(u.key);
  const token: ConditionInput = consumedBy
    ? { type: 'BootstrapTokenAvailable', status: 'False', ...consumedBy }
    : tokenCondition && consumed
      ? {
          type: 'BootstrapTokenAvailable',
          status: 'False',
          reason: tokenCondition.reason,
          message: tokenCondition.message,
        }
      : {
          type: 'BootstrapTokenAvailable',
          status: 'False',
          reason: 'MachineJoined',
          message: 'The machine joined; its bootstrap token was deleted.',
        };
  const status = statusWith(config, [...u.base, token], u.now, u.fields);
  writes += await writeStatus(config, status, deps);
  return { result: writes > 0 ? 'joined' : 'unchanged', writes };
}

/**
 * Moves the token's expiration on when due (after a restart it is not known: refresh once, then
 * on schedule). Undefined when the token was found gone: the pass must re-issue.
 */
async function refreshWhenDue(
  config: ConfigObject,
  u: Upkeep & { id: string },
  deps: BootstrapDeps,
): Promise<{ state: TokenState; refreshed: boolean } | undefined> {
  const ttl = deps.settings.tokenTtlMs;
  const state = deps.tokens.get(u.key);
  if (state && state.uid === config.metadata.uid && refreshDueAt(state.expiresAt, ttl) > u.now) {
    return { state, refreshed: false };
  }
  const expiresAt = new Date(u.now.getTime() + ttl);
  try {
    await deps.writer.refreshToken(u.id, expiresAt.toISOString().replace(/\.\d{3}Z$/, 'Z'));
  } catch (error) {
    if (!(error instanceof TokenGoneError)) throw error;
    // Expired and cleaned before the machine joined: the user data holds a dead token.
    deps.tokens.set(u.key, {
      uid: config.metadata.uid ?? '',
      id: u.id,
      expiresAt: u.now,
      reissue: true,
    });
    return undefined;
  }
  const refreshed = { uid: config.metadata.uid ?? '', id: u.id, expiresAt };
  deps.tokens.set(u.key, refreshed);
  return { state: refreshed, refreshed: true };
}

/** How long the machine has gone without asking for its identity, and whether that is too long. */
function identityWait(
  u: Upkeep,
  deps: BootstrapDeps,
): { waited: number; late: boolean; dueAt: number | undefined } {
  const waitMs = deps.settings.identityWaitMs;
  const written = Date.parse(u.secret?.metadata.creationTimestamp ?? '');
  const waited = u.now.getTime() - written;
  if (waitMs === undefined || !Number.isFinite(written)) {
    return { waited, late: false, dueAt: undefined };
  }
  return { waited, late: waited >= waitMs, dueAt: written + waitMs };
}

/** The token stays until the machine joins: refreshed on schedule, a late machine reported. */
async function keepToken(
  config: ConfigObject,
  u: Upkeep,
  deps: BootstrapDeps,
): Promise<BootstrapOutcome> {
  const { id } = u;
  if (!id) throw new Error(`internal: ${u.key} has a Secret but no token id`);
  const refresh = await refreshWhenDue(config, { ...u, id }, deps);
  if (!refresh) return { result: 'waiting', writes: 0, requeueAfterMs: 0 };
  let writes = refresh.refreshed ? 1 : 0;
  // A machine that never asks for its identity cannot say why (no agent runs): say it here.
  const wait = identityWait(u, deps);
  const wasLate = config.status?.conditions?.some(
    (c) => c.type === 'NodeIdentity' && c.reason === 'NotRequested',
  );
  const newlyLate = wait.late && !wasLate;
  const token: ConditionInput = {
    type: 'BootstrapTokenAvailable',
    status: 'True',
    reason: 'Issued',
    message: u.kubelet
      ? awaitingMessage(id, u.pending)
      : `Token ${id} is refreshed until the machine joins.`,
  };
  const conditions = [...u.base, token, ...(newlyLate ? [notRequested(wait.waited)] : [])];
  writes += await writeStatus(config, statusWith(config, conditions, u.now, u.fields), deps);
  if (newlyLate) {
    await deps.writer.event(config, {
      type: 'Warning',
      reason: 'IdentityNotRequested',
      message: notRequested(wait.waited).message,
    });
    writes++;
  }
  let due =
    refreshDueAt(refresh.state.expiresAt, deps.settings.tokenTtlMs).getTime() - u.now.getTime();
  if (wait.dueAt !== undefined && !wait.late) due = Math.min(due, wait.dueAt - u.now.getTime());
  return {
    result: refresh.refreshed ? 'refreshed' : 'unchanged',
    writes,
    requeueAfterMs: Math.max(1000, due),
  };
}

// Phase: token upkeep once the agent has its certificate and kubelet bootstraps too. The token is
// not refreshed any more (it never outlives its TTL for kubelet); the approver deletes it when
// kubelet's certificate is issued. Past its expiry kubelet cannot register: the config says so.
async function kubeletUpkeep(
  config: ConfigObject,
  p: {
    id: string | undefined;
    pending: TokenConsumer[];
    base: ConditionInput[];
    fields: Partial<OscarConfigStatus>;
  },
  deps: BootstrapDeps,
): Promise<BootstrapOutcome> {
  const now = deps.now();
  const key = keyOf(config);
  const current = config.status?.conditions?.find((c) => c.type === 'BootstrapTokenAvailable');
  if (p.pending.length === 0) {
    deps.tokens.delete(key);
    const token: ConditionInput =
      current?.status === 'False'
        ? {
            type: 'BootstrapTokenAvailable',
            status: 'False',
            reason: current.reason,
            message: current.message,
          }
        : {
            type: 'BootstrapTokenAvailable',
            status: 'False',
            reason: 'Consumed',
            message: `Token ${p.id ?? ''} was used by the agent and kubelet; it is deleted.`,
          };
    const writes = await writeStatus(
      config,
      statusWith(config, [...p.base, token], now, p.fields),
      deps,
    );
    return { result: writes > 0 ? 'joined' : 'unchanged', writes };
  }
  const expiresAt = deps.tokens.get(key)?.expiresAt;
  const expired = expiresAt !== undefined && expiresAt.getTime() <= now.getTime();
  const token: ConditionInput = expired
    ? {
        type: 'BootstrapTokenAvailable',
        status: 'False',
        reason: 'ExpiredBeforeKubelet',
        message: `Token ${p.id ?? ''} expired before kubelet asked for its certificate: the machine cannot register as a Node; replace it (journalctl -u kubelet on the machine says why).`,
      }
    : {
        type: 'BootstrapTokenAvailable',
        status: 'True',
        reason: 'AwaitingKubelet',
        message: awaitingMessage(p.id ?? '', p.pending),
      };
  if (expired) p.fields.bootstrapTokenNeededBy = [];
  let writes = await writeStatus(
    config,
    statusWith(config, [...p.base, token], now, p.fields),
    deps,
  );
  if (expired && current?.reason !== 'ExpiredBeforeKubelet') {
    await deps.writer.event(config, {
      type: 'Warning',
      reason: 'KubeletNotRequested',
      message: token.message,
    });
    writes++;
  }
  const due = expired || expiresAt === undefined ? undefined : expiresAt.getTime() - now.getTime();
  return {
    result: 'waiting',
    writes,
    ...(due === undefined ? {} : { requeueAfterMs: Math.max(1000, due) }),
  };
}

/**
 * How long a new config may wait for its Machine or Cluster before its status says so. Cluster
 * API creates a machine's config before the Machine that owns it, so every new config waits a
 * second or two for its owner: a status written for that would be one more write per machine,
 * followed at once by the status with the user data (measured: hack/bench/capi-nodes.ts).
 */
export const WAIT_STATUS_GRACE_MS = 10_000;

// Phase: wait — the Machine, its Cluster or an OSC the config names is not there (yet).
async function waitForTarget(
  config: ConfigObject,
  t: Failure,
  deps: BootstrapDeps,
): Promise<BootstrapOutcome> {
  const age = deps.now().getTime() - Date.parse(config.metadata.creationTimestamp ?? '');
  if (config.status === undefined && age >= 0 && age < WAIT_STATUS_GRACE_MS) {
    // (the owner's arrival is a watch event of the config: that pass comes sooner)
    return { result: 'waiting', writes: 0, requeueAfterMs: WAIT_STATUS_GRACE_MS - age };
  }
  const status = statusWith(
    config,
    [
      { type: 'Ready', status: 'False', reason: t.reason, message: t.message },
      { type: 'DataSecretAvailable', status: 'False', reason: t.reason, message: t.message },
    ],
    deps.now(),
  );
  return { result: 'waiting', writes: await writeStatus(config, status, deps) };
}

// Phase: pause — Cluster API's pause (annotation or the Cluster's spec.paused) writes nothing else.
async function stayPaused(config: ConfigObject, deps: BootstrapDeps): Promise<BootstrapOutcome> {
  const status = statusWith(
    config,
    [
      {
        type: 'Paused',
        status: 'True',
        reason: 'Paused',
        message: `Paused (${CAPI_PAUSED_ANNOTATION} annotation or the Cluster's spec.paused); nothing is written until it is resumed.`,
      },
    ],
    deps.now(),
  );
  return { result: 'paused', writes: await writeStatus(config, status, deps) };
}

// Phase: render failed — the last good user data (if any) stays; a Warning Event once per reason.
async function renderFailed(
  config: ConfigObject,
  failure: Failure,
  deps: BootstrapDeps,
): Promise<BootstrapOutcome> {
  const { reason, message } = failure;
  const status = statusWith(
    config,
    [
      { type: 'Ready', status: 'False', reason, message },
      { type: 'DataSecretAvailable', status: 'False', reason, message },
      NOT_PAUSED,
    ],
    deps.now(),
  );
  const before = config.status?.conditions?.find((c) => c.type === 'Ready');
  let writes = await writeStatus(config, status, deps);
  if (writes > 0 && (before?.reason !== reason || before.status !== 'False')) {
    await deps.writer.event(config, { type: 'Warning', reason, message });
    writes++;
  }
  return { result: 'failed', writes };
}

// Phase: status — the user data and its token are written: say so, and when the token is due.
async function userDataWritten(
  config: ConfigObject,
  rendered: Rendered,
  deps: BootstrapDeps,
  reissue: boolean,
): Promise<number> {
  let writes = 0;
  if (reissue) {
    await deps.writer.event(config, {
      type: 'Warning',
      reason: 'TokenReissued',
      message: `The bootstrap token expired before the machine joined; new user data with token ${rendered.token.id} was written to Secret ${dataSecretNameFor(config)}. A machine that already booted with the old one cannot join: replace it.`,
    });
    writes++;
  }
  const warnings = rendered.warnings.length > 0 ? ` Warnings: ${rendered.warnings.join('; ')}` : '';
  // Said as token upkeep says it (keepToken), so the pass the Secret's watch event brings next
  // finds nothing to write: with kubelet bootstrapping, who still needs the token.
  const id = rendered.token.id;
  const pending = kubeletBootstraps(config) ? pendingConsumers(config, deps.consumed) : undefined;
  const status = statusWith(
    config,
    [
      READY_CREATED,
      {
        type: 'DataSecretAvailable',
        status: 'True',
        reason: 'Created',
        message: `Rendered as ${rendered.format} (${formatBytes(rendered.size)}).${warnings}`,
      },
      {
        type: 'BootstrapTokenAvailable',
        status: 'True',
        reason: 'Issued',
        message: pending
          ? awaitingMessage(id, pending)
          : `Token ${id} is refreshed until the machine joins.`,
      },
      NOT_PAUSED,
    ],
    deps.now(),
    {
      dataSecretName: dataSecretNameFor(config),
      initialization: { dataSecretCreated: true },
      format: rendered.format,
      size: rendered.size,
      bootstrapTokenID: id,
      ...(pending ? { bootstrapTokenNeededBy: pending } : {}),
    },
  );
  return writes + (await writeStatus(config, status, deps));
}

// Phases: token and render, Secret, status — a new token and the user data that carries it.
async function issueUserData(
  config: ConfigObject,
  t: Target,
  deps: BootstrapDeps,
  o: { ours: boolean; reissue: boolean },
): Promise<BootstrapOutcome> {
  const now = deps.now();
  const issued = await issue(config, t, deps, o.ours && o.reissue);
  if ('reason' in issued) return renderFailed(config, issued, deps);
  const writes = issued.writes + (await userDataWritten(config, issued.rendered, deps, o.reissue));
  const state = deps.tokens.get(keyOf(config));
  const due = state
    ? refreshDueAt(state.expiresAt, deps.settings.tokenTtlMs).getTime() - now.getTime()
    : deps.settings.tokenTtlMs / 2;
  return {
    result: o.reissue ? 'reissued' : 'created',
    writes,
    requeueAfterMs: Math.max(1000, due),
  };
}

/** The node access writes of this pass, counted into an upkeep pass's outcome. */
function withAccess(out: BootstrapOutcome, access: number): BootstrapOutcome {
  if (access === 0) return out;
  return {
    ...out,
    result: out.result === 'unchanged' ? 'access' : out.result,
    writes: out.writes + access,
  };
}

/**
 * One OscarConfig's pass, as its phases in order: delete (the token, where no owner reference
 * reaches), wait (for the Machine, Cluster and OSCs), pause, node access, then either token
 * upkeep (the user data exists, or the machine joined) or token, render, Secret and status.
 */
export async function reconcileBootstrap(
  key: string,
  deps: BootstrapDeps,
): Promise<BootstrapOutcome> {
  const { namespace, name } = splitKey(key);
  const config = deps.caches.config(namespace, name);
  if (!config || config.metadata.deletionTimestamp) return reconcileDelete(key, config, deps);
  const t = target(config, deps.caches);
  if ('reason' in t) return waitForTarget(config, t, deps);
  if (t.paused) return stayPaused(config, deps);
  const access = await nodeAccess(config, t, deps);
  const existing = deps.caches.dataSecret(namespace, dataSecretNameFor(config));
  const ours =
    existing !== undefined && existing.metadata.labels?.[LABEL_CONFIG_UID] === config.metadata.uid;
  const reissue = deps.tokens.get(key)?.reissue === true;
  // A machine that joined needs no user data (even if its Secret was deleted since), only its
  // token gone.
  if (joined(config, t, deps.caches) || (ours && !reissue)) {
    return withAccess(await upkeep(config, t, deps), access);
  }
  return issueUserData(config, t, deps, { ours, reissue });
}
