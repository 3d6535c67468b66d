/**
 * One way for a test to wait for a condition: poll with a bound, never sleep-and-read (the
 * machine a test runs on may be loaded). A poll that throws is retried; on timeout the error
 * names what was awaited, the last error and whatever `onTimeout` adds (a journal, a status).
 */
import { sleep } from '../../api/util.js';

export interface WaitOptions {
  /** Default 60 s. */
  timeoutMs?: number;
  /** Between polls; default 100 ms. */
  intervalMs?: number;
  /** More to say when it times out. */
  onTimeout?: () => Promise<string> | string;
}

/** Polls `fn` until it returns something other than undefined or false. */
export async function waitFor<T>(
  what: string,
  fn: () => Promise<T | undefined | false> | T | undefined | false,
  options: number | WaitOptions = {},
): Promise<T> {
  const o = typeof options === 'number' ? { timeoutMs: options } : options;
  const timeoutMs = o.timeoutMs ?? 60_000;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined && v !== false) return v;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) {
      const last = lastError instanceof Error ? ` (last error: ${lastError.message})` : '';
      const more = o.onTimeout ? `\n${await o.onTimeout()}` : '';
      throw new Error(`timed out after ${String(timeoutMs)} ms waiting for ${what}${last}${more}`);
    }
    await sleep(o.intervalMs ?? 100);
  }
}
