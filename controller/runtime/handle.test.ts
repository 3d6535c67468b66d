import { describe, expect, it } from 'vitest';
import { createLogger } from '../../log/logger.js';
import { timedHandle, type HandleOptions } from './handle.js';
import { WorkQueue } from './queue.js';

function options(lines: Record<string, unknown>[], counted: string[], timed: string[]) {
  const log = createLogger({
    component: 'test',
    level: 'debug',
    destination: {
      write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>),
    },
  });
  const queue = new WorkQueue({ concurrency: 1, baseDelayMs: 100, maxDelayMs: 1000 });
  const o: HandleOptions = {
    keyField: 'osc',
    reconciled: 'reconciled',
    failed: 'reconcile failed; will retry',
    log,
    queue: () => queue,
    count: (result, writes) => counted.push(`${result}/${String(writes)}`),
    errorResult: () => 'error',
    timer: () => {
      timed.push('start');
      return () => timed.push('end');
    },
  };
  return o;
}

describe('timedHandle', () => {
  it('counts, times and logs a pass: info when it wrote, debug when not; passes requeueAfter on', async () => {
    const lines: Record<string, unknown>[] = [];
    const counted: string[] = [];
    const timed: string[] = [];
    const handle = timedHandle(
      (key) =>
        Promise.resolve(
          key === 'ns/a'
            ? { result: 'rendered', writes: 2, requeueAfterMs: 500, fields: { phase: 'x' } }
            : { result: 'upToDate', writes: 0 },
        ),
      options(lines, counted, timed),
    );
    expect(await handle('ns/a')).toEqual({ requeueAfterMs: 500 });
    expect(await handle('ns/b')).toBeUndefined();
    expect(counted).toEqual(['rendered/2', 'upToDate/0']);
    expect(timed).toEqual(['start', 'end', 'start', 'end']);
    expect(lines.map((l) => [l.level, l.msg, l.osc])).toEqual([
      ['info', 'reconciled', 'ns/a'],
      ['debug', 'reconciled; nothing to write', 'ns/b'],
    ]);
    expect(lines[0]).toMatchObject({ result: 'rendered', writes: 2, phase: 'x' });
  });

  it('counts a failure, logs it with the retry delay and rethrows it for the queue', async () => {
    const lines: Record<string, unknown>[] = [];
    const counted: string[] = [];
    const timed: string[] = [];
    const handle = timedHandle(
      () => Promise.reject(new Error('boom')),
      options(lines, counted, timed),
    );
    await expect(handle('ns/a')).rejects.toThrow('boom');
    expect(counted).toEqual(['error/0']);
    expect(timed).toEqual(['start', 'end']);
    expect(lines[0]).toMatchObject({
      level: 'warn',
      msg: 'reconcile failed; will retry',
      osc: 'ns/a',
      retryInMs: 100,
    });
  });

  it('a pass with nothing to do is neither counted nor logged', async () => {
    const lines: Record<string, unknown>[] = [];
    const counted: string[] = [];
    const handle = timedHandle(() => Promise.resolve(undefined), options(lines, counted, []));
    expect(await handle('x')).toBeUndefined();
    expect(counted).toEqual([]);
    expect(lines).toEqual([]);
  });
});
