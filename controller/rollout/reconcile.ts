/**
 * One pass of the rollout of one reconcile OSC, in phases:
 * 1. load — the OSC from the cache; nothing to do for a provision OSC or one being deleted (the
 *    OSC controller's finalizer deletes the revision Secrets with the rest);
 * 2. revision — the rendering in the reconcile Secret is kept as a revision (copied into a
 *    revision slot, verified by its checksum) if no slot holds it yet;
 * 3. plan — the pure planner decides the grants, the status and the Events;
 * 4. drains — nodes a Drain- or Reboot-level target needs empty are cordoned and drained one
 *    step (controller/drain/), their progress written into status.rollout.drains; nodes done
 *    with it are uncordoned;
 *    grants — each node granted something new gets it in its spec;
 * 5. status — status.rollout, when it changed (counts at most every STATUS_INTERVAL_MS: a
 *    2,000-node rollout moves them thousands of times; a count change not due yet is offered to
 *    the OSC's status writer and goes out with its next write, the OSC controller's included);
 * 6. events.
 * Reads come from the caches, writes go through RolloutWriter, so this runs against memory in
 * unit tests and against the real API server unchanged.
 */
import { disruptionDigests } from '../../api/disruption.js';
import { resolvePolicy } from '../../api/rollout.js';
import type { RevisionGrant, RolloutStatus } from '../../api/schema.js';
import {
  ANNOTATION_CHECKSUM,
  ANNOTATION_RESUME,
  decodeConfigData,
  KEY_CONFIG,
  KEY_CONFIG_GZIP,
  secretNameFor,
} from '../../api/secret.js';
import type { DataObject, KubeObject, OscObject } from '../kube/types.js';
import { jsonEqual, splitKey, type EventInput } from '../osc/reconcile.js';
import { mapLimit } from '../../api/util.js';
import { planRollout, type NodeState, type Revision, type RolloutPlan } from './planner.js';
import {
  chooseSlot,
  nextRevisionNumber,
  readSlots,
  revisionsOf,
  revisionSecretBody,
  type Slot,
} from './revisions.js';
import type { RolloutWriter } from './writer.js';
import { secretIsOscars, secretNameTakenMessage } from '../osc/secret-object.js';
import type { NodeDrainer } from '../drain/drainer.js';

/** Counts and messages go out at most this often; a phase or pause change goes at once. */
export const STATUS_INTERVAL_MS = 2_000;
/** While a node drains, look again this often (evictions a budget refused are retried). */
export const DRAIN_RETRY_MS = 2_000;

export interface RolloutCaches {
  osc(namespace: string, name: string): OscObject | undefined;
  ownedSecret(namespace: string, name: string): KubeObject | undefined;
  ownedSecretsOf(namespace: string, oscName: string): KubeObject[];
  /** The grant-following nodes of an OSC ("namespace/name"), own grant writes included. */
  grantNodesOf(oscKey: string): NodeState[];
  /** status.rollout as last written (own writes included). */
  rolloutOf(oscKey: string): RolloutStatus | undefined;
}

/** What the controller remembers between passes (lost on restart: only Events repeat). */
export interface RolloutMemo {
  reportedFailures: Set<string>;
  lastStatusWrite: number;
}

export interface RolloutDeps {
  caches: RolloutCaches;
  writer: RolloutWriter;
  event(osc: OscObject, e: EventInput): Promise<void>;
  /** Called with what a write stored, so the next pass reads its own writes. */
  recorded?: {
    grant(node: string, grant: RevisionGrant, stored: KubeObject | undefined): void;
    status(oscKey: string, rollout: RolloutStatus, stored: KubeObject | undefined): void;
    revision(stored: KubeObject | undefined): void;
  };
  memo: Map<string, RolloutMemo>;
  now: () => Date;
  /** Parallel grant writes. */
  concurrency?: number;
  /** Cordons, drains and uncordons Nodes; without it a Drain-level target waits (and says so). */
  drainer?: NodeDrainer;
}

