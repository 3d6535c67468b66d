/**
 * UpdateMachine: make the machine's node follow the reconcile OSC its OscarConfig now names, and
 * answer "in progress" until the node's OperatingSystemConfigNode reports that rendering applied
 * and confirmed, then done. The node takes it through the same grant the rollout controller writes
 * (controller/rollout/): Cluster API paces these machines itself, so the extension grants the node
 * directly instead of waiting for oscar's waves. Stateless and idempotent: every call reads the
 * node object and either writes the grant (once: a grant for the target is never rewritten) or
 * reports what the node said, so repeated calls and a restarted extension give the same answer.
 */
import { BOOTSTRAP_GROUP } from '../../api/bootstrap/constants.js';
import type { RevisionGrant } from '../../api/schema.js';
import { grantFor } from '../rollout/planner.js';
import type { ResolvedPolicy } from '../../api/rollout.js';
import type { OscNodeObject } from '../osc/node-index.js';
import {
  HOOKS_API_VERSION,
  type UpdateMachineRequest,
  type UpdateMachineResponse,
} from './hooks.js';
import type { ReconcileLookup, ReconcileState } from './reconcile-state.js';

/** Cluster API's mark on a Machine (and its configs) while it is updated in place. */
export const UPDATE_IN_PROGRESS = 'in-place-updates.internal.cluster.x-k8s.io/update-in-progress';

/** How soon Cluster API asks again while a node applies: a grant takes a second or two to apply. */
export const RETRY_APPLYING_SECONDS = 5;
/** While something outside the node must happen first (a rendering, the agent's first report). */
export const RETRY_WAITING_SECONDS = 15;
/**
 * A node that rolled back or failed the target is granted it again once this long has passed
 * since its report (a node never retries a rolled-back grant by itself): Cluster API keeps calling
 * with backoff after a Failure, and the cause (a full disk, a unit's dependency) may be gone.
 */
export const REGRANT_AFTER_FAILURE_SECONDS = 300;

/** The revision of the target OSC the grant names: a kept revision, else its reconcile Secret. */
export interface GrantTarget {
  number: number;
  secretName: string;
}

export type Decision =
  | { kind: 'done'; message: string }
  | { kind: 'progress'; message: string; retryAfterSeconds: number }
  | { kind: 'failure'; message: string }
  | { kind: 'grant'; grant: RevisionGrant; message: string };

export interface UpdateInputs {
  namespace: string;
  node: string;
  target: ReconcileLookup;
  oscNode: OscNodeObject | undefined;
  /** Only read when a grant is to be written: which kept revision (or Secret) to grant. */
  revision: (target: ReconcileState) => Promise<GrantTarget>;
  policy: () => Promise<ResolvedPolicy>;
  now: Date;
}

function nodeError(n: OscNodeObject): string {
  const e = n.status?.lastError;
  if (!e) return '';
  return `; last error${e.unit ? ` (${e.unit})` : ''}: ${e.message}`;
}

/**
 * Tenancy (docs/identity.md): node objects are cluster-wide and named after machines, so a
 * Machine of one namespace can share its name with another namespace's node. The node is this
 * namespace's unless what oscar granted it (spec.revision, written by oscar) — or, before any
 * grant, what it follows by its own report — names another namespace. A report is only ever
 * used to refuse here, never to act.
 */
export function ofNamespace(n: OscNodeObject, namespace: string): boolean {
  const home = n.spec?.revision?.namespace ?? n.status?.oscRef?.namespace;
  return home === undefined || home === namespace;
}

/** What to do for one call: a pure reading of the node's object against the target. */
export async function decideUpdate(i: UpdateInputs): Promise<Decision> {
  const { node, oscNode: n, target } = i;
  if ('missing' in target) {
    return { kind: 'progress', message: target.missing, retryAfterSeconds: RETRY_WAITING_SECONDS };
  }
  if (!n) {
    return {
      kind: 'progress',
      message: `waiting for the agent of node ${node} to report (OperatingSystemConfigNode ${node})`,
      retryAfterSeconds: RETRY_WAITING_SECONDS,
    };
  }
  const refusal = notThisMachines(n, i);
  if (refusal) return refusal;
  const state = grantState(n, i, target);
  if (!state.granted || state.retry) return grantDecision(i, target, state.retry);
  return nodeOutcome(n, i.node, target, state.answered);
}

