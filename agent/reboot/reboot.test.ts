import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { TryRecord } from '../rollout/try-state.js';
import {
  MAX_REBOOT_ATTEMPTS,
  REBOOT_INTENT,
  RebootHooks,
  rebootAgain,
  rebootedForTry,
  type RebootIntent,
  type TryFacts,
} from './reboot.js';

// issue 25: systemd restarted the agent but the machine never rebooted (same boot id).
const record: TryFacts = { checksum: 'c1', grant: { generation: 4 }, boot: 'boot-A' };
const intent: RebootIntent = {
  checksum: 'c1',
  generation: 4,
  fromBoot: 'boot-A',
  purpose: 'apply',
  requestedAt: '2026-12-04T13:00:00.000Z',
};

describe('a reboot that did not happen', () => {
  it('is not taken as back from the reboot in the same boot', () => {
    expect(rebootedForTry(record, intent, 'boot-A')).toBe(false);
    expect(rebootedForTry(record, intent, 'boot-B')).toBe(true);
  });

  it('asks for the reboot again, counting the attempts', () => {
    expect(rebootAgain(record, intent, 'boot-A')).toEqual({ kind: 'retry', attempt: 2 });
    expect(rebootAgain(record, { ...intent, attempts: 2 }, 'boot-A')).toEqual({
      kind: 'retry',
      attempt: 3,
    });
  });

  it('gives up after the bound, naming the boot', () => {
    const v = rebootAgain(record, { ...intent, attempts: MAX_REBOOT_ATTEMPTS }, 'boot-A');
    expect(v.kind).toBe('give-up');
    expect(v.kind === 'give-up' && v.message).toContain('boot-A');
  });

  it('does not apply in another boot, to another try, to a rollback or after arrival', () => {
    expect(rebootAgain(record, intent, 'boot-B').kind).toBe('not-same-boot');
    expect(rebootAgain(record, { ...intent, generation: 5 }, 'boot-A').kind).toBe('not-same-boot');
    expect(rebootAgain(record, { ...intent, purpose: 'rollback' }, 'boot-A').kind).toBe(
      'not-same-boot',
    );
    expect(rebootAgain(record, { ...intent, arrivedBoot: 'boot-A' }, 'boot-A').kind).toBe(
      'not-same-boot',
    );
    expect(rebootAgain(record, undefined, 'boot-A').kind).toBe('not-same-boot');
  });
});

describe('the end of a try whose reboot never happened', () => {
  async function hooks(
    saved: RebootIntent,
  ): Promise<{ h: RebootHooks; reboots: string[]; dir: string }> {
    const dir = await mkdtemp(join(tmpdir(), 'oscar-reboot-'));
    const { writeFile } = await import('node:fs/promises');
    await writeFile(join(dir, REBOOT_INTENT), JSON.stringify(saved));
    const reboots: string[] = [];
    const h = new RebootHooks({
      root: dir,
      stateDir: dir,
      rebooter: { reboot: (why) => (reboots.push(why), Promise.resolve()) },
      tryState: {
        bootToken: () => Promise.resolve('boot-A'),
        confirmed: () => Promise.resolve(undefined),
      },
      applier: { lastApplied: () => Promise.resolve(undefined) },
    });
    return { h, reboots, dir };
  }
  const tried = record as unknown as TryRecord;

  it('reverted without arrival: no reboot back, the intent cleared', async () => {
    const { h, reboots, dir } = await hooks({ ...intent, attempts: MAX_REBOOT_ATTEMPTS });
    try {
      await h.ended(tried, 'reverted');
      expect(reboots).toEqual([]);
      expect(await h.intent()).toBeUndefined();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('reverted after arrival: reboots back into the old state', async () => {
    const { h, reboots, dir } = await hooks({ ...intent, arrivedBoot: 'boot-B' });
    try {
      await h.ended(tried, 'reverted');
      expect(reboots).toHaveLength(1);
      expect((await h.intent())?.purpose).toBe('rollback');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
