/**
 * Drains for Cluster API's in-place updates (docs/cluster-api.md#drain-and-reboot-in-place): a
 * Drain- or Reboot-level change that reaches a node through UpdateMachine is drained and proven the
 * way oscar's own rollouts do it (controller/drain/, docs/rollouts.md#drain) — the Node cordoned and
 * emptied through the Eviction API before the grant is written, the grant carrying its level (so the
 * agent reboots inside its try), and "done" answered only once the node confirmed the revision, its
 * Node is Ready again and oscar uncordoned it. Cluster API paces the machines; the extension holds no
 * state: every call reads the node and takes one drain step, as the rollout controller does.
 */
import { ROLLBACK_FAILED_REASONS } from '../../api/constants.js';
import { atLeast, disruptionOf, type Disruption } from '../../api/disruption.js';
import type { ResolvedConfig } from '../../api/resolved.js';
import { ANNOTATION_CHECKSUM, decodeConfigData } from '../../api/secret.js';
import { isNotFound, type KubeHttp } from '../../kube/client.js';
import type { NodeDrainer } from '../drain/drainer.js';
import type { OscNodeObject } from '../osc/node-index.js';
import type { ReconcileState } from './reconcile-state.js';
import { RETRY_APPLYING_SECONDS, type Decision } from './update-machine.js';

export interface InPlaceDrainDeps {
  drainer: NodeDrainer;
  /** What moving the node from what it carries to the target disrupts. */
  disruption(): Promise<Disruption>;
  /** The Node's Ready condition; undefined when there is no Node object. */
  nodeReady(): Promise<boolean | undefined>;
}

/** The level the node's current grant was given (none: it was not drained for it). */
function grantedLevel(n: OscNodeObject | undefined): Disruption['level'] {
  return n?.spec?.revision?.disruption ?? 'None';
}

/**
 * UpdateMachine's decision, with the drain around it: a grant of a Drain- or Reboot-level change
 * waits for one drain step to leave the node empty; "done" after such a grant waits for the Node
 * to be Ready and is answered once it is uncordoned; a rollback or failure uncordons too (the node
 * is back on what it ran).
 */
export async function withDrain(
  d: Decision,
  node: string,
  n: OscNodeObject | undefined,
  deps: InPlaceDrainDeps,
): Promise<Decision> {
  switch (d.kind) {
    case 'grant':
      return drainBeforeGrant(d, node, deps);
    case 'done':
      return atLeast(grantedLevel(n), 'Drain') ? readyThenUncordon(d, node, deps) : d;
    case 'failure':
      if (atLeast(grantedLevel(n), 'Drain') && answeredBack(n)) await deps.drainer.uncordon(node);
      return d;
    case 'progress':
      return d;
  }
}

async function drainBeforeGrant(
  d: Extract<Decision, { kind: 'grant' }>,
  node: string,
  deps: InPlaceDrainDeps,
): Promise<Decision> {
  const dis = await deps.disruption();
  if (!atLeast(dis.level, 'Drain')) return d;
  const why = `${dis.level}: ${dis.reasons.join('; ')}`;
  const r = await deps.drainer.drain(node);
  if (!r.drained) {
    return {
      kind: 'progress',
      message: `draining node ${node} before its in-place update (${why}): ${r.message}`,
      retryAfterSeconds: RETRY_APPLYING_SECONDS,
    };
  }
  return {
    kind: 'grant',
    grant: { ...d.grant, disruption: dis.level },
    message: `${d.message}, drained first (${why})`,
  };
}

async function readyThenUncordon(
  d: Extract<Decision, { kind: 'done' }>,
  node: string,
  deps: InPlaceDrainDeps,
): Promise<Decision> {
  if ((await deps.nodeReady()) === false) {
    return {
      kind: 'progress',
      message: `${d.message}; waiting for Node ${node} to be Ready again before uncordoning it`,
      retryAfterSeconds: RETRY_APPLYING_SECONDS,
    };
  }
  await deps.drainer.uncordon(node);
  return { kind: 'done', message: `${d.message}; Node Ready and uncordoned` };
}

/**
 * The node answered its grant with a rollback or a failure: it runs what it ran before. Not a
 * rollback still rebooting back (RollingBack: no failure yet), nor one whose old state was never
 * proven (ROLLBACK_FAILED_REASONS): that node stays cordoned for a person (issue 25).
 */
function answeredBack(n: OscNodeObject | undefined): boolean {
  const r = n?.status?.revision;
  const unproven = (ROLLBACK_FAILED_REASONS as readonly string[]).includes(r?.reason ?? '');
  return r?.phase === 'RolledBack' || (r?.phase === 'Failed' && !unproven);
}

interface SecretObject {
  metadata?: { annotations?: Record<string, string> };
  data?: Record<string, string>;
}

interface NodeObject {
  status?: { conditions?: { type: string; status: string }[] };
}

/**
 * The level of moving node `n` to `target`, from the config it carries: the revision Secret of
 * its current grant when that is what it applied. Anything else (no grant here, a grant it has
 * not applied, a Secret gone or damaged) is unknown, and an unknown start counts as Reboot — the
 * node is drained rather than risked — with the reason saying so.
 */
export async function inPlaceDisruption(
  http: KubeHttp,
  namespace: string,
  n: OscNodeObject | undefined,
  target: ReconcileState,
): Promise<Disruption> {
  const carried = await carriedConfig(http, namespace, n);
  if ('unknown' in carried) return { level: 'Reboot', reasons: [carried.unknown] };
  return disruptionOf(carried.config, target.config);
}

async function carriedConfig(
  http: KubeHttp,
  namespace: string,
  n: OscNodeObject | undefined,
): Promise<{ config: ResolvedConfig } | { unknown: string }> {
  const g = n?.spec?.revision;
  const name = n?.metadata.name ?? '';
  if (!g || g.namespace !== namespace || g.checksum !== n.status?.appliedChecksum) {
    return { unknown: `what node ${name} carries is not a revision granted it here: unknown` };
  }
  try {
    const s = await http.request<SecretObject>(
      'GET',
      `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets/${encodeURIComponent(g.secretName)}`,
    );
    const data: Record<string, Buffer> = {};
    for (const [k, v] of Object.entries(s.data ?? {})) data[k] = Buffer.from(v, 'base64');
    const decoded = decodeConfigData(data, s.metadata?.annotations?.[ANNOTATION_CHECKSUM]);
    if (decoded.checksum !== g.checksum) {
      return { unknown: `Secret ${g.secretName} no longer holds what node ${name} carries` };
    }
    return { config: decoded.config };
  } catch (error) {
    if (isNotFound(error)) return { unknown: `Secret ${g.secretName} of node ${name} is gone` };
    return { unknown: `Secret ${g.secretName}: ${(error as Error).message}` };
  }
}

/** The Node's Ready condition, as its kubelet reports it. */
export async function nodeReady(http: KubeHttp, node: string): Promise<boolean | undefined> {
  try {
    const n = await http.request<NodeObject>('GET', `/api/v1/nodes/${encodeURIComponent(node)}`);
    return n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
  } catch (error) {
    if (isNotFound(error)) return undefined;
    throw error;
  }
}
