/**
 * Time as the controller sees it: an interface so the work queue, leader election and backoff can
 * be driven by a fake clock in unit tests instead of by real waiting.
 */
export interface Timer {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Runs fn once after ms milliseconds, unless cancelled. */
  after(ms: number, fn: () => void): Timer;
}

export const realClock: Clock = {
  now: () => Date.now(),
  after(ms, fn) {
    const handle = setTimeout(fn, ms);
    return {
      cancel: () => {
        clearTimeout(handle);
      },
    };
  },
};

export function sleep(clock: Clock, ms: number): Promise<void> {
  return new Promise((resolve) => clock.after(ms, resolve));
}

/** A clock that moves only when a test says so; timers fire in due order on advance(). */
export class FakeClock implements Clock {
  private time: number;
  private seq = 0;
  private readonly timers = new Map<number, { at: number; fn: () => void }>();

  constructor(start = 1_000_000) {
    this.time = start;
  }

  now(): number {
    return this.time;
  }

  after(ms: number, fn: () => void): Timer {
    const id = ++this.seq;
    this.timers.set(id, { at: this.time + Math.max(0, ms), fn });
    return {
      cancel: () => {
        this.timers.delete(id);
      },
    };
  }

  /** Moves time forward, firing due timers one at a time in order of their due time. */
  advance(ms: number): void {
    const end = this.time + ms;
    for (;;) {
      let nextId: number | undefined;
      let nextAt = Infinity;
      for (const [id, t] of this.timers) {
        if (t.at <= end && t.at < nextAt) {
          nextAt = t.at;
          nextId = id;
        }
      }
      if (nextId === undefined) break;
      const timer = this.timers.get(nextId);
      this.timers.delete(nextId);
      this.time = Math.max(this.time, nextAt);
      timer?.fn();
    }
    this.time = end;
  }

  pendingTimers(): number {
    return this.timers.size;
  }
}
