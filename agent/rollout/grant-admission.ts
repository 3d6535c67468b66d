/**
 * Grant mode's admission: the agent applies only the revision the controller granted its node, and
 * a revision granted in try mode stays only if the node proves it can live with it.
 *
 * One grant at a time (a newer grant interrupts a verification and is handled next):
 * - plain grant (the first revision, an undo, a node that joins): apply, confirm; a failed apply
 *   is reported Failed and retried with backoff (by the loop, agent/agent.ts);
 * - try grant: record the try (try.json: the grant, the boot, backups of files it replaces that
 *   oscar did not own), apply, then verify until the deadline (the verify steps: the soak,
 *   ./soak.ts, last) — every unit the apply started or restarted is healthy, every health check
 *   passes for the soak time, and a status write and a watch event both go through over fresh
 *   connections. Then the revision is confirmed; else it is reverted by applying the last
 *   confirmed revision through the same planner and journal, putting the backed-up files back, and
 *   reported RolledBack with the reason. A failed apply is reverted the same way. A failed try is
 *   remembered (failed.json): the same grant is not tried again; the controller gives a new one (a
 *   new generation) to retry.
 * - at start: a try left by an earlier boot is reverted at once (the machine restarted under an
 *   unconfirmed revision); one from this boot (the agent restarted) is verified on to its
 *   deadline from what try.json holds — without needing the API server.
 * - a try reverted after the node rebooted into it (agent/reboot/) is not over with the revert:
 *   the node reports RollingBack, reboots back into the previous revision and proves it there
 *   like a try (the Node Ready in that boot, the revert's units, the checks that revision was
 *   confirmed with); only then RolledBack. A reboot back that does not happen, or an old state
 *   that fails its proof, is Failed (RollbackRebootFailed, RollbackUnhealthy), the node Degraded
 *   — never a second rollback or reboot (issue 25).
 * Drift: a revert of drift waits while a try is open — its verdict decides what stays.
 */
import { errorFields, type Logger } from '../../log/logger.js';
import type { RevisionReport } from '../../api/schema.js';
import type { GrantPhase, RollbackFailedReason } from '../../api/constants.js';
import { InvalidConfigError } from '../../api/validate-config.js';
import type { Admission, AdmissionLoop, Admitted, RunContext } from '../admission.js';
import { Agent } from '../agent.js';
import type { ApplyResult } from '../apply.js';
import type { Applier } from '../applier.js';
import { checkDesired } from '../desired-check.js';
import type { Reporter } from '../loop.js';
import type { DriftHooks } from '../model/drift.js';
import type { Desired } from '../state.js';
import { grantKey, type Grant, type TryPolicy } from './grant.js';
import type { GrantedDesired, GrantEvents } from './grant-source.js';
import type { HealthProbe, UnitProbe } from './health.js';
import { Soak, type Verdict, type VerifyStep } from './soak.js';
import {
  backInOldState,
  type RollbackRecord,
  type TryRecord,
  type TryState,
  type WatchedUnit,
} from './try-state.js';

/**
 * A try's life beyond apply, verify and verdict, for a revision that reboots the node inside its
 * try (agent/reboot/reboot.ts): a try from an earlier boot is not always a crash, and a revert
 * may need a boot of its own.
 */
export interface TryLifecycle {
  /**
   * At start, with the open try (if any) and this boot's token: true when the machine restarted
   * on purpose for that try (it is verified on), false when it is a crash (reverted).
   */
  resumes(record: TryRecord | undefined, bootNow: string): Promise<boolean>;
  /** The try ended: confirmed, reverted, or back (a rollback's proof after its reboot ended). */
  ended(record: TryRecord, outcome: 'confirmed' | 'reverted' | 'back'): Promise<void>;
  /** After the revert of a failed try: the node had rebooted into it; the old state needs a boot. */
  rebootsBack(record: TryRecord): Promise<boolean>;
  /**
   * Asks for the reboot back into the previous revision, from boot `bootNow`; 'failed' when it
   * cannot happen (asked too often from this boot, or refused).
   */
  rebootBack(
    record: TryRecord,
    bootNow: string,
  ): Promise<{ kind: 'rebooting'; attempt: number } | { kind: 'failed'; message: string }>;
}

