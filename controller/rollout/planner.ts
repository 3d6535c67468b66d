/**
 * The rollout planner: (policy, revisions, nodes, what the last pass recorded, now) → which
 * node gets which revision, the OSC's status.rollout, the Events to record and when to look
 * again. Pure: no I/O, no clock of its own. controller/rollout/reconcile.ts feeds it from the
 * caches and writes what it returns.
 *
 * The rules (docs/rollouts.md explains them for operators), each a function in RULES below:
 * - chooseTarget: the target is the revision of the OSC's current rendering, or, while
 *   spec.rollout.rollback names that revision, the revision it goes back to (an undo, applied
 *   without try mode); warnRollbackIgnored: one that names a revision no longer kept is ignored;
 * - chooseStable: the stable revision is the last whose rollout completed; the first revision
 *   an OSC ever has is stable at once (there is nothing to fall back to);
 * - startOrContinue: a new target starts a new rollout status, and says so;
 * - sizeTheRollout: maxUnavailable, failureThreshold and the canary wave scaled to the nodes;
 *   nonDisruptive: Immediate grants a revision that disturbs no unit (same disruption digest as
 *   the stable one) to every pending node at once;
 * - noteResume: a resume (a new oscar.dev/resume annotation value) ends a canary or failure
 *   pause and hands every failed node the stable revision, so it is retried in a later wave;
 * - classifyNodes: a node that joins gets the revision it already carries when that is the
 *   target or the stable one, otherwise the stable one: never an unproven revision outside the
 *   gate; unavailable nodes are those in flight (granted a revision they have not confirmed,
 *   rolled back or failed), failed without rolling back, or Degraded; a node that neither
 *   confirms nor fails within grant time + deadline + grace counts as failed (its agent may be
 *   cut off and unable to say it rolled back);
 * - completeCanary, pauseAfterCanary: a canary wave (canary.nodes) goes first; once its nodes are
 *   updated the rollout pauses for canary.pauseSeconds, or until resumed; announceResume;
 * - decidePause: failed + rolled back ≥ failureThreshold pauses the rollout; so does
 *   spec.rollout.paused;
 * - grantWaves: new grants of the target go to pending nodes, by name, only while unavailable
 *   < maxUnavailable; countWaves: the canary is the first wave, then one per maxUnavailable;
 * - completeOrPause, finish: every node updated makes the target stable; the status's words.
 * Disruption (docs/rollouts.md#disruption-levels), decided by levelOfTarget and trackDrains:
 * - the target's level against the stable revision (api/disruption.ts digests on the revision
 *   Secrets); at Drain or Reboot a pending node is first cordoned and drained (the drain itself
 *   is controller/drain/, driven by reconcile.ts for every node in plan.drains) and granted only
 *   once status.rollout.drains says Drained; a draining node counts against maxUnavailable;
 * - a drain past spec.rollout.drain.timeoutSeconds is Blocked (onTimeout Wait: it goes on trying,
 *   naming the pod and PodDisruptionBudget) or Skipped (uncordoned, left until a resume);
 * - a node is uncordoned when it confirms the target or has rolled back; one that failed in
 *   place stays cordoned. A node that rolled back after its reboot and reboots back into the
 *   previous revision (RollingBack, issue 25) stays cordoned and counts against maxUnavailable
 *   until it reports RolledBack — back, Ready and healthy in that revision — and is never granted
 *   anything meanwhile; a rollback that cannot be finished (Failed) stays cordoned like any
 *   failure in place. noteRollingBack: one not back within the forward reboot's window (deadline
 *   + soak + grace, from drains[].rollingBackSince) counts as failed, NodeRollbackTimedOut, and
 *   stays cordoned; retryOnceBack: a resume that finds it rebooting back is remembered
 *   (status.retryWhenBack) and retries it once its rollback ends.
 */
import { atLeast, levelBetween } from '../../api/disruption.js';
import type {
  DisruptionLevel,
  HealthCheck,
  PauseReason,
  RevisionGrant,
  RevisionReport,
  RolloutPhase,
  RolloutStatus,
} from '../../api/schema.js';
import { scaledCount, type ResolvedPolicy } from '../../api/rollout.js';
import type { EventInput } from '../osc/reconcile.js';

/** A revision kept in a revision Secret. */
export interface Revision {
  number: number;
  checksum: string;
  secretName: string;
  /** api/disruption.ts digest of its config; undefined: unknown, counts as disruptive. */
  disruption?: string;
  /** api/disruption.ts disruptionDigests().drain and .reboot; undefined: unknown (Reboot). */
  drainDigest?: string;
  rebootDigest?: string;
}

/** One node that follows grants for this OSC, as the caches show it. */
export interface NodeState {
  name: string;
  /** metadata.generation: moves with every grant the node is given. */
  generation: number;
  grant?: RevisionGrant;
  report?: RevisionReport;
  appliedChecksum?: string;
  degraded: boolean;
}

export interface RolloutInput {
  namespace: string;
  osc: string;
  policy: ResolvedPolicy;
  /** The revision of the OSC's current rendering; undefined until one exists. */
  rendered: Revision | undefined;
  /** Every revision kept (the rendered one included). */
  revisions: readonly Revision[];
  nodes: readonly NodeState[];
  /** status.rollout as the last pass wrote it. */
  memory: RolloutStatus | undefined;
  /** The oscar.dev/resume annotation. */
  resumeToken: string | undefined;
  /** Node failures already recorded as Events ("node@generation"). */
  reportedFailures: ReadonlySet<string>;
  now: Date;
}

