/**
 * Bounded shutdown for the long-running commands (controller, agent, renderer server, up): the
 * first SIGTERM or SIGINT runs the command's own stop — finish the work in flight, hand back
 * what others wait for (the Lease, the node's last report) — within a time budget; whatever that
 * stop is waiting on (an API server that does not answer, a unit job that hangs), the process
 * ends when the budget is spent. A second signal ends it at once. Work cut off at the deadline is
 * safe to cut: the agent journals each action and resumes on its next start; a reconcile is
 * redone by the next controller.
 */
import type { Logger } from '../../log/logger.js';

/** What a stop may spend: the deadline, and bounded waits against it. */
export class Deadline {
  readonly at: number;

  constructor(
    budgetMs: number,
    private readonly now: () => number = Date.now,
  ) {
    this.at = now() + budgetMs;
  }

  remainingMs(): number {
    return Math.max(0, this.at - this.now());
  }

  /**
   * Waits for `work` until `reserveMs` before the deadline (left for what comes after it);
   * true when it finished, false when the time ran out first. A rejection counts as finished.
   */
  async within(work: Promise<unknown>, reserveMs = 0): Promise<boolean> {
    const ms = Math.max(0, this.remainingMs() - reserveMs);
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<false>((resolve) => {
      timer = setTimeout(() => {
        resolve(false);
      }, ms);
    });
    try {
      return await Promise.race([
        work.then(
          () => true,
          () => true,
        ),
        timedOut,
      ]);
    } finally {
      clearTimeout(timer);
    }
  }
}

/** How much of a budget is kept for the last steps (reports, the Lease): 2 s, or a quarter. */
export function reserveFor(budgetMs: number): number {
  return Math.min(2_000, Math.floor(budgetMs / 4));
}

export interface SignalOptions {
  log: Logger;
  /** The whole budget from the first signal to the end of the process. */
  timeoutMs: number;
  /** Test seams. */
  exit?: (code: number) => void;
  signals?: NodeJS.EventEmitter;
}

const SIGNAL_NUMBERS: Record<string, number> = { SIGINT: 2, SIGTERM: 15 };

/**
 * Runs `stop` on the first SIGTERM or SIGINT and exits with the code it returns (0 when it
 * returns no number); exits 1 when the budget is spent first, and 128 + the
 * signal's number on a second signal. Returns a function that removes the handlers.
 */
export function onShutdownSignal(
  stop: (signal: NodeJS.Signals, deadline: Deadline) => Promise<unknown>,
  options: SignalOptions,
): () => void {
  const { log, timeoutMs } = options;
  const exit =
    options.exit ??
    ((code: number): void => {
      process.exit(code);
    });
  const emitter = options.signals ?? process;
  let stopping = false;
  const handler = (signal: NodeJS.Signals): void => {
    if (stopping) {
      log.warn({ signal }, 'second signal: exiting now');
      exit(128 + (SIGNAL_NUMBERS[signal] ?? 0));
      return;
    }
    stopping = true;
    log.info({ signal, timeoutMs }, 'stopping');
    // the stop's own deadline comes a little before the watchdog's, for the exit itself
    const deadline = new Deadline(timeoutMs - Math.min(500, Math.floor(timeoutMs / 10)));
    const watchdog = setTimeout(() => {
      log.error({ timeoutMs }, 'did not stop within the shutdown timeout; exiting');
      exit(1);
    }, timeoutMs);
    watchdog.unref();
    stop(signal, deadline).then(
      (code) => {
        clearTimeout(watchdog);
        log.info('stopped');
        exit(typeof code === 'number' ? code : 0);
      },
      (error: unknown) => {
        clearTimeout(watchdog);
        log.error({ err: (error as Error).message }, 'stopping failed');
        exit(1);
      },
    );
  };
  emitter.on('SIGTERM', handler);
  emitter.on('SIGINT', handler);
  return () => {
    emitter.off('SIGTERM', handler);
    emitter.off('SIGINT', handler);
  };
}

/** "15s", "500ms", "1m", or a bare number of seconds → milliseconds; the message names the fix. */
export function parseDuration(value: string, flag: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(value.trim());
  if (!m?.[1])
    throw new Error(`${flag}: "${value}" is not a duration; write e.g. 15s, 500ms, 20m or 1h`);
  const n = Number(m[1]);
  const unit = m[2] ?? 's';
  const perUnit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[unit] ?? 1000;
  return n * perUnit;
}
