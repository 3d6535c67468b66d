// The rollback boot (./rollback-boot.ts, issue 25): a try reverted after its reboot reboots back
// into the previous revision and proves it there before RolledBack. The grant-mode agent on a
// directory root (../testing/grant-harness.ts), its reboots simulated.
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { file } from '../testing/fixtures.js';
import {
  cleanUp,
  grantOf,
  grantRebootLevel,
  onV1,
  setup,
  version,
  waitUntil,
} from '../testing/grant-harness.js';

afterEach(cleanUp);

describe('the rollback boot: reboot back, proof in the old state', () => {
  it('issue 25: a failed check after the reboot rolls back, reboots back, and is RolledBack only once the old state is proven in its boot', async () => {
    const s = await setup();
    const granted = await grantRebootLevel(s, {
      soakMs: 100,
      deadlineMs: 120_000,
      failureThreshold: 2,
    });
    await waitUntil(() => s.reboots.length === 1);
    await s.agent.stop();
    s.checkOk.value = false; // the revision's check fails once booted (and would in v1: not its)
    s.reporter.reports = [];
    const inTry = await s.reboot();
    const rolling = await s.reporter.until('RollingBack');
    expect(rolling.reason).toBe('HealthCheckFailed');
    expect(rolling.message).toMatch(/^rebooting into the previous revision; rolled back: /);
    expect(rolling.previousChecksum).toBe(version('1').checksum);
    expect(await s.read('etc/app/app.conf')).toBe('version 1\n');
    await expect(s.read('etc/default/grub.d/oscar.cfg')).rejects.toThrow();
    await waitUntil(() => s.reboots.length === 2);
    expect(s.reboots[1]).toBe('the revision was rolled back after its reboot');
    expect(await s.read('var/lib/oscar/reboot.json')).toContain('"purpose":"rollback"');
    // not finished before the reboot back: the old code said RolledBack here
    await new Promise((r) => setTimeout(r, 200));
    expect(s.reporter.phases()).not.toContain('RolledBack HealthCheckFailed');
    await inTry.stop();
    s.nodeReady.value = { kind: 'notReady', message: 'Node n still carries the boot before' };
    s.reporter.reports = [];
    await s.reboot(); // back in v1: its Node must be Ready in this boot first
    await waitUntil(() => s.reporter.reports.some((r) => r.message.includes('still carries')));
    const reads = s.nodeReady.reads;
    await waitUntil(() => s.nodeReady.reads >= reads + 3);
    expect(s.reporter.reports.map((r) => r.phase)).not.toContain('RolledBack');
    expect(s.reporter.reports.every((r) => r.phase === 'RollingBack')).toBe(true);
    s.nodeReady.value = { kind: 'ready', message: 'Node n Ready in this boot' };
    const back = await s.reporter.until('RolledBack');
    expect(back.reason).toBe('HealthCheckFailed');
    expect(back.message).toContain('health check app');
    expect(back.message).toMatch(/back in the previous revision after a reboot: healthy for/);
    expect(s.reboots).toHaveLength(2); // nothing rebooted again
    await expect(s.read('var/lib/oscar/reboot.json')).rejects.toThrow();
    await expect(s.read('var/lib/oscar/try.json')).rejects.toThrow();
    // the same grant again (a watch that starts over): the verdict again, no new try
    s.reporter.reports = [];
    s.feed.grant(granted);
    expect((await s.reporter.until('RolledBack')).message).toBe(back.message);
    await new Promise((r) => setTimeout(r, 200));
    expect(s.reporter.phases()).toEqual(['RolledBack HealthCheckFailed']);
    expect(s.reboots).toHaveLength(2);
  });

  it('issue 25: the reboot back that does not happen is asked for 3 times from one boot, then Failed RollbackRebootFailed, Degraded; never again', async () => {
    const s = await setup();
    const granted = await grantRebootLevel(s, {
      soakMs: 100,
      deadlineMs: 120_000,
      failureThreshold: 2,
    });
    await waitUntil(() => s.reboots.length === 1);
    await s.agent.stop();
    s.checkOk.value = false;
    let agent = await s.reboot();
    await s.reporter.until('RollingBack');
    await waitUntil(() => s.reboots.length === 2);
    for (const n of [3, 4]) {
      await agent.stop();
      agent = await s.restartAgent(); // same boot: the reboot back did not happen
      await waitUntil(() => s.reboots.length === n);
    }
    await agent.stop();
    s.reporter.reports = [];
    agent = await s.restartAgent();
    const failed = await s.reporter.until('Failed');
    expect(failed.reason).toBe('RollbackRebootFailed');
    expect(failed.message).toMatch(
      /rolled back \(HealthCheckFailed: .*\), but the node did not reboot back into the previous revision: still boot \w+ after 3 reboot requests/,
    );
    expect(s.reporter.failures).toContain('RollbackRebootFailed'); // Degraded
    expect(s.reboots).toHaveLength(4);
    await expect(s.read('var/lib/oscar/try.json')).rejects.toThrow();
    await expect(s.read('var/lib/oscar/reboot.json')).rejects.toThrow();
    // the grant again, or another start: the same verdict, no reboot, no loop
    await agent.stop();
    s.reporter.reports = [];
    await s.restartAgent();
    s.feed.grant(granted);
    expect((await s.reporter.until('Failed')).reason).toBe('RollbackRebootFailed');
    await new Promise((r) => setTimeout(r, 200));
    expect(s.reboots).toHaveLength(4);
    expect(s.reporter.phases().every((p) => p === 'Failed RollbackRebootFailed')).toBe(true);
  });

  it('issue 25: an old state that fails its proof after the reboot back (its own checks) is Failed RollbackUnhealthy, not rolled back again', async () => {
    const s = await setup();
    await onV1(s);
    // v2 confirmed in a try: its check (app) is what proves it later
    s.feed.grant(grantOf(version('2'), { soakMs: 50, deadlineMs: 5_000 }));
    await s.reporter.until('Confirmed');
    const grub = file('/etc/default/grub.d/oscar.cfg', 'v3\n', { onChange: 'reboot' });
    s.feed.grant(grantOf(version('3', [grub]), { soakMs: 100, deadlineMs: 600 }));
    await waitUntil(() => s.reboots.length === 1);
    await s.agent.stop();
    s.checkOk.value = false; // broken in v3, and in v2 after the reboot back
    const inTry = await s.reboot();
    await s.reporter.until('RollingBack');
    await waitUntil(() => s.reboots.length === 2);
    await inTry.stop();
    s.reporter.reports = [];
    await s.reboot();
    const failed = await s.reporter.until('Failed');
    expect(failed.reason).toBe('RollbackUnhealthy');
    expect(failed.message).toMatch(
      /but the previous revision failed its proof after the reboot back \(HealthCheckFailed: .*health check app/,
    );
    expect(s.reporter.failures).toContain('RollbackUnhealthy');
    expect(await s.read('etc/app/app.conf')).toBe('version 2\n');
    await new Promise((r) => setTimeout(r, 200));
    expect(s.reboots).toHaveLength(2);
    expect(s.reporter.phases()).not.toContain('RolledBack');
  });

  it('issue 25: a Node never Ready after the reboot rolls back (NodeNotReady) and reboots back; never Ready there either: Failed RollbackUnhealthy', async () => {
    const s = await setup();
    await grantRebootLevel(s, { soakMs: 50, deadlineMs: 600 });
    await waitUntil(() => s.reboots.length === 1);
    await s.agent.stop();
    s.nodeReady.value = { kind: 'notReady', message: 'Node n is not Ready (Ready=False)' };
    s.reporter.reports = [];
    const agent = await s.reboot();
    const r = await s.reporter.until('RollingBack');
    expect(r.reason).toBe('NodeNotReady');
    expect(r.message).toContain('Ready=False');
    expect(await s.read('etc/app/app.conf')).toBe('version 1\n');
    await waitUntil(() => s.reboots.length === 2);
    await agent.stop();
    await s.reboot();
    const failed = await s.reporter.until('Failed');
    expect(failed.reason).toBe('RollbackUnhealthy');
    expect(failed.message).toMatch(/failed its proof after the reboot back \(NodeNotReady: /);
    expect(s.reboots).toHaveLength(2);
  });

  it('a newer grant superseding a try after its reboot: RollingBack (Superseded), the reboot back, the old state proven (Node Ready in the new boot) before RolledBack; the newer grant only then', async () => {
    const s = await setup();
    await grantRebootLevel(s, { soakMs: 100, deadlineMs: 120_000 });
    await waitUntil(() => s.reboots.length === 1);
    await s.agent.stop();
    s.reporter.reports = [];
    s.nodeReady.value = { kind: 'notReady', message: 'Node n still carries the boot before' };
    const inTry = await s.reboot(); // verifying the try in the boot it rebooted into
    await waitUntil(() => s.reporter.reports.some((r) => r.reason === 'NodeNotReady'));
    const newer = grantOf(version('3'), { try: false });
    s.feed.grant(newer);
    const rolling = await s.reporter.until('RollingBack');
    expect(rolling.reason).toBe('Superseded');
    expect(rolling.message).toMatch(
      /^rebooting into the previous revision; rolled back: revision \d+ was granted instead/,
    );
    await waitUntil(() => s.reboots.length === 2);
    expect(s.reboots[1]).toBe('the revision was rolled back after its reboot');
    expect(await s.read('var/lib/oscar/reboot.json')).toContain('"purpose":"rollback"');
    // the newer grant waits for the boot back: the old hooks rebooted unproven and applied it
    await new Promise((r) => setTimeout(r, 200));
    expect(await s.read('etc/app/app.conf')).toBe('version 1\n');
    expect(s.reporter.phases()).not.toContain('Confirmed Applied');
    await inTry.stop();
    s.reporter.reports = [];
    await s.reboot(); // back in v1; the grant source delivers the node's grant again
    s.feed.grant(newer);
    await waitUntil(() => s.reporter.reports.some((r) => r.message.includes('still carries')));
    const reads = s.nodeReady.reads;
    await waitUntil(() => s.nodeReady.reads >= reads + 3);
    expect(s.reporter.phases().every((p) => p === 'RollingBack Superseded')).toBe(true);
    expect(await s.read('etc/app/app.conf')).toBe('version 1\n');
    s.nodeReady.value = { kind: 'ready', message: 'Node n Ready in this boot' };
    const back = await s.reporter.until('RolledBack');
    expect(back.reason).toBe('Superseded');
    expect(back.message).toMatch(/back in the previous revision after a reboot: /);
    const applied = await s.reporter.until('Confirmed');
    expect(applied.number).toBe(newer.grant.number);
    expect(await s.read('etc/app/app.conf')).toBe('version 3\n');
    expect(s.reporter.phases()).toEqual([
      ...s.reporter.phases().filter((p) => p === 'RollingBack Superseded'),
      'RolledBack Superseded',
      'Confirmed Applied',
    ]);
    expect(s.reboots).toHaveLength(2);
  });

  it('a crash-revert at start of a Reboot-level try the machine booted into without its intent: RollingBack (Reboot), the reboot back, RolledBack only once proven there', async () => {
    const s = await setup();
    await grantRebootLevel(s, { soakMs: 100, deadlineMs: 120_000 });
    await waitUntil(() => s.reboots.length === 1);
    await s.agent.stop();
    // the machine went down before the agent's own reboot was journaled (a power cut): no intent
    await rm(join(s.stateDir, 'reboot.json'));
    s.reporter.reports = [];
    const crashed = await s.reboot();
    const rolling = await s.reporter.until('RollingBack');
    expect(rolling.reason).toBe('Reboot');
    expect(rolling.message).toMatch(
      /^rebooting into the previous revision; rolled back: the machine restarted before the revision was confirmed/,
    );
    expect(await s.read('etc/app/app.conf')).toBe('version 1\n');
    await expect(s.read('etc/default/grub.d/oscar.cfg')).rejects.toThrow();
    // the old agent said RolledBack here, in the boot made from the try's files
    await waitUntil(() => s.reboots.length === 2);
    expect(s.reporter.phases()).not.toContain('RolledBack Reboot');
    await crashed.stop();
    s.nodeReady.value = { kind: 'notReady', message: 'Node n still carries the boot before' };
    s.reporter.reports = [];
    await s.reboot();
    await waitUntil(() => s.reporter.reports.some((r) => r.message.includes('still carries')));
    expect(s.reporter.phases()).not.toContain('RolledBack Reboot');
    s.nodeReady.value = { kind: 'ready', message: 'Node n Ready in this boot' };
    const back = await s.reporter.until('RolledBack');
    expect(back.reason).toBe('Reboot');
    expect(back.message).toMatch(/back in the previous revision after a reboot: healthy for/);
    expect(s.reboots).toHaveLength(2);
    await expect(s.read('var/lib/oscar/try.json')).rejects.toThrow();
  });
});
