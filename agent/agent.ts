/**
 * The agent's loop: the source delivers desired states; the newest one is applied (one apply at a
 * time — a newer state that arrives meanwhile is applied next, the ones in between are skipped);
 * a failed apply is retried with exponential backoff and jitter, resuming its journal, except
 * one that needs a new machine (ReplacementNeeded) or breaks oscar's rules (InvalidConfigError),
 * which waits for the next state; every outcome goes to the reporter. The drift monitor
 * (agent/drift/) is told before and after every apply, and asks for reverts, which run in this
 * same loop when no other apply is due.
 */
import {
  applyDesired,
  ApplyError,
  ReplacementNeeded,
  type ApplyDeps,
  type ApplyResult,
} from './apply.js';
import { errorFields, shortChecksum, type Logger } from '../log/logger.js';
import { InvalidConfigError } from '../api/validate-config.js';
import type { DriftHooks, DriftReport } from './model/drift.js';
import { revertDrift } from './revert.js';
import { formatPlan } from './model/actions.js';
import type { Source } from './source.js';
import type { Desired } from './state.js';
import { readLastApplied } from './state.js';

export interface Reporter {
  /**
   * At start: the node already carries this state (the last-applied record on disk). A desired
   * state equal to it is not applied again, so without this a reporter that restarted with the
   * agent would never learn what is applied.
   */
  restored?(checksum: string): void;
  /** A desired state arrived (before it is applied). */
  desired(checksum: string): void;
  applied(result: ApplyResult, durationMs: number): void;
  failed(checksum: string, error: ApplyError | Error): void;
  /** The source could not deliver (bad file, corrupted Secret): the last good state stays. */
  sourceFailed(error: Error): void;
  /** What drifted changed (agent/drift/monitor.ts). */
  drift?(report: DriftReport): void;
  /** A revert of drift ran. */
  reverted?(result: ApplyResult, durationMs: number): void;
  revertFailed?(error: Error): void;
  /** Waits until what was reported reached its destination (before exit). */
  flush?(): Promise<void>;
}

export interface AgentOptions {
  source: Source;
  deps: ApplyDeps;
  reporters: Reporter[];
  log: Logger;
  /** Print each plan before running it. */
  printPlan?: boolean;
  retryBaseMs?: number;
  retryMaxMs?: number;
  /** The drift monitor; without it nothing watches for drift. */
  drift?: DriftHooks;
}

export class Agent {
  private latest: Desired | undefined;
  private appliedChecksum: string | undefined;
  private running: Promise<void> | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private failures = 0;
  private stopped = false;
  /** Drift asked for a revert. */
  private revertWanted = false;
  /** A state refused as ReplacementNeeded: not retried until it is delivered again. */
  private refused: string | undefined;
  /** The last failure (apply or source); cleared by a successful apply. */
  lastError: Error | undefined;

  constructor(private readonly opts: AgentOptions) {}

  async start(): Promise<void> {
    const last = await readLastApplied(this.opts.deps.stateDir);
    this.appliedChecksum = last?.checksum;
    if (this.appliedChecksum !== undefined) {
      for (const r of this.opts.reporters) r.restored?.(this.appliedChecksum);
    }
    // before the source: what changed while the agent was down is found against what it applied
    await this.opts.drift?.start(last?.config);
    await this.opts.source.start({
      onDesired: (d) => {
        this.want(d);
      },
      onError: (e) => {
        this.lastError = e;
        this.opts.log.warn(
          { source: this.opts.source.description, ...errorFields(e) },
          'source failed; the last good state stays',
        );
        for (const r of this.opts.reporters) r.sourceFailed(e);
      },
    });
  }

  want(desired: Desired): void {
    this.latest = desired;
    this.refused = undefined;
    for (const r of this.opts.reporters) r.desired(desired.checksum);
    this.failures = 0;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    this.kick();
  }

  /**
   * Drift asks for a revert. It runs when no other apply is due: an apply of a new state, or its
   * retry, repairs Revert drift anyway — a revert then would undo half of the new state.
   */
  revert(): void {
    this.revertWanted = true;
    this.kick();
  }

  /** Resolves once the latest desired state was applied or failed (for `--once` and tests). */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  get applied(): string | undefined {
    return this.appliedChecksum;
  }