/** A node of another namespace, or one whose agent does not follow grants, is not updated. */
function notThisMachines(n: OscNodeObject, i: UpdateInputs): Decision | undefined {
  if (!ofNamespace(n, i.namespace)) {
    return {
      kind: 'failure',
      message: `node ${i.node} is not this Machine's: its grant (or, before any grant, its report) is another namespace's; node names are cluster-wide, rename the Machine`,
    };
  }
  if (n.status?.source !== 'Grant') {
    return {
      kind: 'failure',
      message: `node ${i.node}'s agent follows ${n.status?.source ?? 'nothing yet'}, not grants: in-place updates need the agent in grant mode (oscar agent --osc), see docs/cluster-api.md`,
    };
  }
  return undefined;
}

type RevisionReport = NonNullable<NonNullable<OscNodeObject['status']>['revision']>;

/**
 * Whether the node holds a grant of the target, whether its report answers that grant (this
 * generation, this checksum), and whether a failed answer is old enough to grant again.
 */
function grantState(
  n: OscNodeObject,
  i: UpdateInputs,
  target: ReconcileState,
): { granted: boolean; answered: RevisionReport | undefined; retry: boolean } {
  const grant = n.spec?.revision;
  const granted =
    grant !== undefined &&
    grant.namespace === i.namespace &&
    grant.osc === target.osc &&
    grant.checksum === target.checksum;
  const report = n.status?.revision;
  const answered =
    granted &&
    report !== undefined &&
    report.observedGeneration === (n.metadata.generation ?? 0) &&
    report.checksum === target.checksum
      ? report
      : undefined;
  const failedAt =
    answered && (answered.phase === 'RolledBack' || answered.phase === 'Failed')
      ? Date.parse(answered.lastTransitionTime)
      : undefined;
  const retry =
    failedAt !== undefined &&
    Number.isFinite(failedAt) &&
    i.now.getTime() - failedAt >= REGRANT_AFTER_FAILURE_SECONDS * 1000;
  return { granted, answered, retry };
}

/** A grant of the target's revision in try mode (again, after an old failure). */
async function grantDecision(
  i: UpdateInputs,
  target: ReconcileState,
  again: boolean,
): Promise<Decision> {
  const rev = await i.revision(target);
  const policy = await i.policy();
  const g = grantFor(
    { number: rev.number, secretName: rev.secretName, checksum: target.checksum },
    {
      tryMode: true,
      canary: false,
      policy,
      namespace: i.namespace,
      osc: target.osc,
      now: i.now,
    },
  );
  return {
    kind: 'grant',
    grant: g,
    message: `${again ? 'granted again' : 'granted'} node ${i.node} ${target.osc} (checksum ${target.checksum.slice(0, 12)})`,
  };
}

/** Granted: done once confirmed and applied, a failure when it failed or needs replacing. */
function nodeOutcome(
  n: OscNodeObject,
  node: string,
  target: ReconcileState,
  answered: RevisionReport | undefined,
): Decision {
  const short = target.checksum.slice(0, 12);
  const status = n.status;
  if (answered?.phase === 'Confirmed' && status?.appliedChecksum === target.checksum) {
    return { kind: 'done', message: `node ${node} applied ${target.osc} (checksum ${short})` };
  }
  if (answered && (answered.phase === 'RolledBack' || answered.phase === 'Failed')) {
    return {
      kind: 'failure',
      message: `node ${node} ${answered.phase === 'RolledBack' ? 'rolled back' : 'failed to apply'} ${target.osc} (checksum ${short}): ${answered.reason}: ${answered.message}${nodeError(n)}`,
    };
  }
  if (status?.needsReplacement === true && status.desiredChecksum === target.checksum) {
    return {
      kind: 'failure',
      message: `node ${node} cannot take ${target.osc} in place (ReplacementNeeded)${nodeError(n)}`,
    };
  }
  if (answered?.phase === 'RollingBack') {
    return {
      kind: 'progress',
      message: `node ${node} rolled back ${target.osc} (checksum ${short}): ${answered.reason}; it reboots back into its previous revision, and the failure is final once it is back there`,
      retryAfterSeconds: RETRY_APPLYING_SECONDS,
    };
  }
  return {
    kind: 'progress',
    message: `node ${node} is applying ${target.osc} (checksum ${short}${answered ? `, ${answered.phase}` : ''})`,
    retryAfterSeconds: RETRY_APPLYING_SECONDS,
  };
}

