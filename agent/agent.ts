/**
 * The agent's loop: the source delivers desired states; the newest one is applied (one apply at a
 * time — a newer state that arrives meanwhile is applied next, the ones in between are skipped);
 * a failed apply is retried with exponential backoff and jitter, resuming its journal, except
 * one that needs a new machine (ReplacementNeeded) or breaks oscar's rules (InvalidConfigError),
 * which waits for the next state; every outcome goes to the reporter. The drift monitor
 * (agent/drift/) is told before and after every apply, and asks for reverts, which run in this
 * same loop when no other apply is due.
 */
import { ApplyError, type ApplyDeps, type ApplyResult } from './apply.js';
import { errorFields, shortChecksum, type Logger } from '../log/logger.js';
import { nodeApplier, withDrift, type Applier } from './applier.js';
import {
  applyLog,
  fanOut,
  revertThrough,
  RetryPolicy,
  waitsForNextState,
  type Reporter,
} from './loop.js';
import type { DriftHooks } from './model/drift.js';
import { formatPlan } from './model/actions.js';
import type { Source } from './source.js';
import type { Desired } from './state.js';

export type { Reporter } from './loop.js';

export interface AgentOptions {
  source: Source;
  deps: ApplyDeps;
  reporters: Reporter[];
  log: Logger;
  /** Print each plan before running it. */
  printPlan?: boolean;
  retryBaseMs?: number;
  retryMaxMs?: number;
  /** The drift monitor; without it nothing watches for drift (told around every apply). */
  drift?: DriftHooks;
}

export class Agent {
  private latest: Desired | undefined;
  private appliedChecksum: string | undefined;
  private running: Promise<void> | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private readonly retry: RetryPolicy;
  private readonly report: ReturnType<typeof fanOut>;
  private stopped = false;
  /** Drift asked for a revert. */
  private revertWanted = false;
  /** A state refused as ReplacementNeeded: not retried until it is delivered again. */
  private refused: string | undefined;
  /** The last failure (apply or source); cleared by a successful apply. */
  lastError: Error | undefined;

  constructor(private readonly opts: AgentOptions) {
    this.retry = new RetryPolicy(opts);
    this.report = fanOut(opts.reporters);
  }

  /** The applier for one apply or revert: its log lines carry `fields`; drift is told around it. */
  private applier(fields: Record<string, unknown>): Applier {
    const inner = nodeApplier(
      { ...this.opts.deps, log: applyLog(this.opts.log, fields) },
      this.opts.log,
    );
    return this.opts.drift ? withDrift(inner, this.opts.drift) : inner;
  }

  async start(): Promise<void> {
    const last = await nodeApplier(this.opts.deps).lastApplied();
    this.appliedChecksum = last?.checksum;
    if (this.appliedChecksum !== undefined) this.report.restored(this.appliedChecksum);
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
        this.report.sourceFailed(e);
      },
    });
  }

  want(desired: Desired): void {
    this.latest = desired;
    this.refused = undefined;
    this.report.desired(desired.checksum);
    this.retry.reset();
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
        await revertThrough(this.applier({ trigger: 'revert' }), this.report);
      } else {
        return;
      }
    }
  }

  /** One apply of `desired`; false when the loop must wait (a retry, a refused state). */
  private async apply(desired: Desired): Promise<boolean> {
    const checksum = shortChecksum(desired.checksum);
    const t0 = performance.now();
    try {
      const result = await this.applier({ checksum }).apply(desired);
      if (this.opts.printPlan === true)
        this.opts.log.info({ checksum, plan: formatPlan(result.actions) }, 'plan applied');
      this.appliedChecksum = desired.checksum;
      this.lastError = undefined;
      this.retry.reset();
      this.revertWanted = false; // the apply repaired what a revert would have
      this.report.applied(result, performance.now() - t0);
      return true;
    } catch (error) {
      const e = error as Error;
      this.lastError = e;
      this.report.failed(desired.checksum, e);
      if (this.latest !== desired) return true; // a newer state arrived while this one failed
      if (waitsForNextState(e)) {
        this.refused = desired.checksum;
        return false;
      }
      this.retryLater(checksum);
      return false;
    }
  }

  private retryLater(checksum: string): void {
    const delay = this.retry.next();
    this.opts.log.info(
      { checksum, retryInMs: Math.round(delay), failures: this.retry.count },
      'apply will be retried',
    );
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      this.kick();
    }, delay);
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
