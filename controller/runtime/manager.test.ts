import { describe, expect, it } from 'vitest';
import { Manager, type Runnable } from './manager.js';

function part(name: string, said: string[], gate?: Promise<void>): Runnable {
  return {
    start: async () => {
      said.push(`start ${name}`);
      await gate;
      said.push(`synced ${name}`);
    },
    stop: async () => {
      said.push(`stop ${name}`);
      await Promise.resolve();
    },
  };
}

describe('Manager', () => {
  it('starts each part once the one before it started, and stops them in reverse', async () => {
    const said: string[] = [];
    const m = new Manager([part('osc', said), part('rollout', said), part('bootstrap', said)]);
    await m.start();
    await m.stop();
    expect(said).toEqual([
      'start osc',
      'synced osc',
      'start rollout',
      'synced rollout',
      'start bootstrap',
      'synced bootstrap',
      'stop bootstrap',
      'stop rollout',
      'stop osc',
    ]);
  });

  it('a stop while a part is starting stops what started and starts nothing more', async () => {
    const said: string[] = [];
    let open: () => void = () => undefined;
    const gate = new Promise<void>((r) => (open = r));
    const m = new Manager([part('osc', said, gate), part('rollout', said)]);
    const starting = m.start();
    await m.stop();
    open();
    await starting;
    expect(said).toEqual(['start osc', 'stop osc', 'synced osc']);
  });

  it('a part that fails to stop does not keep the others running', async () => {
    const said: string[] = [];
    const bad: Runnable = {
      start: () => undefined,
      stop: () => Promise.reject(new Error('boom')),
    };
    const m = new Manager([part('osc', said), bad]);
    await m.start();
    await expect(m.stop()).rejects.toThrow('boom');
    expect(said).toContain('stop osc');
  });
});

describe('Manager.synced', () => {
  it('is true once every part started and says it is synced, false again once stopping', async () => {
    let bSynced = false;
    const a: Runnable = { start: () => undefined, stop: () => Promise.resolve(), synced: true };
    const b: Runnable = {
      start: () => undefined,
      stop: () => Promise.resolve(),
      get synced() {
        return bSynced;
      },
    };
    const m = new Manager([a, b]);
    expect(m.synced).toBe(false);
    await m.start();
    expect(m.synced).toBe(false);
    bSynced = true;
    expect(m.synced).toBe(true);
    await m.stop();
    expect(m.synced).toBe(false);
  });
});