/** One entry of status.rollout.drains. */
export type DrainEntry = NonNullable<RolloutStatus['drains']>[number];

export interface RolloutPlan {
  grants: { node: string; grant: RevisionGrant }[];
  /** Nodes to cordon and drain (again) this pass: their entries are in status.drains. */
  drains: string[];
  /** Nodes oscar cordoned that go back into service. */
  uncordons: string[];
  status: RolloutStatus | undefined;
  events: EventInput[];
  /** Failures this pass recorded as Events ("node@generation"). */
  newlyReported: string[];
  /** Look again then even if nothing changes (a canary pause or a node deadline ends). */
  requeueAfterMs?: number;
  /** Revisions that must be kept: the stable, the target, and every one a node is granted. */
  pinned: Set<number>;
}

/** After the deadline, how long the controller waits for a node's own verdict. */
export const NODE_REPORT_GRACE_MS = 60_000;

type Class = 'updated' | 'updating' | 'failed' | 'rolledBack' | 'pending';

function rfc3339(d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function same(a: { checksum: string; number: number } | undefined, b: Revision): boolean {
  return a?.checksum === b.checksum && a.number === b.number;
}

/** The node's answer to the grant it holds now, if it answered that grant. */
function answer(node: NodeState): RevisionReport | undefined {
  const r = node.report;
  const g = node.grant;
  if (!r || !g || r.observedGeneration !== node.generation || r.checksum !== g.checksum) {
    return undefined;
  }
  return r;
}

/** A grant whose deadline and grace passed without a verdict: when that happens, in ms. */
function noReportAt(node: NodeState, fallbackDeadlineSeconds: number): number | undefined {
  const g = node.grant;
  if (!g) return undefined;
  const granted = Date.parse(g.grantedTime);
  if (!Number.isFinite(granted)) return undefined;
  const deadline = g.try?.deadlineSeconds ?? fallbackDeadlineSeconds;
  const soak = g.try?.soakSeconds ?? 0;
  return granted + (deadline + soak) * 1000 + NODE_REPORT_GRACE_MS;
}

function classify(
  node: NodeState,
  target: Revision,
  now: number,
  deadlineSeconds: number,
): { cls: Class; inFlight: boolean; timedOut: boolean } {
  const a = answer(node);
  const terminal = a !== undefined && a.phase !== 'Applying' && a.phase !== 'Verifying';
  const due = noReportAt(node, deadlineSeconds);
  const timedOut = node.grant !== undefined && !terminal && due !== undefined && now >= due;
  const inFlight = node.grant !== undefined && !terminal && !timedOut;
  if (!same(node.grant, target)) return { cls: 'pending', inFlight, timedOut };
  if (timedOut) return { cls: 'failed', inFlight, timedOut };
  switch (a?.phase) {
    case 'Confirmed':
      return { cls: 'updated', inFlight, timedOut };
    case 'RollingBack': // the try failed: a rollback, counted as one; out of service until back
    case 'RolledBack':
      return { cls: 'rolledBack', inFlight, timedOut };
    case 'Failed':
      return { cls: 'failed', inFlight, timedOut };
    default:
      return { cls: 'updating', inFlight, timedOut };
  }
}

export interface GrantOptions {
  tryMode: boolean;
  canary: boolean;
  /** The target's level, carried in the grant at Drain and Reboot (the node was drained). */
  disruption?: DisruptionLevel;
  policy: ResolvedPolicy;
  namespace: string;
  osc: string;
  now: Date;
}

export function grantFor(rev: Revision, o: GrantOptions): RevisionGrant {
  const grant: RevisionGrant = {
    namespace: o.namespace,
    osc: o.osc,
    number: rev.number,
    secretName: rev.secretName,
    checksum: rev.checksum,
    grantedTime: o.now.toISOString(),
  };
  if (o.canary) grant.canary = true;
  if (o.disruption !== undefined) grant.disruption = o.disruption;
  if (o.tryMode) {
    grant.try = {
      soakSeconds: o.policy.soakSeconds,
      deadlineSeconds: o.policy.progressDeadlineSeconds,
    };
    if (o.policy.healthChecks.length > 0) {
      grant.try.healthChecks = o.policy.healthChecks.map((c: HealthCheck) => ({ ...c }));
    }
  }
  return grant;
}

function byName(a: NodeState, b: NodeState): number {
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

/**
 * One planning pass as the rules fill it in: the inputs, what the first rules decide (target,
 * stable, sizes) and what later rules read (classes, budget, pause).
 */
interface Pass {
  readonly input: RolloutInput;
  readonly plan: RolloutPlan;
  readonly rendered: Revision;
  readonly nowMs: number;
  target: Revision;
  undoing: boolean;
  stable: Revision;
  /** The target changed since the last pass: a new rollout starts. */
  fresh: boolean;
  status: RolloutStatus;
  tryMode: boolean;
  total: number;
  maxUnavailable: number;
  threshold: number;
  canarySize: number;
  /** nonDisruptive: Immediate applies to this revision. */
  immediate: boolean;
  resumed: boolean;
  classes: Map<string, Class>;
  /** Nodes this pass granted a revision outside the waves (joined, or retried). */
  regranted: Set<string>;
  retried: Set<string>;
  unavailable: number;
  nextDue: number | undefined;
  canaryNodes: NodeState[];
  inCanary: boolean;
  canaryPause: boolean;
  promotedByResume: boolean;
  pauseReason: PauseReason | undefined;
  /** Nodes holding a grant of the target. */
  granted: number;
  /** The target's disruption against the stable revision (None outside try mode). */
  level: DisruptionLevel;
  /** Nodes must be drained before their grant of the target. */
  drainFirst: boolean;
  /** status.rollout.drains as this pass leaves it, by node. */
  drains: Map<string, DrainEntry>;
  /** Nodes rebooting back into their previous revision (RollingBack): cordoned, unavailable. */
  rebootingBack: Set<string>;
  /** Nodes granted a revision they have not answered yet (this pass's grants included). */
  inFlight: Set<string>;
  /** Of those rebooting back, the ones past their deadline for it: counted failed, cordoned. */
  rollbackTimedOut: Set<string>;
  /** Nodes a resume found rebooting back: retried once their rollback ends (status.retryWhenBack). */
  retryWhenBack: Set<string>;
}

/**
 * The node reports RollingBack: rolled back, not yet back in the old revision — whichever grant
 * the report answers: a try after its reboot that a newer grant superseded reboots back under the
 * older grant's generation, and the agent handles the newer grant only once it is back.
 */
function rollingBack(node: NodeState): boolean {
  return node.report?.phase === 'RollingBack';
}

/** One rule of the file header: reads the pass, decides its part. */
type Rule = (p: Pass) => void;

const count = (p: Pass, cls: Class): number =>
  [...p.classes.values()].filter((c) => c === cls).length;

const due = (p: Pass, at: number): void => {
  p.nextDue = Math.min(p.nextDue ?? at, at);
};

const grantOptions = (p: Pass): Omit<GrantOptions, 'tryMode' | 'canary'> => ({
  policy: p.input.policy,
  namespace: p.input.namespace,
  osc: p.input.osc,
  now: p.input.now,
});

function findRevision(p: Pass, n: number | undefined): Revision | undefined {
  return n === undefined ? undefined : p.input.revisions.find((r) => r.number === n);
}

/**
 * The target is the revision of the OSC's current rendering, or, while spec.rollout.rollback
 * names that revision, the revision it goes back to (an undo, applied without try mode).
 */
const chooseTarget: Rule = (p) => {
  const rollback = p.input.policy.rollback;
  if (!rollback || rollback.fromRevision !== p.rendered.number) return;
  const undoTo = findRevision(p, rollback.toRevision);
  if (!undoTo) return;
  p.target = undoTo;
  p.undoing = true;
};

/**
 * The stable revision is the last whose rollout completed; the first revision an OSC ever has
 * is stable at once (there is nothing to fall back to). One no longer kept leaves the target.
 */
const chooseStable: Rule = (p) => {
  const memory = p.input.memory;
  p.stable = findRevision(p, memory?.stableRevision) ?? p.target;
  p.tryMode = p.target.number !== p.stable.number && !p.undoing;
};

/** A new target starts a new rollout status (and says so); the same one carries on. */
const startOrContinue: Rule = (p) => {
  const { memory, now } = p.input;
  const { target, stable } = p;
  p.fresh = memory?.revision !== target.number || memory.checksum !== target.checksum;
  p.status =
    p.fresh || !memory
      ? {
          revision: target.number,
          checksum: target.checksum,
          stableRevision: stable.number,
          phase: 'Progressing',
          message: '',
          maxUnavailable: 0,
          failureThreshold: 0,
          nodes: { total: 0, updated: 0, updating: 0, failed: 0, rolledBack: 0, pending: 0 },
          wave: 0,
          waves: 0,
          startTime: rfc3339(now),
          ...(memory?.observedResume !== undefined
            ? { observedResume: memory.observedResume }
            : {}),
        }
      : { ...memory, nodes: { ...memory.nodes } };
  if (p.fresh && memory && (target.number !== stable.number || p.undoing)) {
    p.plan.events.push({
      type: 'Normal',
      reason: p.undoing ? 'RolloutUndo' : 'RolloutStarted',
      message: p.undoing
        ? `Undoing revision ${String(p.rendered.number)}: every node goes back to revision ${String(target.number)}.`
        : `Rolling out revision ${String(target.number)} (checksum ${target.checksum.slice(0, 12)}) from revision ${String(stable.number)}.`,
    });
  }
};

/** A rollback that names a revision no longer kept is ignored, and says so. */
const warnRollbackIgnored: Rule = (p) => {
  const rollback = p.input.policy.rollback;
  if (!rollback || p.undoing || rollback.fromRevision !== p.rendered.number) return;
  p.plan.events.push({
    type: 'Warning',
    reason: 'RollbackIgnored',
    message: `spec.rollout.rollback names revision ${String(rollback.toRevision)}, which is not kept; keeping revision ${String(p.rendered.number)}.`,
  });
};

function digestsOf(r: Revision): { restart?: string; drain?: string; reboot?: string } {
  return { restart: r.disruption, drain: r.drainDigest, reboot: r.rebootDigest };
}

/**
 * A stable revision kept by an older oscar has no per-level digests: its level is worked out
 * conservatively (api/disruption.ts legacyDigests). When that drains nodes, the rollout's start
 * says why, so a drain after an upgrade is not a mystery.
 */
function sayWhyOldRevisionDrains(p: Pass): void {
  const old = p.stable.drainDigest === undefined && p.stable.rebootDigest === undefined;
  if (!p.fresh || !p.drainFirst || !old || p.stable.number === p.target.number) return;
  p.plan.events.push({
    type: 'Normal',
    reason: 'DisruptionFromOldRevision',
    message: `Revision ${String(p.stable.number)} was kept by an oscar without per-level disruption digests: revision ${String(p.target.number)} counts as ${p.level} against it (${p.level === 'Reboot' ? 'it declares onChange: reboot' : 'its units, packages or spec.cri changed, and whether the container runtime did cannot be told'}), so each node is drained first.`,
  });
}

/** maxUnavailable, failureThreshold and the canary wave, scaled to the nodes there are. */
const sizeTheRollout: Rule = (p) => {
  const { policy, nodes } = p.input;
  p.total = nodes.length;
  p.maxUnavailable = scaledCount(policy.maxUnavailable, p.total, 'down');
  p.threshold = scaledCount(policy.failureThreshold, p.total, 'up');
  p.canarySize = policy.canary && p.tryMode ? scaledCount(policy.canary.nodes, p.total, 'up') : 0;
  p.level = p.tryMode ? levelBetween(digestsOf(p.stable), digestsOf(p.target)) : 'None';
  p.drainFirst = atLeast(p.level, 'Drain');
  sayWhyOldRevisionDrains(p);
  // nonDisruptive: Immediate grants a revision that disturbs no unit to every node at once
  p.immediate =
    p.tryMode &&
    policy.nonDisruptive === 'Immediate' &&
    p.target.disruption !== undefined &&
    p.target.disruption === p.stable.disruption;
};

/**
 * A resume (a new oscar.dev/resume annotation value) ends a canary or failure pause and hands
 * every failed node the stable revision. A first pass only notes the token: nothing to resume.
 */
const noteResume: Rule = (p) => {
  const token = p.input.resumeToken;
  p.resumed =
    p.input.memory !== undefined && token !== undefined && token !== p.status.observedResume;
  if (token !== undefined) p.status.observedResume = token;
};

/**
 * A node that joins gets the revision it already carries when that is the target or the stable
 * one, otherwise the stable one: never an unproven revision outside the gate.
 */
function joinNode(p: Pass, node: NodeState): void {
  const rev = node.appliedChecksum === p.target.checksum ? p.target : p.stable;
  p.plan.grants.push({
    node: node.name,
    grant: grantFor(rev, { ...grantOptions(p), tryMode: false, canary: false }),
  });
  p.plan.pinned.add(rev.number);
  p.regranted.add(node.name);
  p.classes.set(node.name, rev === p.target ? 'updating' : 'pending');
  p.unavailable++;
}

/** A resume hands a failed node the stable revision; it is retried in a later wave. */
function retryFailedNode(p: Pass, node: NodeState): void {
  p.plan.grants.push({
    node: node.name,
    grant: grantFor(p.stable, { ...grantOptions(p), tryMode: false, canary: false }),
  });
  p.regranted.add(node.name);
  p.retried.add(node.name);
  p.unavailable++; // in flight to the stable revision now
  p.classes.set(node.name, 'pending');
}

/**
 * A node's failure or rollback is an Event once per grant ("node@generation"); a rollback that
 * then fails (RollingBack → Failed) once more ("node@generation:Failed").
 */
function reportFailure(p: Pass, node: NodeState, cls: Class, timedOut: boolean): void {
  const a = answer(node);
  const key = `${node.name}@${String(node.generation)}${a?.phase === 'Failed' ? ':Failed' : ''}`;
  if (p.input.reportedFailures.has(key)) return;
  p.plan.newlyReported.push(key);
  const back = a?.phase === 'RollingBack';
  p.plan.events.push({
    type: 'Warning',
    reason: cls === 'rolledBack' ? 'NodeRolledBack' : 'NodeFailed',
    message: timedOut
      ? `Node ${node.name} did not confirm revision ${String(p.target.number)} by its deadline; counted as failed.`
      : `Node ${node.name} ${cls === 'rolledBack' ? 'rolled back' : 'failed'} revision ${String(p.target.number)}: ${a?.reason ?? ''}: ${(a?.message ?? '').slice(0, 300)}${back ? `; it reboots back into its previous revision and stays cordoned until it is back, Ready and healthy there.` : ''}`,
  });
}

/** When a node rebooting back is past its deadline for it (ms), or undefined when unknown. */
function rollbackDueAt(p: Pass, node: NodeState): number | undefined {
  const entry = p.input.memory?.drains?.find((d) => d.node === node.name);
  const since =
    entry !== undefined
      ? (entry.rollingBackSince ?? rfc3339(p.input.now))
      : answer(node)?.lastTransitionTime;
  const at = since === undefined ? NaN : Date.parse(since);
  if (!Number.isFinite(at)) return undefined;
  const { progressDeadlineSeconds, soakSeconds } = p.input.policy;
  const deadline = node.grant?.try?.deadlineSeconds ?? progressDeadlineSeconds;
  const soak = node.grant?.try?.soakSeconds ?? soakSeconds;
  return at + (deadline + soak) * 1000 + NODE_REPORT_GRACE_MS;
}

/**
 * A node rebooting back (RollingBack) holds its place, cordoned, until it reports RolledBack or
 * Failed. Past the same deadline as a forward reboot's (deadline + soak + grace, from when the
 * controller first saw it rebooting back) it counts as failed and a NodeRollbackTimedOut Warning
 * says so once; it stays cordoned: a node that never came back needs a person.
 */
function noteRollingBack(p: Pass, node: NodeState, c: { cls: Class }): void {
  p.rebootingBack.add(node.name);
  const at = rollbackDueAt(p, node);
  if (at === undefined) return;
  if (p.nowMs < at) {
    due(p, at);
    return;
  }
  p.rollbackTimedOut.add(node.name);
  if (c.cls === 'rolledBack') c.cls = 'failed';
  const key = `${node.name}@${String(node.generation)}:RollbackTimedOut`;
  if (p.input.reportedFailures.has(key)) return;
  p.plan.newlyReported.push(key);
  p.plan.events.push({
    type: 'Warning',
    reason: 'NodeRollbackTimedOut',
    message: `Node ${node.name} rolled back revision ${String(node.grant?.number ?? p.target.number)} and has not come back from its reboot into its previous revision by its deadline; counted as failed. It stays cordoned: look at the machine (a reboot that never finished, kubelet or the agent not starting).`,
  });
}

/**
 * A resume found this node rebooting back: it is left until it reports RolledBack or Failed
 * (meanwhile pending, neither granted nor counted failed), then retried as a resume retries any
 * failed node. True when this pass handled the node (retried it).
 */
function retryOnceBack(p: Pass, node: NodeState, back: boolean, failedOrBack: boolean): boolean {
  const remembered = !p.fresh && (p.input.memory?.retryWhenBack ?? []).includes(node.name);
  if (back) {
    if (remembered || (p.resumed && failedOrBack)) p.retryWhenBack.add(node.name);
    return false;
  }
  if (!remembered) return false;
  const phase = answer(node)?.phase;
  if (phase !== 'RolledBack' && phase !== 'Failed') return false; // given another grant since
  retryFailedNode(p, node);
  p.plan.events.push({
    type: 'Normal',
    reason: 'NodeRollbackComplete',
    message: `Node ${node.name} ended its rollback of revision ${String(p.target.number)} (${phase}: ${answer(node)?.reason ?? ''}); a resume came meanwhile: it goes back to revision ${String(p.stable.number)} and will be retried.`,
  });
  return true;
}

/**
 * Every node is updated, updating, failed, rolled back or pending. Unavailable are the nodes in
 * flight (granted a revision they have not answered), failed without rolling back, or Degraded;
 * a node that neither confirms nor fails within grant time + deadline + grace counts as failed.
 */
const classifyNodes: Rule = (p) => {
  const deadline = p.input.policy.progressDeadlineSeconds;
  for (const node of [...p.input.nodes].sort(byName)) {
    if (node.grant) p.plan.pinned.add(node.grant.number);
    if (!node.grant) {
      joinNode(p, node);
      continue;
    }
    const c = classify(node, p.target, p.nowMs, deadline);
    if (c.inFlight) p.inFlight.add(node.name);
    if (c.inFlight) {
      const at = noReportAt(node, deadline);
      if (at !== undefined) due(p, at);
    }
    const back = rollingBack(node);
    if (back) noteRollingBack(p, node, c);
    const failedOrBack = c.cls === 'failed' || c.cls === 'rolledBack';
    if (retryOnceBack(p, node, back, failedOrBack)) continue;
    if (failedOrBack && p.resumed && !back) {
      retryFailedNode(p, node);
      continue;
    }
    if (failedOrBack) reportFailure(p, node, c.cls, c.timedOut);
    p.classes.set(node.name, c.cls);
    if (back && p.retryWhenBack.has(node.name)) p.classes.set(node.name, 'pending');
    const failedInPlace =
      answer(node)?.phase === 'Failed' || (c.timedOut && c.cls !== 'rolledBack');
    if (c.inFlight || failedInPlace || node.degraded || back) p.unavailable++;
  }
};

/** A canary wave (canary.nodes) goes first: it is complete once its nodes are updated. */
const completeCanary: Rule = (p) => {
  const { nodes, policy, now } = p.input;
  // the canary nodes carry canary: true in their grant of the target
  p.canaryNodes = nodes.filter((n) => n.grant?.canary === true && same(n.grant, p.target));
  p.inCanary = p.canarySize > 0 && !p.immediate && p.status.canaryCompleteTime === undefined;
  if (!p.inCanary) return;
  const updatedCanaries = p.canaryNodes.filter((n) => p.classes.get(n.name) === 'updated').length;
  const pendingLeft = count(p, 'pending') > 0;
  const wanted = Math.min(p.canarySize, p.total);
  const done =
    (updatedCanaries >= wanted || (!pendingLeft && p.canaryNodes.length > 0)) &&
    updatedCanaries === p.canaryNodes.length;
  if (!done) return;
  p.status.canaryCompleteTime = rfc3339(now);
  p.inCanary = false;
  p.plan.events.push({
    type: 'Normal',
    reason: 'CanaryComplete',
    message: `The canary wave (${String(updatedCanaries)} node(s)) is updated to revision ${String(p.target.number)}; ${policy.canary?.pauseSeconds === undefined ? 'paused until `oscar rollout resume`' : `continuing in ${String(policy.canary.pauseSeconds)} s`}.`,
  });
};

/** After the canary wave the rollout pauses for canary.pauseSeconds, or until resumed. */
const pauseAfterCanary: Rule = (p) => {
  const { status } = p;
  if (p.canarySize === 0 || p.immediate || status.canaryCompleteTime === undefined) return;
  if (status.canaryPromoted === true) return;
  const pauseS = p.input.policy.canary?.pauseSeconds;
  const endsAt =
    pauseS === undefined ? undefined : Date.parse(status.canaryCompleteTime) + pauseS * 1000;
  if (p.resumed || (endsAt !== undefined && p.nowMs >= endsAt)) {
    status.canaryPromoted = true;
    p.promotedByResume = p.resumed;
  } else {
    p.canaryPause = true;
    if (endsAt !== undefined) due(p, endsAt);
  }
};

/** A resume that changed something says so. */
const announceResume: Rule = (p) => {
  const wasPaused = p.input.memory?.pauseReason !== undefined && !p.fresh;
  if (!p.resumed || !(p.retried.size > 0 || p.promotedByResume || wasPaused)) return;
  p.plan.events.push({
    type: 'Normal',
    reason: 'Resumed',
    message: `Rollout of revision ${String(p.target.number)} resumed${p.retried.size > 0 ? `; ${String(p.retried.size)} failed node(s) go back to revision ${String(p.stable.number)} and will be retried` : ''}.`,
  });
};

/** failed + rolled back ≥ failureThreshold pauses the rollout; so does spec.rollout.paused. */
const decidePause: Rule = (p) => {
  // (failed nodes a resume handed the stable revision are pending now)
  const failed = count(p, 'failed') + count(p, 'rolledBack');
  p.pauseReason = p.input.policy.paused
    ? 'Manual'
    : failed >= p.threshold
      ? 'FailureThreshold'
      : p.canaryPause
        ? 'Canary'
        : undefined;
};

/**
 * New grants of the target go to pending nodes, by name, only while unavailable <
 * maxUnavailable (all at once when nonDisruptive: Immediate applies), and in the canary wave
 * only up to its size.
 */
const grantWaves: Rule = (p) => {
  const { nodes, policy } = p.input;
  p.granted = nodes.filter((n) => same(n.grant, p.target)).length;
  if (p.pauseReason !== undefined || p.total === 0) return;
  let budget = p.immediate ? Infinity : p.maxUnavailable - p.unavailable;
  let canaryRoom = p.inCanary ? Math.max(0, p.canarySize - p.canaryNodes.length) : Infinity;
  for (const node of [...nodes].sort(byName)) {
    if (p.classes.get(node.name) !== 'pending' || p.regranted.has(node.name)) continue;
    if (p.rebootingBack.has(node.name)) continue; // nothing new before it is back
    const drain = p.drains.get(node.name);
    if (drain?.phase === 'Skipped') continue; // until a resume
    // a retried node kept drained answers its grant of the stable revision before the next
    if (drain?.phase === 'Drained' && p.inFlight.has(node.name)) continue;
    // a node in its drain was counted unavailable already: its grant takes no new budget
    const draining = drain !== undefined;
    if (!draining && (budget <= 0 || canaryRoom <= 0)) continue;
    if (p.drainFirst && drain?.phase !== 'Drained') {
      if (!draining) startDrain(p, node.name);
      if (!draining) {
        budget--;
        canaryRoom--;
      }
      continue;
    }
    const grant = grantFor(p.target, {
      ...grantOptions(p),
      tryMode: p.tryMode,
      canary: p.inCanary,
      ...(p.drainFirst ? { disruption: p.level } : {}),
    });
    p.plan.grants.push({ node: node.name, grant });
    const at = noReportAt({ ...node, grant }, policy.progressDeadlineSeconds);
    if (at !== undefined) due(p, at);
    p.plan.pinned.add(p.target.number);
    p.classes.set(node.name, 'updating');
    if (!draining) {
      budget--;
      canaryRoom--;
    }
    p.granted++;
  }
};

/** A node about to take a Drain- or Reboot-level target is cordoned and drained first. */
function startDrain(p: Pass, node: string): void {
  p.drains.set(node, {
    node,
    revision: p.target.number,
    phase: 'Draining',
    startTime: rfc3339(p.input.now),
    message: 'cordoned; evicting its pods',
  });
  p.plan.drains.push(node);
  due(p, p.nowMs + p.input.policy.drain.timeoutSeconds * 1000);
}

/** Why a drain entry ends this pass, or undefined while it holds. */
function drainEnds(p: Pass, entry: DrainEntry, present: boolean): string | undefined {
  if (!present) return 'gone';
  if (p.rebootingBack.has(entry.node)) return undefined; // cordoned until it is back
  if (entry.revision !== p.target.number || !p.drainFirst) return 'stale';
  const cls = p.classes.get(entry.node);
  if (cls === 'updated') return 'confirmed';
  if (cls === 'rolledBack') return 'rolledBack';
  if (entry.phase === 'Skipped' && p.resumed) return 'resumed';
  return undefined;
}

/**
 * status.rollout.drains, carried over: a node that confirmed or rolled back is uncordoned (one
 * that failed in place stays cordoned); a drain in progress goes on (it counts against
 * maxUnavailable) and past spec.rollout.drain.timeoutSeconds is Blocked (Wait) or Skipped
 * (Skip: uncordoned, not granted until a resume).
 */
const trackDrains: Rule = (p) => {
  const present = new Set(p.input.nodes.map((n) => n.name));
  const memory = p.input.memory?.drains ?? [];
  const { timeoutSeconds, onTimeout } = p.input.policy.drain;
  for (const old of memory) {
    const entry = { ...old };
    const ends = drainEnds(p, entry, present.has(entry.node));
    if (ends !== undefined) {
      if (entry.phase !== 'Skipped') p.plan.uncordons.push(entry.node);
      if (ends === 'rolledBack') sayBackInService(p, entry.node);
      continue;
    }
    p.drains.set(entry.node, entry);
    if (p.rebootingBack.has(entry.node)) {
      // counted unavailable by classifyNodes; the entry says why it stays cordoned
      entry.rollingBackSince ??= rfc3339(p.input.now);
      entry.message = p.rollbackTimedOut.has(entry.node)
        ? `rolled back revision ${String(p.target.number)} and did not come back from its reboot into its previous revision by its deadline: cordoned until a person looks`
        : `rolled back revision ${String(p.target.number)}; rebooting back into its previous revision: cordoned until it is back, Ready and healthy there`;
      continue;
    }
    if (p.classes.get(entry.node) !== 'pending') continue; // granted: in flight already
    if (entry.phase === 'Skipped') continue;
    p.unavailable++;
    if (entry.phase === 'Drained') continue;
    p.plan.drains.push(entry.node);
    const endsAt = Date.parse(entry.startTime) + timeoutSeconds * 1000;
    if (p.nowMs < endsAt) {
      due(p, endsAt);
      continue;
    }
    if (onTimeout === 'Skip') {
      entry.phase = 'Skipped';
      p.plan.drains.pop();
      p.plan.uncordons.push(entry.node);
      p.unavailable--;
      p.plan.events.push({
        type: 'Warning',
        reason: 'DrainSkipped',
        message: `Node ${entry.node} was not drained within ${String(timeoutSeconds)} s (${entry.message}); uncordoned and skipped (spec.rollout.drain.onTimeout: Skip) until \`oscar rollout resume\`.`,
      });
    } else if (entry.phase === 'Draining') {
      entry.phase = 'Blocked';
      p.plan.events.push({
        type: 'Warning',
        reason: 'DrainBlocked',
        message: `Node ${entry.node} is not drained after ${String(timeoutSeconds)} s: ${entry.message}. Still trying (spec.rollout.drain.onTimeout: Wait).`,
      });
    }
  }
};

/** A node that rolled back goes back into service: its previous revision is proven (again). */
function sayBackInService(p: Pass, name: string): void {
  const node = p.input.nodes.find((n) => n.name === name);
  const a = node ? answer(node) : undefined;
  p.plan.events.push({
    type: 'Normal',
    reason: 'NodeRollbackComplete',
    message: `Node ${name} rolled back revision ${String(p.target.number)} (${a?.reason ?? 'rolled back'}) and runs its previous revision again; uncordoned.`,
  });
}

/** Waves: the canary is the first; then one per maxUnavailable grants. */
const countWaves: Rule = (p) => {
  const { status, total, canarySize, immediate, maxUnavailable, granted } = p;
  const previousWave = status.wave;
  const canaryWaves = canarySize > 0 && !immediate ? 1 : 0;
  const rest = Math.max(0, total - (canaryWaves > 0 ? Math.min(canarySize, total) : 0));
  status.waves = immediate ? 1 : canaryWaves + Math.ceil(rest / Math.max(1, maxUnavailable));
  const afterCanary = Math.max(0, granted - (canaryWaves > 0 ? p.canaryNodes.length : 0));
  const wave = immediate
    ? granted > 0
      ? 1
      : 0
    : (granted > 0 && canaryWaves > 0 ? 1 : 0) +
      (p.inCanary ? 0 : Math.ceil(afterCanary / Math.max(1, maxUnavailable)));
  // (nodes joining mid-rollout move the count of waves; a wave number never exceeds it)
  status.wave = Math.min(Math.max(status.wave, wave), Math.max(status.waves, 1));
  if (status.wave > previousWave && p.tryMode) {
    p.plan.events.push({
      type: 'Normal',
      reason: 'Wave',
      message: `Wave ${String(status.wave)} of ${String(status.waves)}: revision ${String(p.target.number)} granted to ${String(granted)} of ${String(total)} node(s)${p.inCanary ? ' (canary)' : ''}.`,
    });
  }
};

/** The rollout is complete when every node is updated (the target becomes stable), else paused or going on. */
const completeOrPause: Rule = (p) => {
  const { status, total, target } = p;
  const { memory, now } = p.input;
  status.nodes = {
    total,
    updated: count(p, 'updated'),
    updating: count(p, 'updating'),
    failed: count(p, 'failed') + count(p, 'rolledBack'),
    rolledBack: count(p, 'rolledBack'),
    rollingBack: p.rebootingBack.size,
    pending: count(p, 'pending'),
  };
  status.maxUnavailable = p.maxUnavailable;
  status.failureThreshold = p.threshold;
  const complete = total === 0 || status.nodes.updated === total;
  const previousPause = memory && !p.fresh ? memory.pauseReason : undefined;
  if (complete) {
    if (status.completionTime === undefined) {
      status.completionTime = rfc3339(now);
      if (p.tryMode || p.undoing) {
        p.plan.events.push({
          type: 'Normal',
          reason: 'RolloutComplete',
          message: `Every node (${String(total)}) is updated to revision ${String(target.number)}.`,
        });
      }
    }
    status.stableRevision = target.number;
    delete status.pauseReason;
  } else {
    delete status.completionTime;
    if (p.pauseReason) status.pauseReason = p.pauseReason;
    else delete status.pauseReason;
    if (p.pauseReason && p.pauseReason !== previousPause) {
      p.plan.events.push({
        type: p.pauseReason === 'FailureThreshold' ? 'Warning' : 'Normal',
        reason: 'RolloutPaused',
        message: pauseMessage(p.pauseReason, status.nodes.failed, p.threshold, target.number),
      });
    }
  }
  status.phase = complete
    ? 'Complete'
    : p.pauseReason
      ? 'Paused'
      : p.undoing
        ? 'Undoing'
        : 'Progressing';
};

/** The status's words and revision list; what must be kept; when to look again. */
const finish: Rule = (p) => {
  const { status, plan } = p;
  status.message = describe(status, status.phase, p.target, p.stable, p.rebootingBack.size);
  status.revisions = [...p.input.revisions]
    .sort((a, b) => b.number - a.number)
    .map((r) => ({
      revision: r.number,
      checksumShort: r.checksum.slice(0, 12),
      secretName: r.secretName,
    }));
  plan.pinned.add(p.target.number);
  plan.pinned.add(p.stable.number);
  plan.pinned.add(p.rendered.number);
  if (p.level !== 'None') status.disruption = p.level;
  else delete status.disruption;
  if (p.retryWhenBack.size > 0) status.retryWhenBack = [...p.retryWhenBack].sort();
  else delete status.retryWhenBack;
  const drains = [...p.drains.values()].sort((a, b) => (a.node < b.node ? -1 : 1));
  if (drains.length > 0) status.drains = drains;
  else delete status.drains;
  plan.status = status;
  if (p.nextDue !== undefined) plan.requeueAfterMs = Math.max(1000, p.nextDue - p.nowMs + 100);
};

/** The rules of the file header, in the order a pass runs them. A new rule is one line here. */
const RULES: readonly Rule[] = [
  chooseTarget,
  chooseStable,
  startOrContinue,
  warnRollbackIgnored,
  sizeTheRollout,
  noteResume,
  classifyNodes,
  completeCanary,
  pauseAfterCanary,
  announceResume,
  decidePause,
  trackDrains,
  grantWaves,
  countWaves,
  completeOrPause,
  finish,
];

export function planRollout(input: RolloutInput): RolloutPlan {
  const plan: RolloutPlan = {
    grants: [],
    drains: [],
    uncordons: [],
    status: input.memory,
    events: [],
    newlyReported: [],
    pinned: new Set(),
  };
  const rendered = input.rendered;
  if (!rendered) return plan;
  const p: Pass = {
    input,
    plan,
    rendered,
    nowMs: input.now.getTime(),
    target: rendered,
    undoing: false,
    stable: rendered,
    fresh: true,
    // a placeholder until startOrContinue, the third rule, sets it
    status: plan.status as RolloutStatus,
    tryMode: false,
    total: 0,
    maxUnavailable: 0,
    threshold: 0,
    canarySize: 0,
    immediate: false,
    resumed: false,
    classes: new Map(),
    regranted: new Set(),
    retried: new Set(),
    unavailable: 0,
    nextDue: undefined,
    canaryNodes: [],
    inCanary: false,
    canaryPause: false,
    promotedByResume: false,
    pauseReason: undefined,
    granted: 0,
    level: 'None',
    drainFirst: false,
    drains: new Map(),
    rebootingBack: new Set(),
    inFlight: new Set(),
    rollbackTimedOut: new Set(),
    retryWhenBack: new Set(),
  };
  for (const rule of RULES) rule(p);
  return plan;
}

function pauseMessage(
  reason: PauseReason,
  failed: number,
  threshold: number,
  revision: number,
): string {
  switch (reason) {
    case 'Manual':
      return `Rollout of revision ${String(revision)} paused (spec.rollout.paused); \`oscar rollout resume\` continues it.`;
    case 'Canary':
      return `Rollout of revision ${String(revision)} paused after the canary wave; \`oscar rollout resume\` continues it.`;
    case 'FailureThreshold':
      return `Rollout of revision ${String(revision)} paused: ${String(failed)} node(s) failed or rolled back (threshold ${String(threshold)}). Look at their OperatingSystemConfigNode status.revision; \`oscar rollout resume\` retries them, \`oscar rollout undo\` goes back.`;
  }
}

function describe(
  s: RolloutStatus,
  phase: RolloutPhase,
  target: Revision,
  stable: Revision,
  rebootingBack: number,
): string {
  const n = s.nodes;
  const back = rebootingBack > 0 ? `, ${String(rebootingBack)} rebooting back` : '';
  const counts = `${String(n.updated)}/${String(n.total)} updated, ${String(n.updating)} updating, ${String(n.failed)} failed (${String(n.rolledBack)} rolled back${back}), ${String(n.pending)} pending`;
  switch (phase) {
    case 'Complete':
      return `Revision ${String(target.number)} is on every node (${String(n.total)}).`;
    case 'Paused':
      return `Paused (${s.pauseReason ?? ''}) at revision ${String(target.number)}: ${counts}.`;
    case 'Undoing':
      return `Undoing: every node goes back to revision ${String(target.number)}: ${counts}.`;
    case 'Progressing':
      return `Rolling out revision ${String(target.number)} from ${String(stable.number)}, wave ${String(s.wave)} of ${String(s.waves)}: ${counts}.`;
  }
}
