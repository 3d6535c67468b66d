/**
 * The rollout planner: (policy, revisions, nodes, what the last pass recorded, now) → which
 * node gets which revision, the OSC's status.rollout, the Events to record and when to look
 * again. Pure: no I/O, no clock of its own. controller/rollout/reconcile.ts feeds it from the
 * caches and writes what it returns.
 *
 * The rules (docs/rollouts.md explains them for operators):
 * - the target is the revision of the OSC's current rendering, or, while spec.rollout.rollback
 *   names that revision, the revision it goes back to (an undo, applied without try mode);
 * - the stable revision is the last whose rollout completed; the first revision an OSC ever
 *   has is stable at once (there is nothing to fall back to);
 * - a node that joins gets the revision it already carries when that is the target or the
 *   stable one, otherwise the stable one: never an unproven revision outside the gate;
 * - unavailable nodes are those in flight (granted a revision they have not confirmed, rolled
 *   back or failed), failed without rolling back, or Degraded; new grants of the target go to
 *   pending nodes, by name, only while unavailable < maxUnavailable;
 * - a canary wave (canary.nodes) goes first; once its nodes are updated the rollout pauses for
 *   canary.pauseSeconds, or until resumed;
 * - failed + rolled back ≥ failureThreshold pauses the rollout; so does spec.rollout.paused;
 *   a resume (a new oscar.dev/resume annotation value) ends a canary or failure pause and
 *   hands every failed node the stable revision, so it is retried in a later wave;
 * - nonDisruptive: Immediate grants a revision that disturbs no unit (same disruption digest as
 *   the stable one) to every pending node at once;
 * - a node that neither confirms nor fails within grant time + deadline + grace counts as failed
 *   (its agent may be cut off and unable to say it rolled back).
 */