/** How a proof reports while it runs, and what it checks. */
interface Proof {
  policy: TryPolicy;
  /** Reports progress: a verify step's, or the connectivity proof's ('Verifying'). */
  report: (reason: string, message: string) => void;
}

/** A rollback that could not be finished: its reason names it, the node goes Degraded. */
class RollbackFailed extends Error {
  constructor(reason: RollbackFailedReason, message: string) {
    super(message);
    this.name = reason;
  }
}

/** What the loop needs of the grant source. */
export interface GrantFeed {
  start(events: GrantEvents): Promise<void>;
  stop(): Promise<void>;
  restartWatch(): void;
  waitForVersion(rv: string): Promise<void>;
  readonly description: string;
}

/** What the loop needs of the node report (KubeReporter): the agent's reporter, and revisions. */
export interface GrantReporter extends Reporter {
  setSource(source: 'Grant', oscRef: { namespace: string; name: string }): void;
  setRevision(report: RevisionReport): void;
  mark(): number;
  writtenAfter(mark: number): Promise<string>;
}

export interface GrantAdmissionOptions {
  source: GrantFeed;
  reporter: GrantReporter;
  tryState: TryState;
  health: HealthProbe;
  units: UnitProbe;
  scope: { namespace: string; osc: string };
  /** Drops the API connections before the connectivity proof (HttpKubeClient). */
  resetConnections?: () => void;
  /** Restore owners of backed-up files (false in an unprivileged sandbox). */
  owners: boolean;
  log: Logger;
  /**
   * Steps after a tried revision's apply, before the soak (reboot inside try mode goes here):
   * each may end the try with a verdict that is not 'confirmed'.
   */
  verifySteps?: VerifyStep[];
  /** Told how each try ends and asked about a try from an earlier boot (agent/reboot/). */
  lifecycle?: TryLifecycle;
  /** Called when an apply starts (the bench measures grant → apply start). */
  onApplyStart?: (grant: Grant) => void;
  tickMs?: number;
  /** An apply still running after this long is reported Applying (else the report waits). */
  applyingReportAfterMs?: number;
  now?: () => number;
}

export interface GrantedAgentOptions extends GrantAdmissionOptions {
  applier: Applier;
  /** The drift monitor; without it nothing watches for drift. */
  drift?: DriftHooks;
  retryBaseMs?: number;
  retryMaxMs?: number;
}

/** The agent in grant mode (`oscar agent --osc`, wired by ../wiring/follow-grants.ts). */
export function grantedAgent(o: GrantedAgentOptions): Agent<GrantAdmission> {
  return new Agent({
    admission: new GrantAdmission(o),
    applier: () => o.applier,
    reporter: o.reporter,
    log: o.log,
    ...(o.drift ? { drift: o.drift } : {}),
    ...(o.retryBaseMs !== undefined ? { retryBaseMs: o.retryBaseMs } : {}),
    ...(o.retryMaxMs !== undefined ? { retryMaxMs: o.retryMaxMs } : {}),
  });
}

/** Why a revision failed, as its report says. */
function failureReason(e: Error): string {
  const reasons: Record<string, string> = {
    ApplyError: 'ApplyFailed',
    ReplacementNeeded: 'ReplacementNeeded',
    InvalidConfigError: 'InvalidConfig',
  };
  return reasons[e.name] ?? 'Error';
}

/** `f` at most once (the applied report goes out with the first Verifying report). */
function once(f: (() => void) | undefined): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    f?.();
  };
}

