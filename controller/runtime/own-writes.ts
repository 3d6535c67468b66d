/**
 * A controller's own recent writes, kept visible until the watch catches up. A write answers
 * with the stored object (or its metadata) at once; the watch event carrying that version comes
 * later. A pass that runs in between and read only the cache would see the state before the
 * write and write again (a second grant, a second status, a Secret applied twice), so each write
 * is recorded here with its resourceVersion and read in place of the cached object while the
 * cache is older. Once the watch delivers that version or a later one, the record is dropped: it
 * has nothing more to say, and an object kept here would be a second copy of the cached one.
 *
 * resourceVersions are etcd revisions in practice; where one is not a number the cache is
 * trusted (the record is dropped).
 */

interface Record<T> {
  value: T;
  version: number;
}

function versionOf(resourceVersion: string | number | undefined): number {
  return Number(resourceVersion ?? 0);
}

/** Whether the cache at `cached` is older than our write at `own` (both numbers). */
function cacheIsOlder(cached: number, own: number): boolean {
  return Number.isFinite(cached) && Number.isFinite(own) && cached < own;
}

export class OwnWrites<T> {
  private readonly records = new Map<string, Record<T>>();

  /** Our write of `key`, stored by the API server at `resourceVersion`. */
  record(key: string, value: T, resourceVersion: string | number | undefined): void {
    this.records.set(key, { value, version: versionOf(resourceVersion) });
  }

  /** The watch delivered `key` at `resourceVersion`: the record goes if that is not older. */
  seen(key: string, resourceVersion: string | number | undefined): void {
    const own = this.records.get(key);
    if (own && !cacheIsOlder(versionOf(resourceVersion), own.version)) this.records.delete(key);
  }

  /** The object is gone (deleted) or the write is void: nothing left to lay over the cache. */
  forget(key: string): void {
    this.records.delete(key);
  }

  /**
   * Our write of `key` while the cache (at `cachedVersion`, undefined: not cached) is older;
   * otherwise undefined, and the record is dropped.
   */
  newerThan(key: string, cachedVersion: string | number | undefined): T | undefined {
    const own = this.records.get(key);
    if (!own) return undefined;
    if (cacheIsOlder(versionOf(cachedVersion), own.version)) return own.value;
    this.records.delete(key);
    return undefined;
  }

  /** Whether the cache (at `cachedVersion`) has caught up with our write of `key`; drops nothing. */
  caughtUp(key: string, cachedVersion: string | number | undefined): boolean {
    const own = this.records.get(key);
    return !own || !cacheIsOlder(versionOf(cachedVersion), own.version);
  }

  /** Every record, for reads that list (a listing laid over with our writes). */
  entries(): [string, T][] {
    return [...this.records].map(([key, r]) => [key, r.value]);
  }
}
