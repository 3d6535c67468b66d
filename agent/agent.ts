/**
 * The agent's loop: the source delivers desired states; the newest one is applied (one apply at a
 * time — a newer state that arrives meanwhile is applied next, the ones in between are skipped);
 * a failed apply is retried with exponential backoff and jitter, resuming its journal, except
 * one that needs a new machine (ReplacementNeeded), which waits for the next state; every outcome
 * goes to the reporter.
 */
import {
  applyDesired,
  ApplyError,
  ReplacementNeeded,
  type ApplyDeps,
  type ApplyResult,
} from './apply.js';
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
  log: (message: string) => void;
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
        this.opts.log(`source ${this.opts.source.description}: ${e.message}`);
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
      const t0 = performance.now();
      try {
        const result = await applyDesired(
          {
            ...this.opts.deps,
            log: this.opts.log,
          },
          desired,
        );
        if (this.opts.printPlan === true)
          this.opts.log(`applied ${desired.checksum.slice(0, 12)}:\n${formatPlan(result.actions)}`);
        this.appliedChecksum = desired.checksum;
        this.lastError = undefined;
        this.failures = 0;
        for (const r of this.opts.reporters) r.applied(result, performance.now() - t0);
      } catch (error) {
        const e = error as Error;
        this.lastError = e;
        this.opts.log(`apply of ${desired.checksum.slice(0, 12)} failed: ${e.message}`);
        for (const r of this.opts.reporters) r.failed(desired.checksum, e);
        if (this.latest !== desired) continue; // a newer state arrived while this one failed
        if (e instanceof ReplacementNeeded) return; // retrying cannot help: wait for a new state
        this.failures++;
        const base = this.opts.retryBaseMs ?? 2_000;
        const max = this.opts.retryMaxMs ?? 5 * 60_000;
        const delay = Math.min(max, base * 2 ** (this.failures - 1)) * (0.5 + Math.random() / 2);
        this.opts.log(`retrying in ${(delay / 1000).toFixed(1)} s`);
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

/** A reporter that writes outcomes to a log function (always on; the kube reporter adds to it). */
export function logReporter(log: (message: string) => void): Reporter {
  return {
    restored: (checksum) => {
      log(`last applied ${checksum.slice(0, 12)} (from the state directory)`);
    },
    desired: (checksum) => {
      log(`desired ${checksum.slice(0, 12)}`);
    },
    applied: (result, ms) => {
      const units = result.touchedUnits.map((u) => `${u.action} ${u.name}`).join(', ');
      log(
        `applied ${result.checksum.slice(0, 12)} in ${ms.toFixed(0)} ms: ${result.actions.length} action(s)${result.resumed ? ' (resumed)' : ''}${units ? `; ${units}` : ''}`,
      );
    },
    failed: (checksum, error) => {
      const lines =
        error instanceof ApplyError && error.journal.length > 0
          ? `\n  ${error.journal.join('\n  ')}`
          : '';
      log(`FAILED ${checksum.slice(0, 12)}: ${error.message}${lines}`);
    },
    sourceFailed: () => undefined, // the agent already logs source errors
  };
}
