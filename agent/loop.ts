/**
 * The agent loop's contracts, said once (agent/agent.ts runs them for every mode): one reporter
 * contract, one retry policy, one rule for a state that must wait for the next one, one way to
 * revert drift.
 */
import type { Logger } from '../log/logger.js';
import { InvalidConfigError } from '../api/validate-config.js';
import { ReplacementNeeded, type ApplyError, type ApplyResult } from './apply.js';
import type { DriftReport } from './model/drift.js';

/** Where a loop's outcomes go: logs, metrics, the node's status. */
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
  /** The source answers again after `error` (agent/rollout/grant-source.ts). */
  sourceRecovered?(error: Error): void;
  /** What drifted changed (agent/drift/monitor.ts). */
  drift?(report: DriftReport): void;
  /** A revert of drift ran. */
  reverted?(result: ApplyResult, durationMs: number): void;
  revertFailed?(error: Error): void;
  /** Waits until what was reported reached its destination (before exit). */
  flush?(): Promise<void>;
}

/** Many reporters as one: each is told everything, in order. */
export function fanOut(reporters: readonly Reporter[]): Required<Omit<Reporter, 'flush'>> & {
  flush(): Promise<void>;
} {
  return {
    restored: (c) => {
      for (const r of reporters) r.restored?.(c);
    },
    desired: (c) => {
      for (const r of reporters) r.desired(c);
    },
    applied: (result, ms) => {
      for (const r of reporters) r.applied(result, ms);
    },
    failed: (c, e) => {
      for (const r of reporters) r.failed(c, e);
    },
    sourceFailed: (e) => {
      for (const r of reporters) r.sourceFailed(e);
    },
    sourceRecovered: (e) => {
      for (const r of reporters) r.sourceRecovered?.(e);
    },
    drift: (report) => {
      for (const r of reporters) r.drift?.(report);
    },
    reverted: (result, ms) => {
      for (const r of reporters) r.reverted?.(result, ms);
    },
    revertFailed: (e) => {
      for (const r of reporters) r.revertFailed?.(e);
    },
    flush: async () => {
      for (const r of reporters) await r.flush?.();
    },
  };
}

/**
 * The invalid-state rule: a state the node cannot take in place (ReplacementNeeded) or one
 * oscar's rules refuse (InvalidConfigError) was refused before anything was touched, and
 * retrying cannot help — the loop waits for the next state.
 */
export function waitsForNextState(error: unknown): boolean {
  return error instanceof ReplacementNeeded || error instanceof InvalidConfigError;
}

export interface RetryOptions {
  retryBaseMs?: number;
  retryMaxMs?: number;
}

/**
 * The retry policy of a failed apply: exponential backoff from base (2 s) to max (5 min), with
 * jitter (half to all of the step) so a fleet that failed together does not retry together.
 */
export class RetryPolicy {
  private failures = 0;
  constructor(private readonly o: RetryOptions = {}) {}

  /** Failures since the last reset. */
  get count(): number {
    return this.failures;
  }

  /** One more failure: how long to wait before the next try. */
  next(random: () => number = Math.random): number {
    this.failures++;
    const base = this.o.retryBaseMs ?? 2_000;
    const max = this.o.retryMaxMs ?? 5 * 60_000;
    return Math.min(max, base * 2 ** (this.failures - 1)) * (0.5 + random() / 2);
  }

  reset(): void {
    this.failures = 0;
  }
}

/** A revert of drift through the applier, its outcome told to the reporter. */
export async function revertThrough(
  applier: { revertDrift?(): Promise<ApplyResult | undefined> },
  reporter: Pick<Reporter, 'reverted' | 'revertFailed'>,
): Promise<void> {
  if (!applier.revertDrift) return;
  const t0 = performance.now();
  try {
    const result = await applier.revertDrift();
    if (result) reporter.reverted?.(result, performance.now() - t0);
  } catch (error) {
    reporter.revertFailed?.(error as Error);
  }
}

/** An apply's log callback that carries the state's fields on every line. */
export function applyLog(log: Logger, fields: Record<string, unknown>): (message: string) => void {
  return (message) => {
    log.info(fields, message);
  };
}
