/**
 * Small helpers every part of oscar uses, said once. No imports: the agent loads this too, and
 * its memory is every node's.
 */

/** A JSON object as parsed, before its fields are checked. */
export type Obj = Record<string, unknown>;

/** A plain object (not null, not an array): what a parsed JSON or YAML object is. */
export function isObj(value: unknown): value is Obj {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** Runs `fn` over `items` with at most `limit` calls in flight; results in item order. */
export async function mapLimit<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<R>,
): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/** Resolves after `ms` milliseconds (tests and scripts; controllers wait on their Clock). */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
