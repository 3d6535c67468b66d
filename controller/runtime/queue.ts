/**
 * The work queue between the informers and the reconciler. Keys (namespace/name of an
 * OperatingSystemConfig) rather than objects go in, so a burst of events for one object becomes
 * one reconcile of its latest state:
 * - deduplicated: a key waiting in the queue is not queued twice;
 * - never the same key twice at once: a key added while it is being processed is processed
 *   again once, after the running pass finishes;
 * - failures retry with per-key exponential backoff up to a cap; success forgets the failures;
 * - delayed re-add (requeueAfter), keeping only the earliest pending delay per key;
 * - bounded concurrency; shutdown() stops taking work and waits for the passes in flight;
 * - optionally partitioned (by namespace: one tenant each): waiting keys are taken from the
 *   partitions in turn, and no partition holds more than `maxPerPartition` workers, so thousands of
 *   keys — or a few slow or failing ones — of one partition never stall another's.
 */
import { realClock, type Clock, type Timer } from '../kube/clock.js';

export interface QueueOptions {
  concurrency: number;
  /** First retry delay after a failure; doubles per consecutive failure. */
  baseDelayMs: number;
  maxDelayMs: number;
  clock?: Clock;
  /** Called whenever the number of waiting keys changes (the queue depth metric). */
  onDepth?: (depth: number) => void;
  /** The partition of a key (default: one partition, first in first out). */
  partitionOf?: (key: string) => string;
  /**
   * Most passes of one partition at once. Default: half the workers (rounded up) when the queue is
   * partitioned, so a `--concurrency` of any size keeps a share for the other partitions; all of
   * them when it is not.
   */
  maxPerPartition?: number;
}

/** The namespace of a `namespace/name` key: the partition of a namespaced controller's queue. */
export function namespaceOfKey(key: string): string {
  const slash = key.indexOf('/');
  return slash < 0 ? '' : key.slice(0, slash);
}

/** What a handler may ask for besides success: run this key again after a while. */
export interface HandlerResult {
  requeueAfterMs?: number;
}

export type Handler = (key: string) => Promise<HandlerResult | undefined>;

export const DEFAULT_QUEUE_OPTIONS: QueueOptions = {
  concurrency: 4,
  baseDelayMs: 100,
  maxDelayMs: 60_000,
};

export class WorkQueue {
  /** Waiting keys per partition, first in first out; the map's order is the partitions' turn. */
  private readonly ready = new Map<string, string[]>();
  private readyCount = 0;
  /** Passes in flight per partition. */
  private readonly running = new Map<string, number>();
  private readonly partitionOf: (key: string) => string;
  private readonly maxPerPartition: number;
  /** Keys waiting in `ready` or waiting to be re-run after their current pass. */
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly delayed = new Map<string, { at: number; timer: Timer }>();
  private readonly clock: Clock;
  private handler: Handler | undefined;
  private stopping = false;
  private idleWaiters: (() => void)[] = [];

  constructor(private readonly options: QueueOptions = DEFAULT_QUEUE_OPTIONS) {
    if (options.concurrency < 1) throw new Error('queue concurrency must be at least 1');
    this.clock = options.clock ?? realClock;
    this.partitionOf = options.partitionOf ?? (() => '');
    const half = Math.ceil(options.concurrency / 2);
    const share = options.partitionOf ? half : options.concurrency;
    this.maxPerPartition = Math.max(1, options.maxPerPartition ?? share);
  }

  /** Keys waiting to be processed (not counting the ones in flight or delayed). */
  get depth(): number {
    return this.readyCount;
  }

  get inFlight(): number {
    return this.processing.size;
  }

  /** Whether the key waits to be processed or is being processed (delayed keys do not count). */
  pending(key: string): boolean {
    return this.dirty.has(key) || this.processing.has(key);
  }

  /** Consecutive failures of a key (0 after a success). */
  failuresOf(key: string): number {
    return this.failures.get(key) ?? 0;
  }

  add(key: string): void {
    if (this.stopping || this.dirty.has(key)) return;
    this.dirty.add(key);
    if (this.processing.has(key)) return; // re-queued when its current pass ends
    this.pushReady(key);
    this.depthChanged();
    this.pump();
  }