import type {
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

export interface RolloutPlan {
  grants: { node: string; grant: RevisionGrant }[];
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

export function planRollout(input: RolloutInput): RolloutPlan {
  const { policy, rendered, revisions, nodes, now } = input;
  const plan: RolloutPlan = {
    grants: [],
    status: input.memory,
    events: [],
    newlyReported: [],
    pinned: new Set(),
  };
  if (!rendered) return plan;
  const nowMs = now.getTime();
  const find = (n: number | undefined): Revision | undefined =>
    n === undefined ? undefined : revisions.find((r) => r.number === n);

  // The target: the rendering, or the revision an undo goes back to.
  const rollback = policy.rollback;
  const undoTo =
    rollback && rollback.fromRevision === rendered.number ? find(rollback.toRevision) : undefined;
  const target = undoTo ?? rendered;
  const undoing = undoTo !== undefined;
  const memory = input.memory;
  let stable = find(memory?.stableRevision) ?? (memory ? undefined : target);
  if (!stable) {
    // The stable revision is no longer kept: the target is all that is left to stand on.
    stable = target;
  }
  const fresh = memory?.revision !== target.number || memory.checksum !== target.checksum;
  const base: RolloutStatus = fresh
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
        ...(memory?.observedResume !== undefined ? { observedResume: memory.observedResume } : {}),
      }
    : { ...memory, nodes: { ...memory.nodes } };
  const status: RolloutStatus = base;
  const tryMode = target.number !== stable.number && !undoing;
  if (fresh && memory && (target.number !== stable.number || undoing)) {
    plan.events.push({
      type: 'Normal',
      reason: undoing ? 'RolloutUndo' : 'RolloutStarted',
      message: undoing
        ? `Undoing revision ${String(rendered.number)}: every node goes back to revision ${String(target.number)}.`
        : `Rolling out revision ${String(target.number)} (checksum ${target.checksum.slice(0, 12)}) from revision ${String(stable.number)}.`,
    });
  }
  if (rollback && !undoTo && rollback.fromRevision === rendered.number) {
    plan.events.push({
      type: 'Warning',
      reason: 'RollbackIgnored',
      message: `spec.rollout.rollback names revision ${String(rollback.toRevision)}, which is not kept; keeping revision ${String(rendered.number)}.`,
    });
  }

  const total = nodes.length;
  const maxUnavailable = scaledCount(policy.maxUnavailable, total, 'down');
  const threshold = scaledCount(policy.failureThreshold, total, 'up');
  const canarySize = policy.canary && tryMode ? scaledCount(policy.canary.nodes, total, 'up') : 0;
  const immediate =
    tryMode &&
    policy.nonDisruptive === 'Immediate' &&
    target.disruption !== undefined &&
    target.disruption === stable.disruption;
  const grantOpts = { policy, namespace: input.namespace, osc: input.osc, now };

  // A resume: the canary pause ends, failed nodes go back to the stable revision for a retry.
  // (A first pass only notes the token: there is nothing it could resume.)
  const resumed =
    memory !== undefined &&
    input.resumeToken !== undefined &&
    input.resumeToken !== status.observedResume;
  if (input.resumeToken !== undefined) status.observedResume = input.resumeToken;

  const classes = new Map<string, Class>();
  const regranted = new Set<string>();
  const retried = new Set<string>();
  let unavailable = 0;
  let nextDue: number | undefined;
  for (const node of [...nodes].sort(byName)) {
    if (node.grant) plan.pinned.add(node.grant.number);
    // A node that joins gets a revision at once, outside the waves.
    if (!node.grant) {
      const rev = node.appliedChecksum === target.checksum ? target : stable;
      plan.grants.push({
        node: node.name,
        grant: grantFor(rev, { ...grantOpts, tryMode: false, canary: false }),
      });
      plan.pinned.add(rev.number);
      regranted.add(node.name);
      classes.set(node.name, rev === target ? 'updating' : 'pending');
      unavailable++;
      continue;
    }
    const c = classify(node, target, nowMs, policy.progressDeadlineSeconds);
    let cls = c.cls;
    if (c.inFlight) {
      const due = noReportAt(node, policy.progressDeadlineSeconds);
      if (due !== undefined) nextDue = Math.min(nextDue ?? due, due);
    }
    if ((cls === 'failed' || cls === 'rolledBack') && resumed) {
      plan.grants.push({
        node: node.name,
        grant: grantFor(stable, { ...grantOpts, tryMode: false, canary: false }),
      });
      regranted.add(node.name);
      retried.add(node.name);
      cls = 'pending';
      unavailable++; // in flight to the stable revision now
      classes.set(node.name, cls);
      continue;
    }
    if (cls === 'failed' || cls === 'rolledBack') {
      const key = `${node.name}@${String(node.generation)}`;
      if (!input.reportedFailures.has(key)) {
        const a = answer(node);
        plan.newlyReported.push(key);
        plan.events.push({
          type: 'Warning',
          reason: cls === 'rolledBack' ? 'NodeRolledBack' : 'NodeFailed',
          message: c.timedOut
            ? `Node ${node.name} did not confirm revision ${String(target.number)} by its deadline; counted as failed.`
            : `Node ${node.name} ${cls === 'rolledBack' ? 'rolled back' : 'failed'} revision ${String(target.number)}: ${a?.reason ?? ''}: ${(a?.message ?? '').slice(0, 300)}`,
        });
      }
    }
    classes.set(node.name, cls);
    const a = answer(node);
    const failedInPlace = a?.phase === 'Failed' || (c.timedOut && cls !== 'rolledBack');
    if (c.inFlight || failedInPlace || node.degraded) unavailable++;
  }

  const count = (cls: Class): number => [...classes.values()].filter((c) => c === cls).length;
  // (failed nodes a resume handed the stable revision are pending now)
  const failed = count('failed') + count('rolledBack');

  // Canary bookkeeping: the canary nodes carry canary: true in their grant of the target.
  const canaryNodes = nodes.filter((n) => n.grant?.canary === true && same(n.grant, target));
  let inCanary = canarySize > 0 && !immediate && status.canaryCompleteTime === undefined;
  if (inCanary) {
    const updatedCanaries = canaryNodes.filter((n) => classes.get(n.name) === 'updated').length;
    const pendingLeft = count('pending') > 0;
    const wanted = Math.min(canarySize, total);
    if (
      (updatedCanaries >= wanted || (!pendingLeft && canaryNodes.length > 0)) &&
      updatedCanaries === canaryNodes.length
    ) {
      status.canaryCompleteTime = rfc3339(now);
      inCanary = false;
      plan.events.push({
        type: 'Normal',
        reason: 'CanaryComplete',
        message: `The canary wave (${String(updatedCanaries)} node(s)) is updated to revision ${String(target.number)}; ${policy.canary?.pauseSeconds === undefined ? 'paused until `oscar rollout resume`' : `continuing in ${String(policy.canary.pauseSeconds)} s`}.`,
      });
    }
  }
  let canaryPause = false;
  let promotedByResume = false;
  if (canarySize > 0 && !immediate && status.canaryCompleteTime !== undefined) {
    if (status.canaryPromoted !== true) {
      const pauseS = policy.canary?.pauseSeconds;
      const endsAt =
        pauseS === undefined ? undefined : Date.parse(status.canaryCompleteTime) + pauseS * 1000;
      if (resumed || (endsAt !== undefined && nowMs >= endsAt)) {
        status.canaryPromoted = true;
        promotedByResume = resumed;
      } else {
        canaryPause = true;
        if (endsAt !== undefined) nextDue = Math.min(nextDue ?? endsAt, endsAt);
      }
    }
  }
  const wasPaused = memory?.pauseReason !== undefined && !fresh;
  if (resumed && (retried.size > 0 || promotedByResume || wasPaused)) {
    plan.events.push({
      type: 'Normal',
      reason: 'Resumed',
      message: `Rollout of revision ${String(target.number)} resumed${retried.size > 0 ? `; ${String(retried.size)} failed node(s) go back to revision ${String(stable.number)} and will be retried` : ''}.`,
    });
  }

  const pauseReason: PauseReason | undefined = policy.paused
    ? 'Manual'
    : failed >= threshold
      ? 'FailureThreshold'
      : canaryPause
        ? 'Canary'
        : undefined;

  // The waves: grant the target to pending nodes while the budget allows.
  const updatedNow = count('updated');
  let granted = nodes.filter((n) => same(n.grant, target)).length;
  const previousWave = status.wave;
  if (pauseReason === undefined && total > 0) {
    let budget = immediate ? Infinity : maxUnavailable - unavailable;
    let canaryRoom = inCanary ? Math.max(0, canarySize - canaryNodes.length) : Infinity;
    for (const node of [...nodes].sort(byName)) {
      if (budget <= 0 || canaryRoom <= 0) break;
      if (classes.get(node.name) !== 'pending' || regranted.has(node.name)) continue;
      const grant = grantFor(target, { ...grantOpts, tryMode, canary: inCanary });
      plan.grants.push({ node: node.name, grant });
      const due = noReportAt({ ...node, grant }, policy.progressDeadlineSeconds);
      if (due !== undefined) nextDue = Math.min(nextDue ?? due, due);
      plan.pinned.add(target.number);
      classes.set(node.name, 'updating');
      budget--;
      canaryRoom--;
      granted++;
    }
  }

  // Waves: the canary is the first; then one per maxUnavailable grants.
  const canaryWaves = canarySize > 0 && !immediate ? 1 : 0;
  const rest = Math.max(0, total - (canaryWaves > 0 ? Math.min(canarySize, total) : 0));
  status.waves = immediate ? 1 : canaryWaves + Math.ceil(rest / Math.max(1, maxUnavailable));
  const afterCanary = Math.max(0, granted - (canaryWaves > 0 ? canaryNodes.length : 0));
  const wave = immediate
    ? granted > 0
      ? 1
      : 0
    : (granted > 0 && canaryWaves > 0 ? 1 : 0) +
      (inCanary ? 0 : Math.ceil(afterCanary / Math.max(1, maxUnavailable)));
  // (nodes joining mid-rollout move the count of waves; a wave number never exceeds it)
  status.wave = Math.min(Math.max(status.wave, wave), Math.max(status.waves, 1));
  if (status.wave > previousWave && tryMode) {
    plan.events.push({
      type: 'Normal',
      reason: 'Wave',
      message: `Wave ${String(status.wave)} of ${String(status.waves)}: revision ${String(target.number)} granted to ${String(granted)} of ${String(total)} node(s)${inCanary ? ' (canary)' : ''}.`,
    });
  }

  status.nodes = {
    total,
    updated: updatedNow,
    updating: count('updating'),
    failed: count('failed') + count('rolledBack'),
    rolledBack: count('rolledBack'),
    pending: count('pending'),
  };
  status.maxUnavailable = maxUnavailable;
  status.failureThreshold = threshold;

  const complete = total === 0 || updatedNow === total;
  const previousPause = memory && !fresh ? memory.pauseReason : undefined;
  if (complete) {
    if (status.completionTime === undefined) {
      status.completionTime = rfc3339(now);
      if (tryMode || undoing) {
        plan.events.push({
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
    if (pauseReason) status.pauseReason = pauseReason;
    else delete status.pauseReason;
    if (pauseReason && pauseReason !== previousPause) {
      plan.events.push({
        type: pauseReason === 'FailureThreshold' ? 'Warning' : 'Normal',
        reason: 'RolloutPaused',
        message: pauseMessage(pauseReason, failed, threshold, target.number),
      });
    }
  }
  const phase: RolloutPhase = complete
    ? 'Complete'
    : pauseReason
      ? 'Paused'
      : undoing
        ? 'Undoing'
        : 'Progressing';
  status.phase = phase;
  status.message = describe(status, phase, target, stable);
  status.revisions = [...revisions]
    .sort((a, b) => b.number - a.number)
    .map((r) => ({
      revision: r.number,
      checksumShort: r.checksum.slice(0, 12),
      secretName: r.secretName,
    }));
  plan.pinned.add(target.number);
  plan.pinned.add(stable.number);
  plan.pinned.add(rendered.number);
  plan.status = status;
  if (nextDue !== undefined) plan.requeueAfterMs = Math.max(1000, nextDue - nowMs + 100);
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
): string {
  const n = s.nodes;
  const counts = `${String(n.updated)}/${String(n.total)} updated, ${String(n.updating)} updating, ${String(n.failed)} failed (${String(n.rolledBack)} rolled back), ${String(n.pending)} pending`;
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
