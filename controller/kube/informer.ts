/**
 * An informer: list, then watch from the list's resourceVersion, keeping a local cache and
 * telling handlers what changed. It asks for bookmarks (so a re-watch resumes from a recent
 * resourceVersion instead of replaying or hitting 410), relists on 410 Gone, and reconnects with
 * capped exponential backoff when the connection fails — an API server restart is just a
 * reconnect, not a controller restart. A relist diffs against the cache, so objects deleted while
 * the watch was down are reported as deleted.
 */
import { realClock, sleep, type Clock } from './clock.js';
import {
  ApiError,
  type KubeHttp,
  ACCEPT_METADATA,
  ACCEPT_METADATA_LIST,
} from '../../kube/client.js';
import type { KubeObject } from './types.js';

export interface WatchEvent<T> {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: T;
}

export interface ListPage<T> {
  items: T[] | null;
  metadata: { resourceVersion?: string; continue?: string };
}

/** Where an informer gets its data; the real one talks HTTP, tests use an in-memory one. */
export interface ListWatchSource<T> {
  list(continueToken: string | undefined): Promise<ListPage<T>>;
  /** Streams events from resourceVersion; resolves when the server ends the watch. */
  watch(
    resourceVersion: string,
    onEvent: (event: WatchEvent<T>) => void,
    signal: AbortSignal,
  ): Promise<void>;
}

export interface InformerHandlers<T> {
  onAdd?(obj: T): void;
  onUpdate?(oldObj: T, newObj: T): void;
  onDelete?(obj: T): void;
}

export interface InformerOptions {
  /** For logs and metrics: "secrets(ns-a, owned)". */
  name: string;
  clock?: Clock;
  backoffBaseMs?: number;
  backoffMaxMs?: number;
  onError?: (error: unknown, attempt: number) => void;
  /** Called after each successful (re)list and watch (re)connect. */
  onConnect?: (what: 'list' | 'watch') => void;
  /** Applied to every object before it is cached, e.g. to drop fields never read. */
  transform?: (obj: unknown) => void;
}

/**
 * managedFields lists every field path of an object per manager: for an OSC with 40 files that
 * is as large as its spec. The controller never reads it; caching it would double its memory.
 */
export function dropManagedFields(obj: unknown): void {
  const meta = (obj as { metadata?: { managedFields?: unknown } } | null)?.metadata;
  if (meta) delete meta.managedFields;
}

/** The server said the resourceVersion is too old: relist. */
export class GoneError extends Error {
  constructor() {
    super('resourceVersion too old (410 Gone)');
    this.name = 'GoneError';
  }
}

export function keyOf(obj: KubeObject): string {
  return `${obj.metadata.namespace ?? ''}/${obj.metadata.name}`;
}

export class Informer<T extends KubeObject> {
  private readonly store = new Map<string, T>();
  private resourceVersion = '';
  private stopped = false;
  private abort: AbortController | undefined;
  private syncedFlag = false;
  private syncWaiters: (() => void)[] = [];
  private loop: Promise<void> | undefined;
  private readonly clock: Clock;
  /** How many times the cache was (re)built by a list: 1 after start, +1 per 410 relist. */
  lists = 0;

  /** Every subscriber's handlers: the owner's, then those added with subscribe(). */
  private readonly handlers: InformerHandlers<T>[];

  constructor(
    private readonly source: ListWatchSource<T>,
    handlers: InformerHandlers<T>,
    private readonly options: InformerOptions,
  ) {
    this.clock = options.clock ?? realClock;
    this.handlers = [handlers];
  }

  /**
   * Another controller's handlers on the same cache (one list and one watch per resource, as
   * client-go's shared informers). Subscribe before start() to see the first list too.
   */
  subscribe(handlers: InformerHandlers<T>): void {
    this.handlers.push(handlers);
  }

  private added(obj: T): void {
    for (const h of this.handlers) h.onAdd?.(obj);
  }

  private updated(before: T, after: T): void {
    for (const h of this.handlers) h.onUpdate?.(before, after);
  }

  private deleted(obj: T): void {
    for (const h of this.handlers) h.onDelete?.(obj);
  }

  get name(): string {
    return this.options.name;
  }

  get synced(): boolean {
    return this.syncedFlag;
  }

  get(namespace: string, name: string): T | undefined {
    return this.store.get(`${namespace}/${name}`);
  }

  list(): T[] {
    return [...this.store.values()];
  }

  get size(): number {
    return this.store.size;
  }

  start(): void {
    this.loop ??= this.run();
  }

  waitForSync(): Promise<void> {
    if (this.syncedFlag) return Promise.resolve();
    return new Promise((resolve) => this.syncWaiters.push(resolve));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.abort?.abort();
    await this.loop;
  }

  /** A method, not the field, so the compiler does not narrow it across awaits. */
  private isStopped(): boolean {
    return this.stopped;
  }

