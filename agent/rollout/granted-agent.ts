/**
 * The agent in grant mode: it applies only the revision the controller granted its node, and a
 * revision granted in try mode stays only if the node proves it can live with it.
 *
 * One grant at a time (a newer grant interrupts a verification and is handled next):
 * - plain grant (the first revision, an undo, a node that joins): apply, confirm; a failed apply
 *   is reported Failed and retried with backoff;
 * - try grant: record the try (try.json: the grant, the boot, backups of files it replaces that
 *   oscar did not own), apply, then verify until the deadline — every unit the apply started or
 *   restarted is healthy, every health check passes for the soak time, and a status write and a
 *   watch event both go through over fresh connections. Then the revision is confirmed; else it
 *   is reverted by applying the last confirmed revision through the same planner and journal,
 *   putting the backed-up files back, and reported RolledBack with the reason. A failed apply is
 *   reverted the same way. A failed try is remembered (failed.json): the same grant is not tried
 *   again; the controller gives a new one (a new generation) to retry.
 * - at start: a try left by an earlier boot is reverted at once (the machine restarted under an
 *   unconfirmed revision); one from this boot (the agent restarted) is verified on to its
 *   deadline from what try.json holds — without needing the API server.
 * Drift (agent/drift/): the monitor is told around every apply (agent/applier.ts); a revert of
 * drift it asks for runs when no grant is being applied, verified or retried — a try's verdict
 * decides what stays, and a new revision repairs Revert drift anyway.
 */
import { errorFields, type Logger } from '../../log/logger.js';
import type { RevisionReport } from '../../api/schema.js';
import type { GrantPhase } from '../../api/constants.js';
import type { ApplyResult } from '../apply.js';
import { withDrift, type Applier } from '../applier.js';
import type { RebootHooks } from '../reboot/reboot.js';
import type { DriftHooks } from '../model/drift.js';
import type { Desired } from '../state.js';
import type { Grant } from './grant.js';
import type { GrantedDesired, GrantEvents } from './grant-source.js';
import { judgeUnit, type CheckResult, type HealthProbe, type UnitProbe } from './health.js';
import type { TryRecord, TryState, WatchedUnit } from './try-state.js';
import { InvalidConfigError } from '../../api/validate-config.js';
import { checkDesired } from '../desired-check.js';
import { revertThrough, RetryPolicy, waitsForNextState, type Reporter } from '../loop.js';

export { nodeApplier, type Applier } from '../applier.js';

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

export interface GrantedAgentOptions {
  source: GrantFeed;
  reporter: GrantReporter;
  applier: Applier;
  tryState: TryState;
  health: HealthProbe;
  units: UnitProbe;
  scope: { namespace: string; osc: string };
  /** Drops the API connections before the connectivity proof (HttpKubeClient). */
  resetConnections?: () => void;
  /** Restore owners of backed-up files (false in an unprivileged sandbox). */
  owners: boolean;
  log: Logger;
  /** The drift monitor; without it nothing watches for drift. */
  drift?: DriftHooks;
  /** issue 25: reboots for Reboot-level revisions, inside try mode (agent/reboot/). */
  reboot?: RebootHooks;
  /** Called when an apply starts (the bench measures grant → apply start). */
  onApplyStart?: (grant: Grant) => void;
  tickMs?: number;
  /** An apply still running after this long is reported Applying (else the report waits). */
  applyingReportAfterMs?: number;
  retryBaseMs?: number;
  retryMaxMs?: number;
  now?: () => number;
}

type Item = { kind: 'grant'; g: GrantedDesired } | { kind: 'resume'; record: TryRecord };

type Verdict =
  | { kind: 'confirmed'; message: string }
  | { kind: 'failed'; reason: string; message: string }
  | { kind: 'interrupted' };

function keyOf(grant: Grant): string {
  return `${grant.checksum}@${String(grant.generation)}`;
}

