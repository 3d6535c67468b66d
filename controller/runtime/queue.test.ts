import { describe, expect, it } from 'vitest';
import { FakeClock } from '../kube/clock.js';
import { namespaceOfKey, WorkQueue } from './queue.js';

/** A handler whose calls the test resolves or rejects by hand. */
function controllable() {
  const calls: string[] = [];
  const pending = new Map<string, { resolve: () => void; reject: (e: Error) => void }[]>();
  let active = 0;
  let maxActive = 0;
  const handler = (key: string): Promise<undefined> => {
    calls.push(key);
    active++;
    maxActive = Math.max(maxActive, active);
    return new Promise<undefined>((resolve, reject) => {
      const list = pending.get(key) ?? [];
      list.push({
        resolve: () => {
          active--;
          resolve(undefined);
        },
        reject: (e) => {
          active--;
          reject(e);
        },
      });
      pending.set(key, list);
    });
  };
  const settle = async (key: string, ok = true): Promise<void> => {
    const next = pending.get(key)?.shift();
    if (!next) throw new Error(`no pending call for ${key}`);
    if (ok) next.resolve();
    else next.reject(new Error('boom'));
    await flush();
  };
  return { calls, handler, settle, maxActive: () => maxActive, active: () => active };
}

const flush = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

describe('WorkQueue', () => {
  it('deduplicates a key that is already waiting', async () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ concurrency: 1, baseDelayMs: 10, maxDelayMs: 100, clock });
    const h = controllable();
    q.add('a');
    q.add('a');
    q.add('b');
    q.add('a');
    expect(q.depth).toBe(2);
    q.start(h.handler);
    await flush();
    expect(h.calls).toEqual(['a']);
    await h.settle('a');
    expect(h.calls).toEqual(['a', 'b']);
    await h.settle('b');
    expect(h.calls).toEqual(['a', 'b']);
  });

  it('never runs the same key twice at once, but re-runs it once if it changed meanwhile', async () => {
    const q = new WorkQueue({
      concurrency: 4,
      baseDelayMs: 10,
      maxDelayMs: 100,
      clock: new FakeClock(),
    });
    const h = controllable();
    q.start(h.handler);
    q.add('a');
    await flush();
    q.add('a');
    q.add('a');
    await flush();
    expect(h.calls).toEqual(['a']);
    expect(h.active()).toBe(1);
    await h.settle('a');
    expect(h.calls).toEqual(['a', 'a']);
    await h.settle('a');
    expect(h.calls).toEqual(['a', 'a']);
    expect(h.maxActive()).toBe(1);
  });

  it('says a key is pending while it waits or runs, not while only delayed', async () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ concurrency: 1, baseDelayMs: 10, maxDelayMs: 100, clock });
    const h = controllable();
    q.addAfter('a', 50);
    expect(q.pending('a')).toBe(false);
    q.add('b');
    expect(q.pending('b')).toBe(true);
    q.start(h.handler);
    await flush();
    expect(q.pending('b')).toBe(true); // running
    await h.settle('b');
    expect(q.pending('b')).toBe(false);
    clock.advance(50);
    await flush();
    expect(q.pending('a')).toBe(true);
    await h.settle('a');
    expect(q.pending('a')).toBe(false);
  });

  it('bounds concurrency', async () => {
    const q = new WorkQueue({
      concurrency: 2,
      baseDelayMs: 10,
      maxDelayMs: 100,
      clock: new FakeClock(),
    });
    const h = controllable();
    q.start(h.handler);
    for (const k of ['a', 'b', 'c', 'd']) q.add(k);
    await flush();
    expect(h.calls).toEqual(['a', 'b']);
    expect(q.depth).toBe(2);
    await h.settle('b');
    expect(h.calls).toEqual(['a', 'b', 'c']);
    await h.settle('a');
    await h.settle('c');
    await h.settle('d');
    expect(h.maxActive()).toBe(2);
    expect(q.depth).toBe(0);
  });

  it('retries failures with exponential backoff up to the cap, and forgets on success', async () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ concurrency: 1, baseDelayMs: 100, maxDelayMs: 350, clock });
    const h = controllable();
    q.start(h.handler);
    q.add('a');
    await flush();
    await h.settle('a', false); // failure 1 → retry after 100
    expect(q.failuresOf('a')).toBe(1);
    clock.advance(99);
    await flush();
    expect(h.calls.length).toBe(1);
    clock.advance(1);
    await flush();
    expect(h.calls.length).toBe(2);
    await h.settle('a', false); // failure 2 → 200
    clock.advance(199);
    await flush();
    expect(h.calls.length).toBe(2);
    clock.advance(1);
    await flush();
    expect(h.calls.length).toBe(3);
    await h.settle('a', false); // failure 3 → 400, capped at 350
    clock.advance(349);
    await flush();
    expect(h.calls.length).toBe(3);
    clock.advance(1);
    await flush();
    expect(h.calls.length).toBe(4);
    await h.settle('a', true);
    expect(q.failuresOf('a')).toBe(0);
    expect(q.backoffFor('a')).toBe(100);
    expect(clock.pendingTimers()).toBe(0);
  });

  it('a change during a failing pass runs at once instead of waiting for the backoff', async () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ concurrency: 1, baseDelayMs: 1000, maxDelayMs: 5000, clock });
    const h = controllable();
    q.start(h.handler);
    q.add('a');
    await flush();
    q.add('a');
    await h.settle('a', false);
    expect(h.calls).toEqual(['a', 'a']);
  });

  it('addAfter keeps the earliest due time per key', async () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ concurrency: 1, baseDelayMs: 10, maxDelayMs: 100, clock });
    const h = controllable();
    q.start(h.handler);
    q.addAfter('a', 500);
    q.addAfter('a', 200);
    q.addAfter('a', 800);
    expect(clock.pendingTimers()).toBe(1);
    clock.advance(199);
    await flush();
    expect(h.calls).toEqual([]);
    clock.advance(1);
    await flush();
    expect(h.calls).toEqual(['a']);
    await h.settle('a');
    clock.advance(1000);
    await flush();
    expect(h.calls).toEqual(['a']);
  });

  it('honours requeueAfter from the handler', async () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ concurrency: 1, baseDelayMs: 10, maxDelayMs: 100, clock });
    let n = 0;
    q.start(() => {
      n++;
      return Promise.resolve(n === 1 ? { requeueAfterMs: 300 } : undefined);
    });
    q.add('a');
    await flush();
    expect(n).toBe(1);
    clock.advance(300);
    await flush();
    expect(n).toBe(2);
    clock.advance(1000);
    await flush();
    expect(n).toBe(2);
  });

  it('shutdown waits for passes in flight and refuses new work', async () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ concurrency: 2, baseDelayMs: 10, maxDelayMs: 100, clock });
    const h = controllable();
    q.start(h.handler);
    q.add('a');
    q.add('b');
    q.add('c');
    q.addAfter('d', 50);
    await flush();
    let done = false;
    const stopped = q.shutdown().then(() => {
      done = true;
    });
    await flush();
    expect(done).toBe(false);
    await h.settle('a');
    expect(done).toBe(false);
    await h.settle('b');
    await stopped;
    expect(done).toBe(true);
    q.add('e');
    clock.advance(100);
    await flush();
    expect(h.calls).toEqual(['a', 'b']);
  });

  it('reports its depth', async () => {
    const depths: number[] = [];
    const q = new WorkQueue({
      concurrency: 1,
      baseDelayMs: 10,
      maxDelayMs: 100,
      clock: new FakeClock(),
      onDepth: (d) => depths.push(d),
    });
    q.add('a');
    q.add('b');
    const h = controllable();
    q.start(h.handler);
    await flush();
    expect(depths).toEqual([1, 2, 1]);
    await h.settle('a');
    await h.settle('b');
    expect(depths.at(-1)).toBe(0);
  });
});