export interface RolloutOutcome {
  writes: number;
  grants: number;
  requeueAfterMs?: number;
  phase?: string;
}

export class RolloutError extends Error {
  override name = 'RolloutError';
}

/**
 * A slot the cache shows free may still hold a Secret of its name that is not oscar's (the cache
 * holds labelled Secrets only): the revision is not applied over it (secretIsOscars, as for the
 * OSC controller's output), a Warning Event says so, and the pass fails so the queue retries —
 * the revision is written once that Secret is deleted or renamed. One GET per new revision into
 * a free slot; a slot holding a revision is oscar's already.
 */
async function refuseForeignSlot(osc: OscObject, slot: Slot, deps: RolloutDeps): Promise<void> {
  if (slot.revision) return;
  const namespace = osc.metadata.namespace ?? '';
  const existing = await deps.writer.readSecret(namespace, slot.secretName);
  if (!existing || secretIsOscars(existing, osc.metadata.name)) return;
  const message = secretNameTakenMessage(namespace, slot.secretName, osc.metadata.name);
  await deps.event(osc, { type: 'Warning', reason: 'SecretNameTaken', message });
  throw new RolloutError(message);
}

/** Phase 1: the OSC, if it has a rollout at all. */
function loadRollout(caches: RolloutCaches, key: string): OscObject | undefined {
  const { namespace, name } = splitKey(key);
  const osc = caches.osc(namespace, name);
  if (!osc || osc.metadata.deletionTimestamp || osc.spec.purpose !== 'reconcile') return undefined;
  return osc;
}

function decodeData(secret: DataObject): Record<string, Buffer> {
  const out: Record<string, Buffer> = {};
  for (const [k, v] of Object.entries(secret.data ?? {})) out[k] = Buffer.from(v, 'base64');
  return out;
}

/** What a new revision must not overwrite: what the status and the nodes still use. */
function pinnedBy(memory: RolloutStatus | undefined, nodes: readonly NodeState[], osc: OscObject) {
  const pinned = new Set<number>();
  if (memory) {
    pinned.add(memory.revision);
    if (memory.stableRevision !== undefined) pinned.add(memory.stableRevision);
  }
  const to = osc.spec.rollout?.rollback?.toRevision;
  if (to !== undefined) pinned.add(to);
  for (const n of nodes) if (n.grant) pinned.add(n.grant.number);
  return pinned;
}

/**
 * Phase 2: the revision of the current rendering, copied from the reconcile Secret into a slot
 * when no slot holds it. Undefined while nothing was rendered.
 */