function rfc3339(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

export class GrantedAgent {
  private pending: Item | undefined;
  private running: Promise<void> | undefined;
  private active: string | undefined;
  private interrupt = new AbortController();
  private stopped = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private readonly retry: RetryPolicy;
  /** Drift asked for a revert. */
  private driftRevertWanted = false;
  /** The applier, telling the drift monitor around every apply when there is one. */
  private readonly applier: Applier;
  /** The last verdict on a grant, for tests. */
  lastPhase: GrantPhase | undefined;
  /** The checksum on the node, for /healthz. */
  applied: string | undefined;
  /** The OSC this node reports it follows: its --osc until a grant names another. */
  private following: string | undefined;

  constructor(private readonly o: GrantedAgentOptions) {
    this.applier = o.drift ? withDrift(o.applier, o.drift) : o.applier;
    this.retry = new RetryPolicy(o);
  }

  private now(): number {
    return this.o.now?.() ?? Date.now();
  }

  async start(): Promise<void> {
    const { reporter, tryState, scope } = this.o;
    this.following = scope.osc;
    reporter.setSource('Grant', { namespace: scope.namespace, name: scope.osc });
    const last = await this.applier.lastApplied();
    if (last) reporter.restored?.(last.checksum);
    this.applied = last?.checksum;
    // before anything is applied: what changed while the agent was down, against what it applied
    await this.o.drift?.start(last?.config);
    const record = await tryState.current();
    // issue 25: a reboot the agent asked for is no crash; no open try, no reboot to remember
    const boot = await tryState.bootToken();
    if (!record) await this.o.reboot?.clear();
    if (record && record.boot !== boot && (await this.o.reboot?.cameBackFor(record, boot))) {
      this.o.log.info({ revision: record.grant.number }, 'back from the reboot: verifying');
      this.enqueue({ kind: 'resume', record: await tryState.moveToBoot(record, boot) });
    } else if (record) {
      if (record.boot !== boot) {
        this.o.log.warn(
          { revision: record.grant.number },
          'the revision was not confirmed before the machine restarted: reverting it',
        );
        await this.revert(
          record,
          'Reboot',
          'the machine restarted before the revision was confirmed',
        );
      } else {
        this.o.log.info({ revision: record.grant.number }, 'resuming the try of the revision');
        this.enqueue({ kind: 'resume', record });
      }
    }
    await this.o.source.start({
      onGrant: (g) => {
        this.onGrant(g);
      },
      onError: (e) => {
        this.o.log.warn(
          { source: this.o.source.description, ...errorFields(e) },
          'grant source failed',
        );
        reporter.sourceFailed(e);
      },
    });
  }

  private onGrant(g: GrantedDesired): void {
    if (keyOf(g.grant) === this.active) return;
    this.o.log.info(
      {
        revision: g.grant.number,
        checksum: g.grant.checksum.slice(0, 12),
        generation: g.grant.generation,
        try: g.grant.try !== undefined,
      },
      'granted',
    );
    this.enqueue({ kind: 'grant', g });
  }

  private enqueue(item: Item): void {
    this.pending = item;
    this.retry.reset();
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    this.interrupt.abort(); // a verification in progress gives way
    this.kick();
  }

  /**
   * Drift asks for a revert: it runs once no grant is pending, applied, verified or waiting for its
   * retry (the retry's apply repairs Revert drift too).
   */
  requestDriftRevert(): void {
    this.driftRevertWanted = true;
    this.kick();
  }

  private kick(): void {
    if (this.running || this.stopped) return;
    this.running = this.loop().finally(() => {
      this.running = undefined;
      if ((this.pending || this.revertDue()) && !this.stopped) this.kick();
    });
  }

  private revertDue(): boolean {
    return this.driftRevertWanted && !this.retryTimer;
  }

  /** Resolves once nothing is pending or running (tests, `--once`). */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  private async loop(): Promise<void> {
    while (!this.stopped && (this.pending || this.revertDue())) {
      if (!this.pending) {
        this.driftRevertWanted = false;
        await this.runDriftRevert();
        continue;
      }
      const item = this.pending;
      this.pending = undefined;
      this.interrupt = new AbortController();
      const grant = item.kind === 'grant' ? item.g.grant : item.record.grant;
      this.active = keyOf(grant);
      try {
        if (item.kind === 'resume') await this.verifyAndFinish(item.record);
        else await this.process(item.g);
      } catch (error) {
        const e = error as Error;
        this.o.log.warn({ revision: grant.number, ...errorFields(e) }, 'revision failed');
        const reason =
          e.name === 'ApplyError'
            ? 'ApplyFailed'
            : e.name === 'ReplacementNeeded'
              ? 'ReplacementNeeded'
              : e.name === 'InvalidConfigError'
                ? 'InvalidConfig'
                : 'Error';
        this.report(grant, 'Failed', reason, e.message);
        // a state the node cannot take in place, or one oscar's rules refuse: retrying cannot
        // help; wait for another grant
        if (!waitsForNextState(e)) this.retryLater(item);
      } finally {
        this.active = undefined;
      }
    }
  }

  private retryLater(item: Item): void {
    if (this.stopped || this.pending) return;
    const delay = this.retry.next();
    this.o.log.info({ retryInMs: Math.round(delay) }, 'retrying');
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      if (!this.pending) {
        this.pending = item;
        this.kick();
      }
    }, delay);
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

  /** Applies, reporting Applying only if the apply takes a while. */
  private async apply(desired: Desired, grant: Grant): Promise<ApplyResult> {
    this.o.onApplyStart?.(grant);
    const timer = setTimeout(() => {
      this.o.reporter.desired(desired.checksum);
      this.report(grant, 'Applying', 'Applying', `applying revision ${String(grant.number)}`);
    }, this.o.applyingReportAfterMs ?? 3_000);
    try {
      const result = await this.applier.apply(desired);
      this.applied = result.checksum;
      return result;
    } finally {
      clearTimeout(timer);
    }
  }

  private async process({ grant, desired }: GrantedDesired): Promise<void> {
    const { tryState, reporter } = this.o;
    if (grant.osc !== this.following) {
      // Cluster API's in-place update moved this node to another OSC: report it there, so that
      // OSC's rollout counts the node and its old OSC's rollout lets go of it
      this.following = grant.osc;
      reporter.setSource('Grant', { namespace: this.o.scope.namespace, name: grant.osc });
    }
    // before any try starts: a revision oscar's rules refuse is never applied, so never reverted
    checkDesired(desired.config, `revision ${String(grant.number)} (${grant.secretName})`);
    const failed = await tryState.failed();
    if (failed?.checksum === grant.checksum && failed.generation === grant.generation) {
      // tried here before and reverted: say so again (the report may be new), do not retry
      this.report(grant, 'RolledBack', failed.reason, failed.message);
      return;
    }
    let record = await tryState.current();
    if (record && keyOf(record.grant) !== keyOf(grant)) {
      // a try of another grant is open: go back to the confirmed revision first
      await this.revert(
        record,
        'Superseded',
        `revision ${String(grant.number)} was granted instead`,
        false,
      );
      record = undefined;
    }
    if (record?.deadline) {
      await this.verifyAndFinish(record);
      return;
    }
    const last = await this.applier.lastApplied();
    const confirmed = await tryState.confirmed();
    if (!grant.try || !(confirmed ?? last)) {
      await this.applyPlain(grant, desired, grant.try ? 'NoPreviousRevision' : 'Applied');
      return;
    }
    if (confirmed?.checksum === grant.checksum && last?.checksum === grant.checksum) {
      reporter.desired(desired.checksum);
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
    if (!confirmed && last) await tryState.setConfirmed(last.bytes);
    record ??= await tryState.begin(desired, last, grant);
    const t0 = performance.now();
    let result: ApplyResult;
    try {
      result = await this.apply(desired, grant);
    } catch (error) {
      if (error instanceof InvalidConfigError) {
        // refused before anything was touched (a file in this agent's own state directory):
        // nothing to revert, and the revision must not count as applied
        await tryState.end();
        throw error;
      }
      const message = `the apply failed: ${(error as Error).message}`;
      reporter.failed(desired.checksum, error as Error);
      // Its changes are partly on disk: count it applied so the revert undoes all of them.
      await this.applier.markApplied(desired);
      await this.revert(record, 'ApplyFailed', message);
      return;
    }
    const units = await this.watchedUnits(result);
    record = await tryState.applied(record, this.now() + grant.try.deadlineMs, units);
    const ms = performance.now() - t0;
    // issue 25: a Reboot-level revision is verified after the boot (agent/reboot/)
    const rebootFor = await this.o.reboot?.needed(last?.config, desired.config);
    if (rebootFor !== undefined && this.o.reboot) {
      reporter.desired(desired.checksum);
      reporter.applied(result, ms);
      this.report(grant, 'Verifying', 'Rebooting', `rebooting: ${rebootFor}`);
      this.o.log.info({ revision: grant.number, detail: rebootFor }, 'rebooting into the revision');
      await this.o.reboot.reboot(record, 'apply', rebootFor);
      return;
    }
    // in the same tick as the Verifying report, which goes out over fresh connections: one write
    await this.verifyAndFinish(record, () => {
      reporter.desired(desired.checksum);
      reporter.applied(result, ms);
    });
  }

  private async applyPlain(grant: Grant, desired: Desired, reason: string): Promise<void> {
    const t0 = performance.now();
    const result = await this.apply(desired, grant).catch((error: unknown) => {
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

  private async verifyAndFinish(record: TryRecord, alsoReport?: () => void): Promise<void> {
    const grant = record.grant;
    const previous = (await this.o.tryState.confirmed())?.checksum;
    const verdict = await this.verify(record, previous, alsoReport);
    if (verdict.kind === 'interrupted') return; // a newer grant, or stopping: try.json stays
    if (verdict.kind === 'confirmed') {
      const applied = await this.applier.lastApplied();
      if (applied?.checksum === grant.checksum) await this.o.tryState.setConfirmed(applied.bytes);
      await this.o.tryState.end();
      await this.o.reboot?.confirmed(); // issue 25
      this.report(grant, 'Confirmed', 'Healthy', verdict.message);
      this.o.log.info({ revision: grant.number, detail: verdict.message }, 'revision confirmed');
      return;
    }
    await this.revert(record, verdict.reason, verdict.message);
  }

  private verifyingMessage(grant: Grant): string {
    const t = grant.try;
    if (!t) return '';
    const checks = t.checks.map((c) => c.name).join(', ');
    return `checking ${checks || 'units'} for ${String(t.soakMs / 1000)} s and the API server`;
  }

  /**
   * Until the deadline: units and checks healthy for the soak time, and the API server reached
   * over fresh connections (a status write, then the watch delivering it).
   */
  private async verify(
    record: TryRecord,
    previous: string | undefined,
    alsoReport?: () => void,
  ): Promise<Verdict> {
    const policy = record.grant.try;
    if (!policy) return { kind: 'confirmed', message: 'no try policy' };
    const signal = this.interrupt.signal;
    // The connectivity proof: new connections, a status write, the watch seeing it.
    const api = { ok: false };
    // wakes the loop below early: the API proof arrived, or a check finished
    let wake: (() => void) | undefined;
    this.o.resetConnections?.();
    this.o.source.restartWatch();
    const mark = this.o.reporter.mark();
    alsoReport?.();
    this.report(record.grant, 'Verifying', 'Verifying', this.verifyingMessage(record.grant), {
      deadline: record.deadline,
      ...(previous ? { previous } : {}),
    });
    void this.o.reporter
      .writtenAfter(mark)
      .then((rv) => this.o.source.waitForVersion(rv))
      .then(() => {
        api.ok = true;
        wake?.();
      });

    const tick = this.o.tickMs ?? 1000;
    const results = new Map<string, CheckResult>();
    const nextRun = new Map<string, number>();
    const inFlight = new Set<string>();
    const consecutive = new Map<string, number>();
    let healthySince: number | undefined;
    let lastProblem = '';
    for (;;) {
      if (signal.aborted || this.stopped) return { kind: 'interrupted' };
      const now = this.now();
      // checks that are due run in the background; their last result counts
      for (const check of policy.checks) {
        if (inFlight.has(check.name) || (nextRun.get(check.name) ?? 0) > now) continue;
        inFlight.add(check.name);
        nextRun.set(check.name, now + check.periodMs);
        void this.o.health.run(check).then((r) => {
          inFlight.delete(check.name);
          results.set(check.name, r);
          consecutive.set(check.name, r.ok ? 0 : (consecutive.get(check.name) ?? 0) + 1);
          wake?.();
        });
      }
      const problems: string[] = [];
      for (const u of record.units) {
        const state = await this.o.units.state(u.name).catch((e: unknown) => ({
          active: 'unknown',
          sub: (e as Error).message,
          result: '',
          type: '',
          restarts: u.restarts,
        }));
        const v = judgeUnit(u.name, state, u.restarts);
        if (v.fatal) return { kind: 'failed', reason: 'UnitFailed', message: v.message };
        if (!v.ok) problems.push(v.message);
      }
      for (const check of policy.checks) {
        const r = results.get(check.name);
        if (!r) problems.push(`${check.name}: not run yet`);
        else if (!r.ok) {
          const n = consecutive.get(check.name) ?? 0;
          const message = `health check ${check.name}: ${r.message}`;
          if (n >= check.failureThreshold) {
            return {
              kind: 'failed',
              reason: 'HealthCheckFailed',
              message: `${message} (${String(n)} times in a row)`,
            };
          }
          problems.push(message);
        }
      }
      if (problems.length > 0) {
        healthySince = undefined;
        if (!problems.every((p) => p.endsWith('not run yet'))) lastProblem = problems.join('; ');
      } else {
        healthySince ??= now;
      }
      if (healthySince !== undefined && now - healthySince >= policy.soakMs && api.ok) {
        return {
          kind: 'confirmed',
          message: `healthy for ${String(Math.round((now - healthySince) / 1000))} s${policy.checks.length > 0 ? ` (${policy.checks.map((c) => c.name).join(', ')})` : ''}; the API server answered over fresh connections`,
        };
      }
      if (now >= record.deadline) {
        if (lastProblem !== '' && healthySince === undefined) {
          return {
            kind: 'failed',
            reason: lastProblem.includes('health check') ? 'HealthCheckFailed' : 'UnitUnhealthy',
            message: `not healthy by the deadline: ${lastProblem}`,
          };
        }
        if (!api.ok) {
          return {
            kind: 'failed',
            reason: 'APIUnreachable',
            message:
              'the API server could not be reached under the new revision (no status write and watch event over fresh connections by the deadline)',
          };
        }
        return {
          kind: 'failed',
          reason: 'SoakIncomplete',
          message: `not healthy for ${String(policy.soakMs / 1000)} s by the deadline${lastProblem ? `: ${lastProblem}` : ''}`,
        };
      }
      // sleep until the next thing that can change the verdict: a tick, the soak's end, the
      // deadline, a check's result or the API proof — a node confirms as soon as it may
      const soakEnds = healthySince === undefined ? Infinity : healthySince + policy.soakMs - now;
      const soakLeft = soakEnds > 0 ? soakEnds : Infinity; // soaked: only the API proof is awaited
      const sleep = Math.max(0, Math.min(tick, soakLeft, record.deadline - now));
      await new Promise<void>((r) => {
        const done = (): void => {
          clearTimeout(t);
          signal.removeEventListener('abort', done);
          wake = undefined;
          r();
        };
        const t = setTimeout(done, sleep);
        wake = done;
        signal.addEventListener('abort', done);
      });
    }
  }

  /**
   * Goes back to the last confirmed revision: applied through the planner and journal (files,
   * units, restarts), then the files the try replaced put back. Retried until it succeeds: a
   * node must not stay on a revision that failed.
   */
  private async revert(
    record: TryRecord,
    reason: string,
    message: string,
    reportIt = true,
  ): Promise<void> {
    const grant = record.grant;
    const target = await this.o.tryState.confirmed();
    this.o.log.warn({ revision: grant.number, reason, detail: message }, 'reverting the revision');
    let failures = 0;
    for (;;) {
      try {
        if (target) {
          const t0 = performance.now();
          const result = await this.applier.apply(target);
          this.applied = result.checksum;
          this.o.reporter.applied(result, performance.now() - t0);
        }
        await this.o.tryState.restoreBackups(record, this.o.owners);
        break;
      } catch (error) {
        failures++;
        const e = error as Error;
        this.o.log.error(
          { revision: grant.number, ...errorFields(e) },
          'reverting the revision failed',
        );
        this.o.reporter.failed(target?.checksum ?? grant.checksum, e);
        this.report(
          grant,
          'Failed',
          'RollbackFailed',
          `${message}; the rollback failed: ${e.message}`,
        );
        if (this.stopped) return;
        const delay = Math.min(60_000, 1000 * 2 ** (failures - 1));
        await new Promise((r) => setTimeout(r, delay));
      }
    }
    await this.o.tryState.end();
    await this.o.tryState.setFailed({
      checksum: grant.checksum,
      generation: grant.generation,
      reason,
      message,
    });
    if (reportIt) {
      this.report(
        grant,
        'RolledBack',
        reason,
        message,
        target ? { previous: target.checksum } : {},
      );
    }
    // issue 25: rebooted into the revision, so its old state needs a boot too
    if (await this.o.reboot?.afterRevert(record)) {
      this.o.log.warn({ revision: grant.number }, 'rebooting into the previous revision');
    }
  }

  /** A revert of drift, unless a try is still open (its verdict decides what stays). */
  private async runDriftRevert(): Promise<void> {
    // a try's verdict decides what stays: no revert of drift under an open try
    if (await this.o.tryState.current()) return;
    await revertThrough(this.applier, this.o.reporter);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.interrupt.abort();
    await this.o.source.stop();
    await this.idle();
    await this.o.drift?.stop();
  }
}
