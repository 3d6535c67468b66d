/**
 * The scaffolding every controller runs on: its informers started and waited for (a fresh start
 * never mistakes "not yet listed" for "missing"), then its work queue running the timed handle;
 * stopped in reverse — the queue stops taking work and lets the passes in flight finish, then the
 * watches stop. What differs between controllers is their informers and their reconcile.
 */
import type { Logger } from '../../log/logger.js';
import type { Clock } from '../kube/clock.js';
import type { Informer } from '../kube/informer.js';
import type { KubeObject } from '../kube/types.js';
import type { Runnable } from './manager.js';
import { WorkQueue, type Handler, type QueueOptions } from './queue.js';

/** A work queue with a controller's defaults, the caller's overrides and the clock. */
export function controllerQueue(
  defaults: QueueOptions,
  overrides: Partial<QueueOptions> | undefined,
  clock: Clock | undefined,
  onDepth?: (depth: number) => void,
): WorkQueue {
  return new WorkQueue({
    ...defaults,
    ...overrides,
    ...(clock ? { clock } : {}),
    ...(onDepth ? { onDepth } : {}),
  });
}

export interface ControllerRuntimeOptions {
  queue: WorkQueue;
  handle: Handler;
  log: Logger;
  /**
   * The controller's own informers, made at start (a controller may first ask what the API
   * server serves); none for a controller that reads another's caches.
   */
  informers: () => Promise<Informer<KubeObject>[]> | Informer<KubeObject>[];
  /** The line logged once the caches are synced, and its fields. */
  synced?: { message: string; fields: () => Record<string, unknown> };
}

export class ControllerRuntime implements Runnable {
  private informers: Informer<KubeObject>[] = [];
  private started = false;

  constructor(private readonly o: ControllerRuntimeOptions) {}

  get queue(): WorkQueue {
    return this.o.queue;
  }

  /** Whether the caches are synced and the workers run. */
  get synced(): boolean {
    return this.started && this.informers.every((i) => i.synced);
  }

  /** Starts the informers, waits until their caches are filled, then starts the workers. */
  async start(): Promise<void> {
    const t0 = Date.now();
    this.informers = await this.o.informers();
    for (const i of this.informers) i.start();
    await Promise.all(this.informers.map((i) => i.waitForSync()));
    if (this.o.synced) {
      this.o.log.info({ ms: Date.now() - t0, ...this.o.synced.fields() }, this.o.synced.message);
    }
    this.started = true;
    this.o.queue.start(this.o.handle);
  }

  /** Stops taking work, lets the reconciles in flight finish, stops the watches. */
  async stop(): Promise<void> {
    await this.o.queue.shutdown();
    await Promise.all(this.informers.map((i) => i.stop()));
  }
}

/**
 * A controller on the runtime: started, stopped and synced as its runtime is. Each controller
 * is then its informers, its reconcile and its caches.
 */
export abstract class RuntimeController implements Runnable {
  protected abstract readonly runtime: ControllerRuntime;

  /** Whether its caches are synced and its workers run. */
  get synced(): boolean {
    return this.runtime.synced;
  }

  /** Starts the informers, waits until their caches are filled, then starts the workers. */
  start(): Promise<void> {
    return this.runtime.start();
  }

  /** Stops taking work, lets the reconciles in flight finish, stops the watches. */
  stop(): Promise<void> {
    return this.runtime.stop();
  }
}