async function ensureRevision(
  osc: OscObject,
  slots: Slot[],
  memory: RolloutStatus | undefined,
  nodes: readonly NodeState[],
  deps: RolloutDeps,
): Promise<{ rendered: Revision | undefined; wrote: boolean }> {
  const namespace = osc.metadata.namespace ?? '';
  const name = osc.metadata.name;
  const reconcileName = secretNameFor(name, 'reconcile');
  const cached = deps.caches.ownedSecret(namespace, reconcileName);
  const checksum = cached?.metadata.annotations?.[ANNOTATION_CHECKSUM];
  if (checksum === undefined) return { rendered: undefined, wrote: false };
  const kept = slots.find((s) => s.revision?.checksum === checksum)?.revision;
  if (kept) return { rendered: kept, wrote: false };

  const secret = await deps.writer.readSecret(namespace, reconcileName);
  if (!secret) return { rendered: undefined, wrote: false };
  const data = decodeData(secret);
  // Verified like an agent verifies it: a revision is only ever a config that checks out.
  const decoded = decodeConfigData(data, secret.metadata.annotations?.[ANNOTATION_CHECKSUM]);
  const again = slots.find((s) => s.revision?.checksum === decoded.checksum)?.revision;
  if (again) return { rendered: again, wrote: false };
  const slot = chooseSlot(slots, pinnedBy(memory, nodes, osc));
  if (!slot) {
    throw new RolloutError(
      `cannot keep revision ${decoded.checksum.slice(0, 12)}: every revision Secret holds a revision that nodes or the rollout still use; let the current rollout finish or undo it`,
    );
  }
  await refuseForeignSlot(osc, slot, deps);
  const remembered = memory ? [memory.revision, memory.stableRevision ?? 0] : [];
  const number = nextRevisionNumber(slots, remembered);
  const configData: Record<string, Buffer> = {};
  for (const key of [KEY_CONFIG, KEY_CONFIG_GZIP]) {
    const v = data[key];
    if (v) configData[key] = v;
  }
  const digests = disruptionDigests(decoded.config);
  const levels = {
    disruption: digests.restart,
    drainDigest: digests.drain,
    rebootDigest: digests.reboot,
  };
  const stored = await deps.writer.applyRevision(
    revisionSecretBody({
      owner: { name, namespace, uid: osc.metadata.uid ?? '' },
      secretName: slot.secretName,
      number,
      checksum: decoded.checksum,
      ...levels,
      data: configData,
    }),
  );
  deps.recorded?.revision(stored);
  await deps.event(osc, {
    type: 'Normal',
    reason: 'RevisionCreated',
    message: `Revision ${String(number)} (checksum ${decoded.checksum.slice(0, 12)}) kept in Secret ${slot.secretName}.`,
  });
  return {
    rendered: {
      number,
      checksum: decoded.checksum,
      secretName: slot.secretName,
      ...levels,
    },
    wrote: true,
  };
}

/** Phase 4: the grants, a few at a time. */
async function writeGrants(plan: RolloutPlan, deps: RolloutDeps): Promise<number> {
  await mapLimit(plan.grants, deps.concurrency ?? 16, async ({ node, grant }) => {
    const stored = await deps.writer.grant(node, grant);
    deps.recorded?.grant(node, grant, stored);
  });
  return plan.grants.length;
}

/**
 * Phase 4a: the uncordons first — a node that confirmed is back in service before the next one is
 * cordoned, so no more nodes than maxUnavailable are out at any moment (the other order left two
 * cordoned for a moment, seen by test/e2e/drain-pods.test.ts) — then one drain step per node the
 * plan wants empty, its outcome written into the plan's status.rollout.drains (the next pass
 * grants a Drained node).
 */
export async function driveDrains(
  plan: Pick<RolloutPlan, 'drains' | 'uncordons' | 'status'>,
  deps: Pick<RolloutDeps, 'drainer'>,
): Promise<void> {
  for (const node of plan.uncordons) await deps.drainer?.uncordon(node);
  const entries = new Map((plan.status?.drains ?? []).map((d) => [d.node, d]));
  for (const node of plan.drains) {
    const entry = entries.get(node);
    if (!entry) continue;
    if (!deps.drainer) {
      entry.message = 'waiting: this controller runs without a drainer';
      continue;
    }
    try {
      const r = await deps.drainer.drain(node);
      if (r.drained) entry.phase = 'Drained';
      entry.message = r.message;
      if (r.pod !== undefined) entry.pod = r.pod;
      else delete entry.pod;
      if (r.podDisruptionBudget !== undefined) entry.podDisruptionBudget = r.podDisruptionBudget;
      else delete entry.podDisruptionBudget;
    } catch (error) {
      entry.message = `drain step failed: ${(error as Error).message}`;
    }
  }
}

/** Fields whose change is written at once; the rest (counts, message, wave) waits its turn. */
function milestone(s: RolloutStatus | undefined): unknown {
  if (!s) return undefined;
  return [
    s.revision,
    s.checksum,
    s.stableRevision,
    s.phase,
    s.pauseReason,
    s.completionTime,
    s.canaryCompleteTime,
    s.canaryPromoted,
    s.observedResume,
    s.revisions?.length,
    s.disruption,
    s.drains,
  ];
}