/** The Machine and OscarConfig an UpdateMachine request names, or why it is not oscar's. */
export function requestTarget(
  req: UpdateMachineRequest,
): { namespace: string; machine: string; config: string } | { notOscar: string } {
  const config = req.desired?.bootstrapConfig;
  const machine = req.desired?.machine;
  if ((config?.apiVersion ?? '').split('/')[0] !== BOOTSTRAP_GROUP) {
    return { notOscar: 'the machine has no OscarConfig: nothing oscar updates' };
  }
  const namespace = machine?.metadata?.namespace ?? '';
  const name = machine?.metadata?.name ?? '';
  const configName = config?.metadata?.name ?? '';
  if (!namespace || !name || !configName || config?.metadata?.namespace !== namespace) {
    return { notOscar: 'the request names no Machine and OscarConfig of one namespace' };
  }
  return { namespace, machine: name, config: configName };
}

/** What of a stored Machine the check reads. */
export interface StoredMachine {
  metadata: { name: string; annotations?: Record<string, string> };
  spec?: { bootstrap?: { configRef?: { apiGroup?: string; kind?: string; name?: string } } };
}

/** What of a stored OscarConfig the check reads. */
export interface StoredConfig {
  spec?: { reconcileRef?: { name?: string } };
}

/**
 * The request is input from the network: the extension acts on what the API server holds, not on
 * what the body says. The Machine must exist, be marked for an in-place update by Cluster API and
 * name the OscarConfig as its bootstrap config; the reconcile OSC is the stored config's. So a
 * caller that can reach the extension but cannot write Machines and OscarConfigs cannot move a
 * node anywhere. The node is the Machine's: oscar's bootstrap starts its agent as --node <Machine
 * name> (the same join check as controller/bootstrap/).
 */
export function storedTarget(
  namespace: string,
  machineName: string,
  configName: string,
  machine: StoredMachine | undefined,
  config: StoredConfig | undefined,
): { node: string; reconcile: string } | { refused: string } {
  const m = `Machine ${namespace}/${machineName}`;
  if (!machine) return { refused: `${m} not found` };
  if (machine.metadata.annotations?.[UPDATE_IN_PROGRESS] === undefined) {
    return { refused: `${m} is not being updated in place (no ${UPDATE_IN_PROGRESS} annotation)` };
  }
  const ref = machine.spec?.bootstrap?.configRef;
  if (ref?.apiGroup !== BOOTSTRAP_GROUP || ref.kind !== 'OscarConfig' || ref.name !== configName) {
    return { refused: `${m} does not name OscarConfig ${configName} as its bootstrap config` };
  }
  const reconcile = config?.spec?.reconcileRef?.name;
  if (!config || !reconcile) {
    return {
      refused: `OscarConfig ${namespace}/${configName} not found, or it has no reconcileRef`,
    };
  }
  return { node: machine.metadata.name, reconcile };
}

export function response(d: Exclude<Decision, { kind: 'grant' }>): UpdateMachineResponse {
  const base = { apiVersion: HOOKS_API_VERSION, kind: 'UpdateMachineResponse' } as const;
  switch (d.kind) {
    case 'done':
      return { ...base, status: 'Success', message: d.message, retryAfterSeconds: 0 };
    case 'progress':
      return {
        ...base,
        status: 'Success',
        message: d.message,
        retryAfterSeconds: d.retryAfterSeconds,
      };
    case 'failure':
      return { ...base, status: 'Failure', message: d.message, retryAfterSeconds: 0 };
  }
}
