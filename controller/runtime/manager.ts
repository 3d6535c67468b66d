/**
 * The controllers of one leader term, started in order and stopped in reverse: a controller that
 * reads another's caches starts once that one is synced (its start resolved), and stops before
 * it, so no reconcile reads caches that are going away. Stopping before everything started
 * starts nothing more.
 */

/** What the manager runs: a controller's start (resolves once synced) and stop. */
export interface Runnable {
  start(): Promise<void> | void;
  stop(): Promise<void>;
  /** Whether its caches are synced and it works (undefined: once started). */
  readonly synced?: boolean;
}

export class Manager {
  private readonly started: Runnable[] = [];
  private stopping = false;

  constructor(private readonly parts: readonly Runnable[]) {}

  /** Whether every part started and is synced, and none is stopping: the leader is ready. */
  get synced(): boolean {
    return (
      !this.stopping &&
      this.started.length === this.parts.length &&
      this.parts.every((part) => part.synced ?? true)
    );
  }

  /** Starts each part once the one before it started; stops early when `stop` was called. */
  async start(): Promise<void> {
    for (const part of this.parts) {
      if (this.stopping) return;
      this.started.push(part);
      await part.start();
    }
  }

  /** Stops what started, last first; a part that fails to stop does not keep the rest running. */
  async stop(): Promise<void> {
    this.stopping = true;
    const errors: unknown[] = [];
    for (const part of [...this.started].reverse()) {
      try {
        await part.stop();
      } catch (error) {
        errors.push(error);
      }
    }
    if (errors.length > 0) throw errors[0];
  }
}