  /** Adds the key after ms; a later call with an earlier due time wins, a later one is ignored. */
  addAfter(key: string, ms: number): void {
    if (this.stopping) return;
    if (ms <= 0) {
      this.add(key);
      return;
    }
    const at = this.clock.now() + ms;
    const existing = this.delayed.get(key);
    if (existing && existing.at <= at) return;
    existing?.timer.cancel();
    const timer = this.clock.after(ms, () => {
      this.delayed.delete(key);
      this.add(key);
    });
    this.delayed.set(key, { at, timer });
  }

  /** The delay the next failure of this key will wait: base·2^(failures), capped. */
  backoffFor(key: string): number {
    const n = this.failures.get(key) ?? 0;
    return Math.min(this.options.maxDelayMs, this.options.baseDelayMs * 2 ** n);
  }

  /** Starts processing with the given handler. */
  start(handler: Handler): void {
    if (this.handler) throw new Error('queue already started');
    this.handler = handler;
    this.pump();
  }

  /** Stops taking work, drops waiting and delayed keys, resolves once no pass is in flight. */
  async shutdown(): Promise<void> {
    this.stopping = true;
    for (const { timer } of this.delayed.values()) timer.cancel();
    this.delayed.clear();
    this.ready.clear();
    this.readyCount = 0;
    this.dirty.clear();
    this.depthChanged();
    await this.idle();
  }

  /** Resolves when nothing is waiting and nothing is in flight (delayed keys do not count). */
  idle(): Promise<void> {
    if (this.processing.size === 0 && (this.readyCount === 0 || !this.handler)) {
      return Promise.resolve();
    }
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private pump(): void {
    const handler = this.handler;
    if (!handler) return;
    while (!this.stopping && this.processing.size < this.options.concurrency) {
      const key = this.takeReady();
      if (key === undefined) break;
      this.dirty.delete(key);
      this.processing.add(key);
      this.depthChanged();
      void this.run(handler, key);
    }
    this.maybeIdle();
  }

  private pushReady(key: string): void {
    const partition = this.partitionOf(key);
    const keys = this.ready.get(partition);
    if (keys) keys.push(key);
    else this.ready.set(partition, [key]);
    this.readyCount++;
  }

  /**
   * The next key of the first partition in turn that is under its share of the workers; that
   * partition then goes to the back of the turn. Undefined when every waiting key's partition is
   * at its share (or nothing waits).
   */
  private takeReady(): string | undefined {
    for (const [partition, keys] of this.ready) {
      if ((this.running.get(partition) ?? 0) >= this.maxPerPartition) continue;
      const key = keys.shift();
      this.ready.delete(partition);
      if (keys.length > 0) this.ready.set(partition, keys);
      if (key === undefined) continue;
      this.readyCount--;
      this.running.set(partition, (this.running.get(partition) ?? 0) + 1);
      return key;
    }
    return undefined;
  }

  private finished(key: string): void {
    const partition = this.partitionOf(key);
    const left = (this.running.get(partition) ?? 1) - 1;
    if (left > 0) this.running.set(partition, left);
    else this.running.delete(partition);
  }

  private async run(handler: Handler, key: string): Promise<void> {
    let retryAfter: number | undefined;
    try {
      const result = await handler(key);
      this.failures.delete(key);
      retryAfter = result?.requeueAfterMs;
    } catch {
      // The handler reports its own errors; the queue only decides when to try again.
      retryAfter = this.backoffFor(key);
      this.failures.set(key, (this.failures.get(key) ?? 0) + 1);
    }
    this.processing.delete(key);
    this.finished(key);
    if (this.dirty.has(key) && !this.stopping) {
      // Changed while it ran: run it again now (its latest state supersedes any retry).
      this.pushReady(key);
      this.depthChanged();
    } else if (retryAfter !== undefined) {
      this.addAfter(key, retryAfter);
    }
    this.pump();
  }

  private maybeIdle(): void {
    if (this.processing.size === 0 && this.readyCount === 0) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const w of waiters) w();
    }
  }

  private depthChanged(): void {
    this.options.onDepth?.(this.readyCount);
  }
}
