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
 *   ./rollback-boot.ts reports RollingBack, reboots back into the previous revision and proves it
 *   there like a try before RolledBack (issue 25) — a failed try, one a newer grant supersedes
 *   (that grant waits until the rollback ended), and a crashed Reboot-level try the machine
 *   booted into alike.
 * Drift: a revert of drift waits while a try is open — its verdict decides what stays.
 */
import { errorFields, type Logger } from '../../log/logger.js';
import type { RevisionReport } from '../../api/schema.js';
import type { GrantPhase } from '../../api/constants.js';
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
import { RollbackBoot } from './rollback-boot.js';
import type { Proof, TryLifecycle } from './try-lifecycle.js';
import type { TryRecord, TryState, WatchedUnit } from './try-state.js';

export type { TryLifecycle } from './try-lifecycle.js';

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

  /** A try reverted after its reboot: the reboot back and the old state's proof. */
  private readonly rollbackBoot: RollbackBoot;

  constructor(private readonly o: GrantAdmissionOptions) {
    this.description = o.source.description;
    this.following = o.scope.osc;
    this.rollbackBoot = new RollbackBoot({
      tryState: o.tryState,
      lifecycle: o.lifecycle,
      reporter: o.reporter,
      log: o.log,
      now: () => this.now(),
      report: (grant, phase, reason, message, extra) => {
        this.report(grant, phase, reason, message, extra);
      },
      verify: (record, signal, proof) => this.verify(record, signal, proof),
    });
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
      loop.admit(
        this.admitted(record.grant, (ctx) => this.rollbackBoot.continue(record, ctx, true)),
      );
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
      // a revision that takes effect at boot was booted into: its revert needs a boot back too
      const bootedInto = (await this.o.lifecycle?.bootedInto(record, boot)) === true;
      await this.rollBack(record, 'Reboot', reason, loop, { bootedInto });
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
    if (!(await this.rollbackEnded(grant, ctx))) return;
    if (await this.failedBefore(grant)) return;
    const open = await this.openTryOf(grant, ctx);
    if (open === 'rebootingBack') return; // the newer grant is handled once the node is back
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

  /**
   * A rollback rebooting back (or proving the old state after it) goes on first, whatever the
   * grant: a newer one waits until the rollback ended (RolledBack, or Failed) — the node is proven
   * in no revision before, and the controller keeps it cordoned. True when `grant` may go on now.
   */
  private async rollbackEnded(grant: Grant, ctx: RunContext): Promise<boolean> {
    const rolling = await this.o.tryState.current();
    if (!rolling?.rollback) return true;
    await this.rollbackBoot.continue(rolling, ctx, false);
    if (grantKey(rolling.grant) === grantKey(grant)) return false;
    return (await this.o.tryState.current()) === undefined;
  }

  /**
   * The open try of this grant; a try of another grant goes back to the confirmed revision. When
   * the node had rebooted into that try, the revert is a rollback boot like a failed try's
   * (reason Superseded: RollingBack, the reboot back, the old state proven before RolledBack), and
   * the newer grant waits for it ('rebootingBack').
   */
  private async openTryOf(
    grant: Grant,
    ctx: RunContext,
  ): Promise<TryRecord | undefined | 'rebootingBack'> {
    const record = await this.o.tryState.current();
    if (!record || grantKey(record.grant) === grantKey(grant)) return record;
    const message = `revision ${String(grant.number)} was granted instead`;
    if ((await this.o.lifecycle?.rebootsBack(record)) === true) {
      await this.rollBack(record, 'Superseded', message, ctx);
      return 'rebootingBack';
    }
    await this.rollBack(record, 'Superseded', message, ctx, { report: false });
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
    how: { report?: boolean; bootedInto?: boolean } = {},
  ): Promise<void> {
    const grant = record.grant;
    const reportIt = how.report ?? true;
    const target = await this.o.tryState.confirmed();
    this.o.log.warn({ revision: grant.number, reason, detail: message }, 'reverting the revision');
    const units = await this.revertUntilDone(record, target, message, ctx);
    if (!units) return;
    const rebootBack =
      how.bootedInto === true || (await this.o.lifecycle?.rebootsBack(record)) === true;
    if (reportIt && rebootBack) {
      await this.rollbackBoot.start(record, { reason, message }, units);
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
