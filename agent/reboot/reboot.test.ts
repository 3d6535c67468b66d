import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { TryLifecycle } from '../rollout/try-lifecycle.js';
import type { TryRecord } from '../rollout/try-state.js';
import type { Desired } from '../state.js';
import { config, desiredOf, file } from '../testing/fixtures.js';
import {
  MAX_REBOOT_ATTEMPTS,
  REBOOT_INTENT,
  RebootHooks,
  rebootAgain,
  rebootBackAgain,
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

// issue 25: the reboot back into the previous revision, asked for from the boot of the revert.
describe('a reboot back that did not happen', () => {
  const back: RebootIntent = { ...intent, purpose: 'rollback' };

  it('is asked for the first time when this boot asked for none', () => {
    expect(rebootBackAgain(record, undefined, 'boot-A')).toEqual({ kind: 'first' });
    // the intent of the reboot into the try, or one from another boot, is not a request back
    expect(rebootBackAgain(record, intent, 'boot-A')).toEqual({ kind: 'first' });
    expect(rebootBackAgain(record, back, 'boot-B')).toEqual({ kind: 'first' });
    expect(rebootBackAgain(record, { ...back, generation: 5 }, 'boot-A')).toEqual({
      kind: 'first',
    });
  });

  it('is asked for again from the same boot, counting, and given up after the bound', () => {
    expect(rebootBackAgain(record, back, 'boot-A')).toEqual({ kind: 'retry', attempt: 2 });
    expect(rebootBackAgain(record, { ...back, attempts: 2 }, 'boot-A')).toEqual({
      kind: 'retry',
      attempt: 3,
    });
    const v = rebootBackAgain(record, { ...back, attempts: MAX_REBOOT_ATTEMPTS }, 'boot-A');
    expect(v.kind).toBe('give-up');
    expect(v.kind === 'give-up' && v.message).toMatch(
      /did not reboot back into the previous revision: still boot boot-A after 3 reboot requests/,
    );
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
      await h.ended();
      expect(reboots).toEqual([]);
      expect(await h.intent()).toBeUndefined();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('a failed try after arrival reboots back (rebootsBack); a rollback is never asked to reboot back again', async () => {
    const arrived = await hooks({ ...intent, arrivedBoot: 'boot-B' });
    const notArrived = await hooks(intent);
    const rollingBack = await hooks({ ...intent, purpose: 'rollback' });
    try {
      expect(await arrived.h.rebootsBack(tried)).toBe(true);
      expect(await notArrived.h.rebootsBack(tried)).toBe(false); // RebootFailed: nothing to undo
      expect(await rollingBack.h.rebootsBack(tried)).toBe(false);
      const asked = await arrived.h.rebootBack(tried, 'boot-B');
      expect(asked).toEqual({ kind: 'rebooting', attempt: 1 });
      expect(await arrived.h.intent()).toMatchObject({ purpose: 'rollback', fromBoot: 'boot-B' });
      await arrived.h.ended();
      expect(await arrived.h.intent()).toBeUndefined();
    } finally {
      for (const x of [arrived, notArrived, rollingBack]) {
        await rm(x.dir, { recursive: true, force: true });
      }
    }
  });

  it('a revert never reboots by itself, even after arrival: the reboot back is the rollback boot (rebootBack, then its proof)', async () => {
    const { h, reboots, dir } = await hooks({ ...intent, arrivedBoot: 'boot-B' });
    try {
      const lifecycle: TryLifecycle = h;
      await lifecycle.ended(tried, 'reverted');
      expect(reboots).toEqual([]); // the old hooks rebooted back here, unproven
      expect(await h.intent()).toBeUndefined();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('a crashed try booted into (no intent of its own)', () => {
  const plain = desiredOf(config([], [file('/etc/app.conf', 'v1\n')]));
  const rebootLevel = desiredOf(
    config(
      [],
      [file('/etc/app.conf', 'v1\n'), file('/etc/grub.cfg', 'v2\n', { onChange: 'reboot' })],
    ),
  );
  const restartLevel = desiredOf(config([], [file('/etc/app.conf', 'v2\n')]));
  function hooksOver(applied: Desired, dir: string): RebootHooks {
    return new RebootHooks({
      root: dir,
      stateDir: dir,
      rebooter: { reboot: () => Promise.resolve() },
      tryState: {
        bootToken: () => Promise.resolve('boot-B'),
        confirmed: () => Promise.resolve(plain),
      },
      applier: { lastApplied: () => Promise.resolve(applied) },
    });
  }
  const tryOf = (d: Desired): TryRecord =>
    ({ checksum: d.checksum, grant: { generation: 4 }, boot: 'boot-A' }) as unknown as TryRecord;

  it('needs a boot back when its applied revision is Reboot-level and the machine booted since', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'oscar-reboot-'));
    try {
      expect(await hooksOver(rebootLevel, dir).bootedInto(tryOf(rebootLevel), 'boot-B')).toBe(true);
      // the same boot (the agent restarted): nothing was booted into
      expect(await hooksOver(rebootLevel, dir).bootedInto(tryOf(rebootLevel), 'boot-A')).toBe(
        false,
      );
      // a Restart-level try: the revert alone puts it back
      expect(await hooksOver(restartLevel, dir).bootedInto(tryOf(restartLevel), 'boot-B')).toBe(
        false,
      );
      // its apply never finished (what is applied is not the try's): not told, reverted as before
      expect(await hooksOver(plain, dir).bootedInto(tryOf(rebootLevel), 'boot-B')).toBe(false);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