/** Phase 5: status.rollout, when it changed; returns the wait before counts may go out. */
async function writeStatus(
  osc: OscObject,
  key: string,
  plan: RolloutPlan,
  memory: RolloutStatus | undefined,
  memo: RolloutMemo,
  deps: RolloutDeps,
): Promise<{ wrote: boolean; waitMs?: number }> {
  const status = plan.status;
  // Offered whether or not it is due: paced counts ride along with the OSC's next status write.
  deps.writer.offerRolloutStatus?.(osc.metadata.namespace ?? '', osc.metadata.name, status);
  if (!status || jsonEqual(status, memory)) return { wrote: false };
  const now = deps.now().getTime();
  const since = now - memo.lastStatusWrite;
  if (jsonEqual(milestone(status), milestone(memory)) && since < STATUS_INTERVAL_MS) {
    return { wrote: false, waitMs: STATUS_INTERVAL_MS - since };
  }
  const stored = await deps.writer.patchRolloutStatus(
    osc.metadata.namespace ?? '',
    osc.metadata.name,
    status,
  );
  memo.lastStatusWrite = now;
  deps.recorded?.status(key, status, stored);
  return { wrote: true };
}

export async function reconcileRollout(key: string, deps: RolloutDeps): Promise<RolloutOutcome> {
  const osc = loadRollout(deps.caches, key);
  if (!osc) {
    deps.memo.delete(key);
    return { writes: 0, grants: 0 };
  }
  const namespace = osc.metadata.namespace ?? '';
  const memo = deps.memo.get(key) ?? { reportedFailures: new Set<string>(), lastStatusWrite: 0 };
  deps.memo.set(key, memo);
  const memory = deps.caches.rolloutOf(key);
  const nodes = deps.caches.grantNodesOf(key);
  // No grant-mode node has ever followed this OSC: no revision, no status.rollout, no request —
  // an OSC whose agents follow the Secret costs the rollout controller nothing.
  if (nodes.length === 0 && memory === undefined) return { writes: 0, grants: 0 };
  const slots = readSlots(
    osc.metadata.name,
    deps.caches.ownedSecretsOf(namespace, osc.metadata.name),
  );

  const { rendered, wrote } = await ensureRevision(osc, slots, memory, nodes, deps);
  const revisions = revisionsOf(slots);
  if (rendered && !revisions.some((r) => r.number === rendered.number)) {
    // the slot it took held an older revision, which is gone now
    const i = revisions.findIndex((r) => r.secretName === rendered.secretName);
    if (i >= 0) revisions.splice(i, 1);
    revisions.push(rendered);
  }

  const plan = planRollout({
    namespace,
    osc: osc.metadata.name,
    policy: resolvePolicy(osc.spec.rollout),
    rendered,
    revisions,
    nodes,
    memory,
    resumeToken: osc.metadata.annotations?.[ANNOTATION_RESUME],
    reportedFailures: memo.reportedFailures,
    now: deps.now(),
  });
  await driveDrains(plan, deps);
  const grants = await writeGrants(plan, deps);
  const status = await writeStatus(osc, key, plan, memory, memo, deps);
  if (plan.status && plan.status.revision !== memory?.revision) memo.reportedFailures.clear();
  for (const k of plan.newlyReported) memo.reportedFailures.add(k);
  for (const e of plan.events) await deps.event(osc, e);

  const drainWait = plan.drains.length > 0 ? DRAIN_RETRY_MS : undefined;
  const waits = [plan.requeueAfterMs, status.waitMs, drainWait].filter(
    (w): w is number => w !== undefined,
  );
  const out: RolloutOutcome = {
    writes:
      grants +
      (status.wrote ? 1 : 0) +
      (wrote ? 1 : 0) +
      plan.events.length +
      plan.drains.length +
      plan.uncordons.length,
    grants,
  };
  if (waits.length > 0) out.requeueAfterMs = Math.min(...waits);
  if (plan.status) out.phase = plan.status.phase;
  return out;
}