describe('WorkQueue partitions: one namespace never stalls another (red-team round 3)', () => {
  const options = (partitioned: boolean) => ({
    concurrency: 4,
    baseDelayMs: 10,
    maxDelayMs: 100,
    clock: new FakeClock(),
    ...(partitioned ? { partitionOf: namespaceOfKey, maxPerPartition: 2 } : {}),
  });

  it("a namespace's hundred slow passes hold at most its share: another namespace's key runs while they hang", async () => {
    const q = new WorkQueue(options(true));
    const h = controllable();
    for (let i = 0; i < 100; i++) q.add(`slow/osc-${String(i)}`);
    q.add('other/osc');
    q.start(h.handler);
    await flush();
    // Neither a slow pass has ended nor a timer fired: the other namespace ran anyway.
    expect(h.calls).toContain('other/osc');
    expect(h.calls.filter((k) => k.startsWith('slow/'))).toHaveLength(2);
    await h.settle('other/osc');
    // The workers the other namespace does not need stay free, not taken by the slow one.
    expect(h.active()).toBe(2);
    expect(q.depth).toBe(98);
  });

  it('waiting keys are taken from the namespaces in turn, not in arrival order', async () => {
    const q = new WorkQueue({ ...options(true), concurrency: 1, maxPerPartition: 1 });
    const h = controllable();
    for (const k of ['a/1', 'a/2', 'a/3', 'b/1', 'b/2', 'c/1']) q.add(k);
    q.start(h.handler);
    for (let i = 0; i < 6; i++) {
      await flush();
      await h.settle(h.calls.at(-1) ?? '');
    }
    expect(h.calls).toEqual(['a/1', 'b/1', 'c/1', 'a/2', 'b/2', 'a/3']);
  });

  it('a key that fails forever retries with its own backoff and does not hold a worker meanwhile', async () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ ...options(true), clock });
    const h = controllable();
    q.add('bad/osc');
    q.start(h.handler);
    await flush();
    await h.settle('bad/osc', false);
    expect(h.active()).toBe(0);
    q.add('other/osc');
    await flush();
    expect(h.calls).toEqual(['bad/osc', 'other/osc']);
  });

  it('a partitioned queue keeps half its workers (rounded up) for the other partitions, whatever its concurrency', async () => {
    for (const [concurrency, share] of [
      [16, 8],
      [5, 3],
      [1, 1],
    ] as const) {
      const q = new WorkQueue({ ...options(true), concurrency, maxPerPartition: undefined });
      const h = controllable();
      for (let i = 0; i < 40; i++) q.add(`slow/osc-${String(i)}`);
      q.start(h.handler);
      await flush();
      expect(h.active(), `concurrency ${String(concurrency)}`).toBe(share);
    }
  });

  it('control: without partitions the same hundred slow passes take every worker and the other namespace waits', async () => {
    const q = new WorkQueue(options(false));
    const h = controllable();
    for (let i = 0; i < 100; i++) q.add(`slow/osc-${String(i)}`);
    q.add('other/osc');
    q.start(h.handler);
    await flush();
    expect(h.calls).not.toContain('other/osc');
    expect(h.active()).toBe(4);
  });
});
