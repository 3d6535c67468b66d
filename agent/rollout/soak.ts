/**
 * The try's soak: until the deadline, every unit the apply started or restarted stays healthy and
 * every health check passes for the soak time, and the API server is reached over fresh
 * connections (a status write, then the watch delivering it). Each turn of the soak is one set of
 * named steps: run the checks that are due, judge the units, judge the checks, decide, sleep until
 * the next thing that can change the verdict — so a node confirms as soon as it may.
 */
import type { Check, TryPolicy } from './grant.js';
import { judgeUnit, type CheckResult, type HealthProbe, type UnitProbe } from './health.js';
import type { TryRecord } from './try-state.js';

export type Verdict =
  | { kind: 'confirmed'; message: string }
  | { kind: 'failed'; reason: string; message: string }
  | { kind: 'interrupted' };

/**
 * A step between a tried revision's apply and its verdict (the soak is the last): 'confirmed'
 * lets the next step run; 'failed' rolls the try back; 'interrupted' leaves it open (try.json
 * stays: a reboot step ends the boot, and the try is verified on after it).
 */
export type VerifyStep = (
  record: TryRecord,
  signal: AbortSignal,
  ctx: VerifyStepContext,
) => Promise<Verdict>;

/** What a verify step may do besides judging. */
export interface VerifyStepContext {
  /** Reports the revision Verifying with this reason and message (the apply's report with it). */
  report(reason: string, message: string): void;
}

export interface SoakDeps {
  health: HealthProbe;
  units: UnitProbe;
  /**
   * Starts the connectivity proof (drop connections, reopen the watch, report Verifying) and
   * resolves once a status write came back through the watch.
   */
  proveApi: () => Promise<void>;
  tickMs: number;
  now: () => number;
}

/** Problems found in one turn, or the verdict that ends the soak at once. */
type Judgement = { problems: string[] } | { verdict: Verdict };

export class Soak {
  private readonly results = new Map<string, CheckResult>();
  private readonly nextRun = new Map<string, number>();
  private readonly inFlight = new Set<string>();
  private readonly consecutive = new Map<string, number>();
  private healthySince: number | undefined;
  private lastProblem = '';
  private apiOk = false;
  /** Wakes the sleep early: the API proof arrived, or a check finished. */
  private wake: (() => void) | undefined;

  constructor(
    private readonly record: TryRecord,
    private readonly policy: TryPolicy,
    private readonly d: SoakDeps,
    private readonly signal: AbortSignal,
  ) {}

  async run(): Promise<Verdict> {
    void this.d.proveApi().then(() => {
      this.apiOk = true;
      this.wake?.();
    });
    for (;;) {
      if (this.signal.aborted) return { kind: 'interrupted' };
      const now = this.d.now();
      this.runDueChecks(now);
      const units = await this.judgeUnits();
      if ('verdict' in units) return units.verdict;
      const checks = this.judgeChecks();
      if ('verdict' in checks) return checks.verdict;
      const verdict = this.decide(now, [...units.problems, ...checks.problems]);
      if (verdict) return verdict;
      await this.sleep(now);
    }
  }

  /** Checks that are due run in the background; their last result counts. */
  private runDueChecks(now: number): void {
    for (const check of this.policy.checks) {
      if (this.inFlight.has(check.name) || (this.nextRun.get(check.name) ?? 0) > now) continue;
      this.inFlight.add(check.name);
      this.nextRun.set(check.name, now + check.periodMs);
      void this.d.health.run(check).then((r) => {
        this.checked(check, r);
      });
    }
  }

  private checked(check: Check, r: CheckResult): void {
    this.inFlight.delete(check.name);
    this.results.set(check.name, r);
    this.consecutive.set(check.name, r.ok ? 0 : (this.consecutive.get(check.name) ?? 0) + 1);
    this.wake?.();
  }

  /** A unit systemd gave up on fails the try at once. */
  private async judgeUnits(): Promise<Judgement> {
    const problems: string[] = [];
    for (const u of this.record.units) {
      const state = await this.d.units.state(u.name).catch((e: unknown) => ({
        active: 'unknown',
        sub: (e as Error).message,
        result: '',
        type: '',
        restarts: u.restarts,
      }));
      const v = judgeUnit(u.name, state, u.restarts);
      if (v.fatal) return { verdict: { kind: 'failed', reason: 'UnitFailed', message: v.message } };
      if (!v.ok) problems.push(v.message);
    }
    return { problems };
  }

  /** A check failing failureThreshold times in a row fails the try at once. */
  private judgeChecks(): Judgement {
    const problems: string[] = [];
    for (const check of this.policy.checks) {
      const r = this.results.get(check.name);
      if (!r) {
        problems.push(`${check.name}: not run yet`);
        continue;
      }
      if (r.ok) continue;
      const n = this.consecutive.get(check.name) ?? 0;
      const message = `health check ${check.name}: ${r.message}`;
      if (n >= check.failureThreshold) {
        const verdict: Verdict = {
          kind: 'failed',
          reason: 'HealthCheckFailed',
          message: `${message} (${String(n)} times in a row)`,
        };
        return { verdict };
      }
      problems.push(message);
    }
    return { problems };
  }

  /** Confirmed once healthy for the soak time with the API proven; failed at the deadline. */
  private decide(now: number, problems: string[]): Verdict | undefined {
    if (problems.length > 0) {
      this.healthySince = undefined;
      if (!problems.every((p) => p.endsWith('not run yet'))) this.lastProblem = problems.join('; ');
    } else {
      this.healthySince ??= now;
    }
    const since = this.healthySince;
    if (since !== undefined && now - since >= this.policy.soakMs && this.apiOk) {
      const checks = this.policy.checks.map((c) => c.name).join(', ');
      return {
        kind: 'confirmed',
        message: `healthy for ${String(Math.round((now - since) / 1000))} s${checks ? ` (${checks})` : ''}; the API server answered over fresh connections`,
      };
    }
    return now >= this.record.deadline ? this.atDeadline() : undefined;
  }

  private atDeadline(): Verdict {
    const lastProblem = this.lastProblem;
    if (lastProblem !== '' && this.healthySince === undefined) {
      return {
        kind: 'failed',
        reason: lastProblem.includes('health check') ? 'HealthCheckFailed' : 'UnitUnhealthy',
        message: `not healthy by the deadline: ${lastProblem}`,
      };
    }
    if (!this.apiOk) {
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
      message: `not healthy for ${String(this.policy.soakMs / 1000)} s by the deadline${lastProblem ? `: ${lastProblem}` : ''}`,
    };
  }

  /** Until a tick, the soak's end, the deadline, a check's result or the API proof. */
  private async sleep(now: number): Promise<void> {
    const since = this.healthySince;
    const soakEnds = since === undefined ? Infinity : since + this.policy.soakMs - now;
    const soakLeft = soakEnds > 0 ? soakEnds : Infinity; // soaked: only the API proof is awaited
    const ms = Math.max(0, Math.min(this.d.tickMs, soakLeft, this.record.deadline - now));
    const signal = this.signal;
    await new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(t);
        signal.removeEventListener('abort', done);
        this.wake = undefined;
        resolve();
      };
      const t = setTimeout(done, ms);
      this.wake = done;
      signal.addEventListener('abort', done);
    });
  }
}