  private kick(): void {
    if (this.running || this.stopped) return;
    this.running = this.loop().finally(() => {
      this.running = undefined;
    });
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      const desired = this.latest;
      if (this.retryTimer) return; // a failed apply waits for its retry, reverts with it
      if (
        desired &&
        desired.checksum !== this.appliedChecksum &&
        desired.checksum !== this.refused
      ) {
        if (!(await this.apply(desired))) return;
      } else if (this.revertWanted) {
        this.revertWanted = false;
        await this.revertDrift();
      } else {
        return;
      }
    }
  }

  /** One apply of `desired`; false when the loop must wait (a retry, a refused state). */
  private async apply(desired: Desired): Promise<boolean> {
    await this.opts.drift?.beforeApply('apply'); // its audit has its own metric
    const checksum = shortChecksum(desired.checksum);
    const t0 = performance.now();
    try {
      const result = await applyDesired(
        {
          ...this.opts.deps,
          log: (message) => {
            this.opts.log.info({ checksum }, message);
          },
        },
        desired,
      );
      if (this.opts.printPlan === true)
        this.opts.log.info({ checksum, plan: formatPlan(result.actions) }, 'plan applied');
      this.appliedChecksum = desired.checksum;
      this.lastError = undefined;
      this.failures = 0;
      this.revertWanted = false; // the apply repaired what a revert would have
      for (const r of this.opts.reporters) r.applied(result, performance.now() - t0);
      this.opts.drift?.afterApply({ applied: desired.config });
      return true;
    } catch (error) {
      const e = error as Error;
      this.lastError = e;
      for (const r of this.opts.reporters) r.failed(desired.checksum, e);
      // retrying cannot help either: nothing was touched, wait for a new state
      const refused = e instanceof ReplacementNeeded || e instanceof InvalidConfigError;
      this.opts.drift?.afterApply(refused ? { unchanged: true } : { failed: desired.config });
      if (this.latest !== desired) return true; // a newer state arrived while this one failed
      if (refused) {
        this.refused = desired.checksum;
        return false;
      }
      this.failures++;
      const base = this.opts.retryBaseMs ?? 2_000;
      const max = this.opts.retryMaxMs ?? 5 * 60_000;
      const delay = Math.min(max, base * 2 ** (this.failures - 1)) * (0.5 + Math.random() / 2);
      this.opts.log.info(
        { checksum, retryInMs: Math.round(delay), failures: this.failures },
        'apply will be retried',
      );
      this.retryTimer = setTimeout(() => {
        this.retryTimer = undefined;
        this.kick();
      }, delay);
      return false;
    }
  }

  private async revertDrift(): Promise<void> {
    await this.opts.drift?.beforeApply('revert');
    const t0 = performance.now();
    try {
      const log = this.opts.log;
      const result = await revertDrift(
        {
          ...this.opts.deps,
          log: (message) => {
            log.info({ trigger: 'revert' }, message);
          },
        },
        log,
      );
      if (result) for (const r of this.opts.reporters) r.reverted?.(result, performance.now() - t0);
    } catch (error) {
      const e = error as Error;
      for (const r of this.opts.reporters) r.revertFailed?.(e);
    } finally {
      this.opts.drift?.afterApply({ unchanged: true, revert: true });
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    await this.opts.source.stop();
    await this.idle();
    await this.opts.drift?.stop();
  }
}

/**
 * A reporter that logs every outcome (always on; the kube reporter adds to it). Its messages are
 * fixed words and its facts fields (docs/operations.md), so `msg=applied` finds every apply.
 */
export function logReporter(log: Logger): Reporter {
  return {
    restored: (checksum) => {
      log.info({ checksum: shortChecksum(checksum) }, 'restored from the state directory');
    },
    desired: (checksum) => {
      log.info({ checksum: shortChecksum(checksum) }, 'desired');
    },
    applied: (result, ms) => {
      log.info(applyFields(result, ms), 'applied');
    },
    failed: (checksum, error) => {
      log.error(
        {
          checksum: shortChecksum(checksum),
          ...errorFields(error),
          ...(error instanceof ApplyError && error.unit !== undefined ? { unit: error.unit } : {}),
          ...(error instanceof ApplyError && error.journal.length > 0
            ? { journal: error.journal }
            : {}),
        },
        'apply failed; the last good state stays',
      );
    },
    sourceFailed: () => undefined, // the agent already logs source errors (and the monitor drift)
    reverted: (result, ms) => {
      log.info(applyFields(result, ms), 'drift reverted');
    },
    revertFailed: (error) => {
      log.error(
        {
          ...errorFields(error),
          ...(error instanceof ApplyError && error.unit !== undefined ? { unit: error.unit } : {}),
          ...(error instanceof ApplyError && error.journal.length > 0
            ? { journal: error.journal }
            : {}),
        },
        'drift revert failed',
      );
    },
  };
}

/** An apply's (or a revert's) log fields: what it did, how long it took, which units it touched. */
function applyFields(result: ApplyResult, ms: number): Record<string, unknown> {
  return {
    checksum: shortChecksum(result.checksum),
    durationMs: Math.round(ms),
    actions: result.actions.length,
    resumed: result.resumed,
    units: result.touchedUnits.map((u) => `${u.action} ${u.name}`),
  };
}
