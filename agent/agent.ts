/**
 * The agent's loop: the source delivers desired states; the newest one is applied (one apply at a
 * time — a newer state that arrives meanwhile is applied next, the ones in between are skipped);
 * a failed apply is retried with exponential backoff and jitter, resuming its journal, except
 * one that needs a new machine (ReplacementNeeded) or breaks oscar's rules (InvalidConfigError),
 * which waits for the next state; every outcome goes to the reporter.
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
import { formatPlan } from './plan.js';
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
}

export class Agent {
  private latest: Desired | undefined;
  private appliedChecksum: string | undefined;
  private running: Promise<void> | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private failures = 0;
  private stopped = false;
  /** The last failure (apply or source); cleared by a successful apply. */
  lastError: Error | undefined;

  constructor(private readonly opts: AgentOptions) {}

  async start(): Promise<void> {
    this.appliedChecksum = (await readLastApplied(this.opts.deps.stateDir))?.checksum;
    if (this.appliedChecksum !== undefined) {
      for (const r of this.opts.reporters) r.restored?.(this.appliedChecksum);
    }
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
    for (const r of this.opts.reporters) r.desired(desired.checksum);
    this.failures = 0;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
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
    while (!this.stopped && this.latest && this.latest.checksum !== this.appliedChecksum) {
      const desired = this.latest;
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
        for (const r of this.opts.reporters) r.applied(result, performance.now() - t0);
      } catch (error) {
        const e = error as Error;
        this.lastError = e;
        for (const r of this.opts.reporters) r.failed(desired.checksum, e);
        if (this.latest !== desired) continue; // a newer state arrived while this one failed
        // retrying cannot help: wait for a new state
        if (e instanceof ReplacementNeeded || e instanceof InvalidConfigError) return;
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
        return;
      }
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    await this.opts.source.stop();
    await this.idle();
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
      log.info(
        {
          checksum: shortChecksum(result.checksum),
          durationMs: Math.round(ms),
          actions: result.actions.length,
          resumed: result.resumed,
          units: result.touchedUnits.map((u) => `${u.action} ${u.name}`),
        },
        'applied',
      );
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
    sourceFailed: () => undefined, // the agent already logs source errors
  };
}