  private async run(): Promise<void> {
    let attempt = 0;
    while (!this.stopped) {
      try {
        if (!this.resourceVersion) {
          await this.relist();
          this.options.onConnect?.('list');
        }
        this.abort = new AbortController();
        const seen = { event: false };
        const watching = this.source.watch(
          this.resourceVersion,
          (event) => {
            seen.event = true;
            this.handle(event);
          },
          this.abort.signal,
        );
        this.options.onConnect?.('watch');
        const opened = this.clock.now();
        await watching;
        // A normal end (the server's timeoutSeconds): watch again at once from where we are.
        if (seen.event) attempt = 0;
        else if (this.clock.now() - opened < 1000) {
          // Ended at once with nothing in it: something is wrong; never spin on it.
          throw new Error('the watch ended immediately without events');
        }
      } catch (error) {
        if (this.isStopped()) break;
        if (error instanceof GoneError || (error instanceof ApiError && error.status === 410)) {
          this.resourceVersion = '';
          continue;
        }
        attempt++;
        this.options.onError?.(error, attempt);
        const base = this.options.backoffBaseMs ?? 200;
        const max = this.options.backoffMaxMs ?? 30_000;
        const delay = Math.min(max, base * 2 ** (attempt - 1));
        // Jitter spreads reconnects of many informers after an API server restart.
        await sleep(this.clock, delay * (0.8 + Math.random() * 0.4));
      }
    }
  }

  private async relist(): Promise<void> {
    const fresh = new Map<string, T>();
    let token: string | undefined;
    let rv = '';
    do {
      const page = await this.source.list(token);
      // An empty PartialObjectMetadataList comes back with "items": null.
      for (const item of page.items ?? []) {
        this.options.transform?.(item);
        fresh.set(keyOf(item), item);
      }
      token = page.metadata.continue || undefined;
      rv = page.metadata.resourceVersion ?? rv;
    } while (token && !this.stopped);
    this.lists++;
    const old = new Map(this.store);
    this.store.clear();
    for (const [k, v] of fresh) this.store.set(k, v);
    for (const [k, obj] of fresh) {
      const before = old.get(k);
      if (!before) this.added(obj);
      else if (before.metadata.resourceVersion !== obj.metadata.resourceVersion) {
        this.updated(before, obj);
      }
    }
    for (const [k, obj] of old) if (!fresh.has(k)) this.deleted(obj);
    this.resourceVersion = rv;
    if (!this.syncedFlag) {
      this.syncedFlag = true;
      const waiters = this.syncWaiters;
      this.syncWaiters = [];
      for (const w of waiters) w();
    }
  }

  private handle(event: WatchEvent<T>): void {
    const obj = event.object;
    this.options.transform?.(obj);
    switch (event.type) {
      case 'ERROR': {
        const status = obj as unknown as { code?: number };
        if (status.code === 410) throw new GoneError();
        throw new ApiError(status.code ?? 500, '', 'watch returned an error event');
      }
      case 'BOOKMARK':
        break;
      case 'ADDED':
      case 'MODIFIED': {
        const k = keyOf(obj);
        const before = this.store.get(k);
        this.store.set(k, obj);
        if (before) this.updated(before, obj);
        else this.added(obj);
        break;
      }
      case 'DELETED': {
        const k = keyOf(obj);
        const before = this.store.get(k);
        this.store.delete(k);
        this.deleted(before ?? obj);
        break;
      }
    }
    if (obj.metadata.resourceVersion) this.resourceVersion = obj.metadata.resourceVersion;
  }
}

export interface HttpSourceOptions {
  /** The collection: "/api/v1/namespaces/ns/secrets", "/apis/oscar.dev/v1alpha1/operatingsystemconfigs". */
  path: string;
  labelSelector?: string;
  /** Ask for PartialObjectMetadata: labels, annotations, owners — never Secret data. */
  metadataOnly?: boolean;
  /** The server ends each watch after this many seconds (a fresh watch follows). */
  watchTimeoutSeconds?: number;
  pageSize?: number;
}

export function httpSource<T extends KubeObject>(
  http: KubeHttp,
  o: HttpSourceOptions,
): ListWatchSource<T> {
  const accept = o.metadataOnly ? ACCEPT_METADATA : undefined;
  return {
    list: (token) =>
      http.request<ListPage<T>>('GET', o.path, {
        query: { labelSelector: o.labelSelector, limit: o.pageSize ?? 500, continue: token },
        accept: o.metadataOnly ? ACCEPT_METADATA_LIST : undefined,
        timeoutMs: 120_000,
      }),
    watch: (resourceVersion, onEvent, signal) =>
      http.stream(
        o.path,
        {
          query: {
            watch: 1,
            allowWatchBookmarks: true,
            resourceVersion,
            labelSelector: o.labelSelector,
            timeoutSeconds: o.watchTimeoutSeconds ?? 300 + Math.floor(Math.random() * 300),
          },
          accept,
          signal,
        },
        (line) => {
          onEvent(JSON.parse(line) as WatchEvent<T>);
        },
      ),
  };
}
