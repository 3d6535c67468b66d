import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { memoryLogger } from '../../log/memory.js';
import { Deadline, onShutdownSignal, parseDuration, reserveFor } from './shutdown.js';
import { sleep } from '../../api/util.js';

function harness(timeoutMs: number, stop: (deadline: Deadline) => Promise<unknown>) {
  const signals = new EventEmitter();
  const exits: number[] = [];
  const logged = memoryLogger('test');
  let exited: (code: number) => void = () => undefined;
  const exit = new Promise<number>((r) => (exited = r));
  const remove = onShutdownSignal((_s, d) => stop(d), {
    log: logged.log,
    timeoutMs,
    signals,
    exit: (code) => {
      exits.push(code);
      exited(code);
    },
  });
  return { signals, exits, exit, remove, logged };
}

describe('onShutdownSignal', () => {
  it("runs the command's stop on SIGTERM and exits with its code", async () => {
    const h = harness(5_000, () => Promise.resolve(3));
    h.signals.emit('SIGTERM', 'SIGTERM');
    expect(await h.exit).toBe(3);
    expect(h.logged.records().map((r) => r.msg)).toEqual(['stopping', 'stopped']);
  });

  it('ends the process at the timeout when the stop hangs (an API server that never answers)', async () => {
    const t0 = Date.now();
    const h = harness(300, () => new Promise(() => undefined));
    h.signals.emit('SIGINT', 'SIGINT');
    expect(await h.exit).toBe(1);
    expect(Date.now() - t0).toBeLessThan(1_000);
    expect(h.logged.records().at(-1)).toMatchObject({
      level: 'error',
      msg: 'did not stop within the shutdown timeout; exiting',
    });
  });

  it('a second signal exits at once with 128 + its number', async () => {
    const h = harness(60_000, () => new Promise(() => undefined));
    h.signals.emit('SIGTERM', 'SIGTERM');
    h.signals.emit('SIGTERM', 'SIGTERM');
    expect(await h.exit).toBe(143);
  });

  it('gives the stop a deadline before the watchdog, and removes its handlers', async () => {
    let remaining = -1;
    const h = harness(1_000, (d) => {
      remaining = d.remainingMs();
      return Promise.resolve();
    });
    h.signals.emit('SIGTERM', 'SIGTERM');
    await h.exit;
    expect(remaining).toBeGreaterThan(800);
    expect(remaining).toBeLessThanOrEqual(900);
    h.remove();
    expect(h.signals.listenerCount('SIGTERM')).toBe(0);
  });
});

describe('Deadline', () => {
  it('waits for work until the deadline less a reserve', async () => {
    const d = new Deadline(400);
    expect(await d.within(sleep(10))).toBe(true);
    expect(await d.within(Promise.reject(new Error('x')))).toBe(true);
    const t0 = Date.now();
    expect(await d.within(new Promise(() => undefined), 200)).toBe(false);
    expect(Date.now() - t0).toBeLessThan(350);
    expect(reserveFor(15_000)).toBe(2_000);
    expect(reserveFor(1_000)).toBe(250);
  });

  it('parses durations and names the flag when it cannot', () => {
    expect(parseDuration('15s', '--x')).toBe(15_000);
    expect(parseDuration('500ms', '--x')).toBe(500);
    expect(parseDuration('2m', '--x')).toBe(120_000);
    expect(parseDuration('3', '--x')).toBe(3_000);
    expect(parseDuration('1h', '--x')).toBe(3_600_000);
    expect(() => parseDuration('soon', '--shutdown-timeout')).toThrow(
      '--shutdown-timeout: "soon" is not a duration; write e.g. 15s, 500ms, 20m or 1h',
    );
  });
});