function rfc3339(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

export class GrantAdmission implements Admission {
  readonly description: string;
  /** The last verdict on a grant, for tests. */
  lastPhase: GrantPhase | undefined;
  /** The OSC this node reports it follows: its --osc until a grant names another. */
  private following: string;

  constructor(private readonly o: GrantAdmissionOptions) {
    this.description = o.source.description;
    this.following = o.scope.osc;
  }

  private now(): number {
    return this.o.now?.() ?? Date.now();
  }

  async start(loop: AdmissionLoop): Promise<void> {
    const { reporter, scope } = this.o;
    reporter.setSource('Grant', { namespace: scope.namespace, name: scope.osc });
    await this.recoverTry(loop);
    await this.o.source.start({
      onGrant: (g) => {
        this.onGrant(g, loop);
      },
      onError: (e) => {
        loop.sourceFailed(e);
      },
      onRecovered: (e) => {
        loop.sourceRecovered(e);
      },
    });
  }

  stop(): Promise<void> {
    return this.o.source.stop();
  }

  /** A try's verdict decides what stays: no revert of drift under an open try. */
  async mayRevertDrift(): Promise<boolean> {
    return (await this.o.tryState.current()) === undefined;
  }

  /**
   * A try left by an earlier boot is reverted (the machine restarted under an unconfirmed
   * revision); one from this boot (the agent restarted) is verified on.
   */
  private async recoverTry(loop: AdmissionLoop): Promise<void> {
    const { tryState, log } = this.o;
    const record = await tryState.current();
    const boot = await tryState.bootToken();
    if (record?.rollback) {
      log.info({ revision: record.grant.number }, 'a rollback is rebooting back: going on with it');
      loop.admit(this.admitted(record.grant, (ctx) => this.continueRollback(record, ctx, true)));
      return;
    }
    const rebootedFor = (await this.o.lifecycle?.resumes(record, boot)) === true;
    if (!record) return;
    if (rebootedFor) {
      const moved = await tryState.moveToBoot(record, boot);
      log.info({ revision: moved.grant.number }, 'back from the reboot: verifying the revision');
      loop.admit(this.admitted(moved.grant, (ctx) => this.verifyAndFinish(moved, ctx)));
      return;
    }
    if (record.boot !== boot) {
      log.warn(
        { revision: record.grant.number },
        'the revision was not confirmed before the machine restarted: reverting it',
      );
      const reason = 'the machine restarted before the revision was confirmed';
      await this.rollBack(record, 'Reboot', reason, loop);
      return;
    }
    log.info({ revision: record.grant.number }, 'resuming the try of the revision');
    loop.admit(this.admitted(record.grant, (ctx) => this.verifyAndFinish(record, ctx)));
  }

  private onGrant(g: GrantedDesired, loop: AdmissionLoop): void {
    const { grant } = g;
    this.o.log.info(
      {
        revision: grant.number,
        checksum: grant.checksum.slice(0, 12),
        generation: grant.generation,
        try: grant.try !== undefined,
      },
      'granted',
    );
    loop.admit(this.admitted(grant, (ctx) => this.process(g, ctx)));
  }

  private admitted(grant: Grant, run: (ctx: RunContext) => Promise<void>): Admitted {
    return {
      key: grantKey(grant),
      run,
      failed: (e) => {
        this.o.log.warn({ revision: grant.number, ...errorFields(e) }, 'revision failed');
        this.report(grant, 'Failed', failureReason(e), e.message);
      },
    };
  }

  private report(
    grant: Grant,
    phase: GrantPhase,
    reason: string,
    message: string,
    extra: { deadline?: number; previous?: string } = {},
  ): void {
    this.lastPhase = phase;
    const r: RevisionReport = {
      observedGeneration: grant.generation,
      number: grant.number,
      checksum: grant.checksum,
      phase,
      reason,
      message: message.slice(0, 4000),
      lastTransitionTime: rfc3339(this.now()),
    };
    if (extra.deadline !== undefined) r.deadline = rfc3339(extra.deadline);
    if (extra.previous !== undefined) r.previousChecksum = extra.previous;
    this.o.reporter.setRevision(r);
  }

  /** One grant, step by step: each step may finish it. */
  private async process(g: GrantedDesired, ctx: RunContext): Promise<void> {
    const { grant, desired } = g;
    this.follow(grant);
    // before any try starts: a revision oscar's rules refuse is never applied, so never reverted
    checkDesired(desired.config, `revision ${String(grant.number)} (${grant.secretName})`);
    const rolling = await this.o.tryState.current();
    if (rolling?.rollback && grantKey(rolling.grant) === grantKey(grant)) {
      await this.continueRollback(rolling, ctx, false);
      return;
    }
    if (await this.failedBefore(grant)) return;
    const open = await this.openTryOf(grant, ctx);
    if (open?.deadline) {
      await this.verifyAndFinish(open, ctx);
      return;
    }
    const applier = ctx.applier();
    const last = await applier.lastApplied();
    const confirmed = await this.o.tryState.confirmed();
    if (!grant.try || !(confirmed ?? last)) {
      await this.applyPlain(g, ctx, grant.try ? 'NoPreviousRevision' : 'Applied');
      return;
    }
    if (confirmed?.checksum === grant.checksum && last?.checksum === grant.checksum) {
      this.o.reporter.desired(desired.checksum);
      this.report(
        grant,
        'Confirmed',
        'AlreadyConfirmed',
        'this node confirmed the revision before',
      );
      return;
    }
    // What the node carries without ever having confirmed anything here (an agent that followed
    // the Secret before): that is what a rollback goes back to.
    if (!confirmed && last) await this.o.tryState.setConfirmed(last.bytes);
    await this.applyTried(g, open ?? (await this.o.tryState.begin(desired, last, grant)), ctx);
  }

  /**
   * Cluster API's in-place update moved this node to another OSC: report it there, so that OSC's
   * rollout counts the node and its old OSC's rollout lets go of it.
   */
  private follow(grant: Grant): void {
    if (grant.osc === this.following) return;
    this.following = grant.osc;
    this.o.reporter.setSource('Grant', { namespace: this.o.scope.namespace, name: grant.osc });
  }

  /** Tried here before and reverted: say so again (the report may be new), do not retry. */
  private async failedBefore(grant: Grant): Promise<boolean> {
    const failed = await this.o.tryState.failed();
    if (failed?.checksum !== grant.checksum || failed.generation !== grant.generation) return false;
    this.report(grant, failed.phase ?? 'RolledBack', failed.reason, failed.message);
    return true;
  }

  /** The open try of this grant; a try of another grant goes back to the confirmed revision. */
  private async openTryOf(grant: Grant, ctx: RunContext): Promise<TryRecord | undefined> {
    const record = await this.o.tryState.current();
    if (!record || grantKey(record.grant) === grantKey(grant)) return record;
    if (record.rollback) {
      // reverted already; a newer grant ends the wait for the old state's proof
      await this.o.tryState.end();
      await this.o.lifecycle?.ended(record, 'back');
      return undefined;
    }
    const message = `revision ${String(grant.number)} was granted instead`;
    await this.rollBack(record, 'Superseded', message, ctx, false);
    return undefined;
  }

  /** Applies, reporting Applying only if the apply takes a while. */
  private async apply(desired: Desired, grant: Grant, ctx: RunContext): Promise<ApplyResult> {
    this.o.onApplyStart?.(grant);
    const timer = setTimeout(() => {
      this.o.reporter.desired(desired.checksum);
      this.report(grant, 'Applying', 'Applying', `applying revision ${String(grant.number)}`);
    }, this.o.applyingReportAfterMs ?? 3_000);
    try {
      return await ctx.applier().apply(desired);
    } finally {
      clearTimeout(timer);
    }
  }

  private async applyPlain(
    { grant, desired }: GrantedDesired,
    ctx: RunContext,
    reason: string,
  ): Promise<void> {
    const t0 = performance.now();
    const result = await this.apply(desired, grant, ctx).catch((error: unknown) => {
      this.o.reporter.failed(desired.checksum, error as Error);
      throw error; // reported Failed and retried by the loop
    });
    await this.o.tryState.setConfirmed(desired.bytes);
    await this.o.tryState.end();
    this.o.reporter.desired(desired.checksum);
    this.o.reporter.applied(result, performance.now() - t0);
    this.report(
      grant,
      'Confirmed',
      reason,
      reason === 'NoPreviousRevision'
        ? 'applied without try mode: this node has no confirmed revision to go back to'
        : `applied revision ${String(grant.number)}`,
    );
  }

  /** The try: apply under try.json, then verify; a failed apply is reverted at once. */
  private async applyTried(
    { grant, desired }: GrantedDesired,
    begun: TryRecord,
    ctx: RunContext,
  ): Promise<void> {
    const { tryState, reporter } = this.o;
    const t0 = performance.now();
    let result: ApplyResult;
    try {
      result = await this.apply(desired, grant, ctx);
    } catch (error) {
      if (error instanceof InvalidConfigError) {
        // refused before anything was touched (a file in this agent's own state directory):
        // nothing to revert, and the revision must not count as applied
        await tryState.end();
        throw error;
      }
      reporter.failed(desired.checksum, error as Error);
      // Its changes are partly on disk: count it applied so the revert undoes all of them.
      await ctx.applier().markApplied(desired);
      await this.rollBack(
        begun,
        'ApplyFailed',
        `the apply failed: ${(error as Error).message}`,
        ctx,
      );
      return;
    }
    const units = await this.watchedUnits(result);
    const record = await tryState.applied(begun, this.now() + (grant.try?.deadlineMs ?? 0), units);
    const ms = performance.now() - t0;
    // in the same tick as the Verifying report, which goes out over fresh connections: one write
    await this.verifyAndFinish(record, ctx, () => {
      reporter.desired(desired.checksum);
      reporter.applied(result, ms);
    });
  }

  /** The units the apply started or restarted, with their restart count now. */
  private async watchedUnits(result: ApplyResult): Promise<WatchedUnit[]> {
    const names = [
      ...new Set(result.touchedUnits.filter((u) => u.action !== 'stop').map((u) => u.name)),
    ];
    const out: WatchedUnit[] = [];
    for (const name of names) {
      const s = await this.o.units.state(name).catch(() => undefined);
      out.push({ name, restarts: s?.restarts ?? 0 });
    }
    return out;
  }

  /** The verify steps, then the verdict: confirm, or roll back. */
  private async verifyAndFinish(
    record: TryRecord,
    ctx: RunContext,
    alsoReport?: () => void,
  ): Promise<void> {
    const grant = record.grant;
    const previous = (await this.o.tryState.confirmed())?.checksum;
    const policy = grant.try;
    const appliedReport = once(alsoReport);
    const verdict: Verdict = policy
      ? await this.verify(record, ctx.signal, {
          policy,
          report: (reason, message) => {
            appliedReport();
            this.report(grant, 'Verifying', reason, message, {
              deadline: record.deadline,
              ...(previous ? { previous } : {}),
            });
          },
        })
      : { kind: 'confirmed', message: 'no try policy' };
    if (verdict.kind === 'interrupted') return; // a newer grant, or stopping: try.json stays
    if (verdict.kind === 'failed') {
      await this.rollBack(record, verdict.reason, verdict.message, ctx);
      return;
    }
    const applied = await ctx.applier().lastApplied();
    if (applied?.checksum === grant.checksum) {
      // the checks it was proven with: a later rollback into it proves it with them
      await this.o.tryState.setConfirmed(applied.bytes, policy?.checks);
    }
    await this.o.tryState.end();
    await this.o.lifecycle?.ended(record, 'confirmed');
    this.report(grant, 'Confirmed', 'Healthy', verdict.message);
    this.o.log.info({ revision: grant.number, detail: verdict.message }, 'revision confirmed');
  }

  /**
   * The post-apply verification: the verify steps in order (options.verifySteps), the soak last.
   * The first verdict that is not 'confirmed' is the try's.
   */
  private async verify(record: TryRecord, signal: AbortSignal, proof: Proof): Promise<Verdict> {
    for (const step of this.o.verifySteps ?? []) {
      const verdict = await step(record, signal, { report: proof.report });
      if (verdict.kind !== 'confirmed') return verdict;
    }
    const soak = new Soak(
      record,
      proof.policy,
      {
        health: this.o.health,
        units: this.o.units,
        proveApi: () => this.proveApi(proof),
        tickMs: this.o.tickMs ?? 1000,
        now: () => this.now(),
      },
      signal,
    );
    return soak.run();
  }

  /**
   * The connectivity proof: new connections, the Verifying report written, the watch seeing it.
   * Resolves once it did.
   */
  private async proveApi(proof: Proof): Promise<void> {
    const { reporter, source } = this.o;
    this.o.resetConnections?.();
    source.restartWatch();
    const mark = reporter.mark();
    proof.report('Verifying', verifyingMessage(proof.policy));
    await source.waitForVersion(await reporter.writtenAfter(mark));
  }

  /**
   * Goes back to the last confirmed revision: applied through the planner and journal (files,
   * units, restarts), then the files the try replaced put back. Retried until it succeeds: a
   * node must not stay on a revision that failed.
   */
  private async rollBack(
    record: TryRecord,
    reason: string,
    message: string,
    ctx: RunContext,
    reportIt = true,
  ): Promise<void> {
    const grant = record.grant;
    const target = await this.o.tryState.confirmed();
    this.o.log.warn({ revision: grant.number, reason, detail: message }, 'reverting the revision');
    const units = await this.revertUntilDone(record, target, message, ctx);
    if (!units) return;
    if (reportIt && (await this.o.lifecycle?.rebootsBack(record)) === true) {
      await this.startRebootBack(record, { reason, message }, units);
      return;
    }
    await this.o.tryState.end();
    await this.o.tryState.setFailed({
      checksum: grant.checksum,
      generation: grant.generation,
      reason,
      message,
    });
    // reported before a reboot back into the old state (the lifecycle's), which may end the agent
    if (reportIt) {
      this.report(
        grant,
        'RolledBack',
        reason,
        message,
        target ? { previous: target.checksum } : {},
      );
    }
    await this.o.lifecycle?.ended(record, 'reverted');
  }

  /**
   * issue 25: the try was reverted after the node had rebooted into it. The rollback is not over:
   * the try stays open (try.json with `rollback`), the grant is never tried again (failed.json),
   * the node reports RollingBack — out of service, the controller keeps it cordoned — and reboots
   * back into the previous revision, where continueRollback proves it.
   */
  private async startRebootBack(
    record: TryRecord,
    verdict: { reason: string; message: string },
    units: WatchedUnit[],
  ): Promise<void> {
    const { tryState, log } = this.o;
    const grant = record.grant;
    const boot = await tryState.bootToken();
    const rolling = await tryState.rollingBack(record, { ...verdict, fromBoot: boot }, units);
    await tryState.setFailed({
      checksum: grant.checksum,
      generation: grant.generation,
      ...verdict,
    });
    log.warn({ revision: grant.number }, 'reverted: rebooting back into the previous revision');
    await this.rebootBack(rolling, boot);
  }

  /** Reports RollingBack and asks for the reboot back; one that cannot happen fails the rollback. */
  private async rebootBack(record: TryRecord, boot: string): Promise<void> {
    const previous = (await this.o.tryState.confirmed())?.checksum;
    this.reportRollingBack(record, 'rebooting into the previous revision', previous);
    const asked = (await this.o.lifecycle?.rebootBack(record, boot)) ?? {
      kind: 'failed' as const,
      message: 'this agent cannot reboot the machine',
    };
    if (asked.kind === 'failed') {
      await this.rollbackFailed(record, 'RollbackRebootFailed', asked.message, previous);
    }
  }

  /**
   * A rollback rebooting back, looked at again: in the boot the revert happened in, the reboot
   * back has not happened — at the agent's start that means systemd restarted the agent only,
   * and it is asked for again (a bounded number of times); in any other boot the machine runs the
   * previous revision and it is proven there.
   */
  private async continueRollback(
    record: TryRecord,
    ctx: RunContext,
    atStart: boolean,
  ): Promise<void> {
    const { tryState } = this.o;
    const boot = await tryState.bootToken();
    if (!backInOldState(record, boot)) {
      if (atStart) await this.rebootBack(record, boot);
      else {
        const previous = (await tryState.confirmed())?.checksum;
        this.reportRollingBack(record, 'rebooting into the previous revision', previous);
      }
      return;
    }
    const deadline = this.now() + (record.grant.try?.deadlineMs ?? 0);
    const here = record.boot === boot ? record : await tryState.backInBoot(record, boot, deadline);
    await this.proveRollback(here, ctx);
  }

  /**
   * Back in the previous revision after the reboot back: proven like a try (the verify steps —
   * the Node Ready in this boot —, the revert's units, the health checks that revision was
   * confirmed with, the API server over fresh connections) to a deadline of its own. Then
   * RolledBack; else Failed (RollbackUnhealthy). Never reverted or rebooted again.
   */
  private async proveRollback(record: TryRecord, ctx: RunContext): Promise<void> {
    const { tryState, log } = this.o;
    const grant = record.grant;
    const previous = (await tryState.confirmed())?.checksum;
    const checks = previous ? await tryState.confirmedChecks(previous) : [];
    const base = grant.try ?? { soakMs: 0, deadlineMs: 0, checks: [] };
    const verdict = await this.verify(record, ctx.signal, {
      policy: { ...base, checks },
      report: (_reason, message) => {
        this.reportRollingBack(record, `back in the previous revision: ${message}`, previous);
      },
    });
    if (verdict.kind === 'interrupted') return; // stopping, or a newer grant: try.json stays
    if (verdict.kind === 'failed') {
      const detail = `the previous revision failed its proof after the reboot back (${verdict.reason}: ${verdict.message})`;
      await this.rollbackFailed(record, 'RollbackUnhealthy', detail, previous);
      return;
    }
    const rb = rollbackOf(record);
    const message = `${rb.message}; back in the previous revision after a reboot: ${verdict.message}`;
    await tryState.end();
    await tryState.setFailed({
      checksum: grant.checksum,
      generation: grant.generation,
      reason: rb.reason,
      message,
    });
    await this.o.lifecycle?.ended(record, 'back');
    this.report(grant, 'RolledBack', rb.reason, message, previous ? { previous } : {});
    log.info({ revision: grant.number, detail: verdict.message }, 'back in the previous revision');
  }

  /** The rollback cannot be finished: Failed with its reason, the node Degraded; nothing retried. */
  private async rollbackFailed(
    record: TryRecord,
    reason: RollbackFailedReason,
    detail: string,
    previous: string | undefined,
  ): Promise<void> {
    const { tryState, log } = this.o;
    const grant = record.grant;
    const rb = rollbackOf(record);
    const message = `revision ${String(grant.number)} was rolled back (${rb.reason}: ${rb.message}), but ${detail}`;
    await tryState.end();
    await tryState.setFailed({
      checksum: grant.checksum,
      generation: grant.generation,
      reason,
      message,
      phase: 'Failed',
    });
    await this.o.lifecycle?.ended(record, 'back');
    log.error({ revision: grant.number, reason }, message);
    this.o.reporter.failed(previous ?? grant.checksum, new RollbackFailed(reason, message));
    this.report(grant, 'Failed', reason, message, previous ? { previous } : {});
  }

  /** RollingBack: the try's verdict as the reason, what happens now first in the message. */
  private reportRollingBack(record: TryRecord, now: string, previous: string | undefined): void {
    const rb = rollbackOf(record);
    this.report(record.grant, 'RollingBack', rb.reason, `${now}; rolled back: ${rb.message}`, {
      ...(record.deadline > 0 && backInOldState(record, record.boot)
        ? { deadline: record.deadline }
        : {}),
      ...(previous ? { previous } : {}),
    });
  }

  /**
   * The revert's apply and restore, retried with backoff: the units it started or restarted, or
   * undefined when the agent stopped first.
   */
  private async revertUntilDone(
    record: TryRecord,
    target: Desired | undefined,
    message: string,
    ctx: RunContext,
  ): Promise<WatchedUnit[] | undefined> {
    const grant = record.grant;
    for (let failures = 1; ; failures++) {
      try {
        let units: WatchedUnit[] = [];
        if (target) {
          const t0 = performance.now();
          const result = await ctx.applier().apply(target);
          this.o.reporter.applied(result, performance.now() - t0);
          units = await this.watchedUnits(result);
        }
        await this.o.tryState.restoreBackups(record, this.o.owners);
        return units;
      } catch (error) {
        const e = error as Error;
        this.o.log.error(
          { revision: grant.number, ...errorFields(e) },
          'reverting the revision failed',
        );
        this.o.reporter.failed(target?.checksum ?? grant.checksum, e);
        const detail = `${message}; the rollback failed: ${e.message}`;
        this.report(grant, 'Failed', 'RollbackFailed', detail);
        if (ctx.stopped()) return undefined;
        await new Promise((r) => setTimeout(r, Math.min(60_000, 1000 * 2 ** (failures - 1))));
      }
    }
  }
}

function verifyingMessage(policy: TryPolicy): string {
  const checks = policy.checks.map((c) => c.name).join(', ');
  return `checking ${checks || 'units'} for ${String(policy.soakMs / 1000)} s and the API server`;
}

function rollbackOf(record: TryRecord): RollbackRecord {
  if (!record.rollback) throw new Error('internal: not a try rolling back');
  return record.rollback;
}
