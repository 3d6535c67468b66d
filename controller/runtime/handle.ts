/**
 * The timed handle every controller's queue runs: one reconcile of a key, timed, counted by its
 * result, logged, and on failure counted, logged with the retry delay and rethrown for the queue
 * to back off. A controller is then its reconcile; this is the same for all of them.
 */
import { errorFields, type Logger } from '../../log/logger.js';
import type { Handler, HandlerResult, WorkQueue } from './queue.js';

/** What one pass did, as the handle reports it. */
export interface Reconciled {
  /** The result label of the reconcile counter. */
  result: string;
  /** API writes made: a pass that wrote is logged at info, one that did not at debug. */
  writes: number;
  requeueAfterMs?: number;
  /** More fields for the log line. */
  fields?: Record<string, unknown>;
  /** The log line of a pass that wrote (default: the handle's `reconciled`), and its level. */
  message?: string;
  level?: 'info' | 'warn';
}

export interface HandleOptions {
  /** The log field that names the key: `osc`, `config`, `csr`. */
  keyField: string;
  /** The log line of a pass that wrote: "reconciled", "reconciled OscarConfig". */
  reconciled: string;
  /** The log line of a failed pass: "reconcile failed; will retry". */
  failed: string;
  log: Logger;
  /** For the retry delay in the failure's log line. */
  queue: () => WorkQueue;
  /** Counts a result (oscar_controller_reconciles_total or the controller's own counter). */
  count?: (result: string, writes: number) => void;
  /** The result a failure counts as. */
  errorResult: (error: unknown) => string;
  /** Starts the duration timer; the returned function ends it. */
  timer?: () => () => void;
}

/** Logs one finished pass: info when it wrote, debug when it had nothing to write. */
function logPass(o: HandleOptions, key: string, out: Reconciled): void {
  const fields = { [o.keyField]: key, result: out.result, ...out.fields };
  if (out.writes > 0 || out.message !== undefined) {
    const level = out.level ?? 'info';
    o.log[level]({ ...fields, writes: out.writes }, out.message ?? o.reconciled);
  } else {
    o.log.debug(fields, `${o.reconciled}; nothing to write`);
  }
}

/** The queue's handler around `reconcile`; a pass that returns undefined had nothing to do. */
export function timedHandle(
  reconcile: (key: string) => Promise<Reconciled | undefined>,
  o: HandleOptions,
): Handler {
  return async (key: string): Promise<HandlerResult | undefined> => {
    const end = o.timer?.();
    try {
      const out = await reconcile(key);
      if (!out) return undefined;
      o.count?.(out.result, out.writes);
      logPass(o, key, out);
      return out.requeueAfterMs === undefined ? undefined : { requeueAfterMs: out.requeueAfterMs };
    } catch (error) {
      o.count?.(o.errorResult(error), 0);
      o.log.warn(
        { [o.keyField]: key, retryInMs: o.queue().backoffFor(key), ...errorFields(error) },
        o.failed,
      );
      throw error;
    } finally {
      end?.();
    }
  };
}
