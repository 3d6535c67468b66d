// The grant-mode agent on a directory root with the real executor, planner, journal and try
// state on disk (../testing/grant-harness.ts); the rollback boot's own tests are in
// ./rollback-boot.test.ts.
import { mkdir, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../log/logger.js';
import { nodeApplier } from '../applier.js';
import { LocalSystemd } from '../systemd.js';
import { config, desiredOf, file, unit } from '../testing/fixtures.js';
import {
  cleanUp,
  cleanups,
  generation,
  grantOf,
  grantRebootLevel,
  onV1,
  setup,
  version,
  waitUntil,
} from '../testing/grant-harness.js';
import { grantedAgent } from './grant-admission.js';
import { TryState } from './try-state.js';

afterEach(cleanUp);

describe('the agent in grant mode', () => {
  it('a plain grant is applied and confirmed at once', async () => {
    const s = await setup();
    await s.agent.start();
    expect(s.reporter.source).toBe('Grant');
    s.feed.grant(grantOf(version('1'), { try: false }));
    const r = await s.reporter.until('Confirmed');
    expect(r.reason).toBe('Applied');
    expect(await s.read('etc/app/app.conf')).toBe('version 1\n');
    expect(await s.read('var/lib/oscar/confirmed.json')).toBe(version('1').bytes.toString());
  });

  it('a granted revision that oscar validate would refuse is reported InvalidConfig, touches nothing, is not retried', async () => {
    const s = await setup();
    await onV1(s);
    s.feed.grant(grantOf(version('2', [file('/etc/app/../../root/.profile', 'x')])));
    const r = await s.reporter.until('Failed');
    expect(r.reason).toBe('InvalidConfig');
    expect(r.message).toMatch(/is invalid, so it is not applied[\s\S]*spec\.files\[\d\]\.path/);
    await new Promise((res) => setTimeout(res, 300)); // retries would come every 50-100 ms
    expect(s.reporter.phases()).toEqual(['Failed InvalidConfig']);
    expect(await s.read('etc/app/app.conf')).toBe('version 1\n');
  });

  it('a try writing into its own --state-dir is refused before anything is touched: no revert, the try ends', async () => {
    const s = await setup({ stateRel: 'opt/oscar-state' });
    await onV1(s);
    s.feed.grant(grantOf(version('2', [file('/opt/oscar-state/last-applied.json', '{}')])));
    const r = await s.reporter.until('Failed');
    expect(r.reason).toBe('InvalidConfig');
    expect(r.message).toMatch(/this agent's own state directory/);
    await new Promise((res) => setTimeout(res, 300));
    expect(s.reporter.phases()).toEqual(['Failed InvalidConfig']);
    expect(await s.read('etc/app/app.conf')).toBe('version 1\n');
    expect(await s.read('opt/oscar-state/last-applied.json')).toBe(version('1').bytes.toString());
    await expect(stat(join(s.stateDir, 'try.json'))).rejects.toThrow(/ENOENT/);
  });

  it('try mode: healthy for the soak time and the API reached → confirmed', async () => {
    const s = await setup();
    await onV1(s);
    const restarts = s.feed.restarts;
    s.feed.grant(grantOf(version('2')));
    const r = await s.reporter.until('Confirmed');
    expect(r.reason).toBe('Healthy');
    expect(s.reporter.phases()).toEqual(['Verifying', 'Confirmed Healthy']);
    expect(s.feed.restarts).toBe(restarts + 1); // the watch was reopened for the proof
    expect(await s.read('etc/app/app.conf')).toBe('version 2\n');
    await expect(stat(join(s.stateDir, 'try.json'))).rejects.toThrow(/ENOENT/);
  });

  it('a failing health check rolls back: files byte-identical, a foreign file it replaced restored', async () => {
    const s = await setup();
    await mkdir(join(s.root, 'etc'), { recursive: true });
    await writeFile(join(s.root, 'etc/hosts'), '127.0.0.1 localhost # mine\n', { mode: 0o640 });
    await onV1(s);
    const before = await s.read('etc/app/app.conf');
    s.checkOk.value = false;
    const bad = grantOf(
      version('2', [file('/etc/hosts', '192.0.2.1 api\n'), file('/etc/new.conf', 'x')]),
    );
    s.feed.grant(bad);
    const r = await s.reporter.until('RolledBack');
    expect(r.reason).toBe('HealthCheckFailed');
    expect(r.message).toMatch(/health check app: exit 1: down/);
    expect(r.previousChecksum).toBe(version('1').checksum);
    expect(await s.read('etc/app/app.conf')).toBe(before);
    expect(await s.read('etc/hosts')).toBe('127.0.0.1 localhost # mine\n');
    expect((await stat(join(s.root, 'etc/hosts'))).mode & 0o777).toBe(0o640);
    await expect(stat(join(s.root, 'etc/new.conf'))).rejects.toThrow(/ENOENT/);
    expect(await s.read('var/lib/oscar/last-applied.json')).toBe(version('1').bytes.toString());
    // the same grant again is not tried again
    s.reporter.reports = [];
    s.checkOk.value = true;
    await s.agent.stop();
    const again = s.newAgent();
    await again.start();
    s.feed.grant(bad);
    expect((await s.reporter.until('RolledBack')).reason).toBe('HealthCheckFailed');
    expect(await s.read('etc/app/app.conf')).toBe(before);
  });

  it('a check failing failureThreshold times in a row rolls back at once, before the deadline', async () => {
    const s = await setup();
    await onV1(s);
    s.checkOk.value = false;
    const t0 = Date.now();
    s.feed.grant(grantOf(version('2'), { deadlineMs: 60_000, failureThreshold: 3 }));
    const r = await s.reporter.until('RolledBack');
    expect(r.reason).toBe('HealthCheckFailed');
    expect(r.message).toMatch(/\(3 times in a row\)/);
    expect(Date.now() - t0).toBeLessThan(5_000);
  });

  it('no status write or watch event over fresh connections by the deadline → rolled back (APIUnreachable)', async () => {
    const s = await setup();
    await onV1(s);
    s.reporter.writes = false;
    s.feed.grant(grantOf(version('2')));
    const r = await s.reporter.until('RolledBack');
    expect(r.reason).toBe('APIUnreachable');
    expect(await s.read('etc/app/app.conf')).toBe('version 1\n');
  });

  it('a unit systemd gave up on rolls back at once, before the deadline', async () => {
    const s = await setup();
    await onV1(s);
    s.unitState.value = { active: 'failed', sub: 'failed', result: 'exit-code' };
    const t0 = Date.now();
    s.feed.grant(grantOf(version('2'), { deadlineMs: 60_000 }));
    const r = await s.reporter.until('RolledBack');
    expect(r.reason).toBe('UnitFailed');
    expect(Date.now() - t0).toBeLessThan(5_000);
  });

  it('issue 25: a Reboot-level revision reboots, is verified after the boot and confirmed', async () => {
    const s = await setup();
    await onV1(s);
    const grub = file('/etc/default/grub.d/oscar.cfg', 'GRUB_CMDLINE_LINUX=x\n', {
      onChange: 'reboot',
    });
    s.feed.grant(grantOf(version('2', [grub]), { soakMs: 100, deadlineMs: 5_000 }));
    const rebooting = await s.reporter.until('Verifying');
    expect(rebooting.reason).toBe('Rebooting');
    await waitUntil(() => s.reboots.length === 1);
    expect(s.reboots).toEqual(['file /etc/default/grub.d/oscar.cfg (onChange: reboot)']);
    expect(await s.read('var/lib/oscar/reboot.json')).toContain('"purpose":"apply"');
    await s.agent.stop();
    s.reporter.reports = [];
    await s.reboot(); // not mistaken for a crash: verified on, then confirmed
    const r = await s.reporter.until('Confirmed');
    expect(r.reason).toBe('Healthy');
    expect(await s.read('etc/default/grub.d/oscar.cfg')).toBe('GRUB_CMDLINE_LINUX=x\n');
    expect(s.reporter.reports.map((x) => x.phase)).not.toContain('RolledBack');
    await expect(s.read('var/lib/oscar/reboot.json')).rejects.toThrow();
  });

  it('issue 25: after the reboot the Node must be Ready in this boot before the soak; then confirmed', async () => {
    const s = await setup();
    await grantRebootLevel(s, { soakMs: 50, deadlineMs: 10_000 });
    await waitUntil(() => s.reboots.length === 1);
    expect(s.nodeReady.reads).toBe(0); // before the reboot the Node is not looked at
    await s.agent.stop();
    s.nodeReady.value = { kind: 'notReady', message: 'Node n still carries the boot before' };
    s.reporter.reports = [];
    await s.reboot();
    const waiting = await s.reporter.until('Verifying');
    expect(waiting.reason).toBe('NodeNotReady');
    expect(waiting.message).toContain('still carries the boot before');
    await waitUntil(() => s.nodeReady.reads >= 3);
    expect(s.reporter.phases()).not.toContain('Confirmed'); // not while the Node is not Ready
    s.nodeReady.value = { kind: 'ready', message: 'Node n Ready in this boot' };
    expect((await s.reporter.until('Confirmed')).reason).toBe('Healthy');
    expect(s.reboots).toHaveLength(1);
  });

  it('issue 25: a machine without a Node (no kubelet) is not held up by the Ready check', async () => {
    const s = await setup();
    await grantRebootLevel(s, { soakMs: 50, deadlineMs: 10_000 });
    await waitUntil(() => s.reboots.length === 1);
    await s.agent.stop();
    s.nodeReady.value = { kind: 'absent', message: 'no Node named n' };
    s.reporter.reports = [];
    await s.reboot();
    expect((await s.reporter.until('Confirmed')).reason).toBe('Healthy');
    expect(s.nodeReady.reads).toBe(1);
  });

  it('issue 25: a reboot that never happens is asked for 3 times in the same boot, then rolled back (RebootFailed) without a reboot back', async () => {
    const s = await setup();
    await grantRebootLevel(s, { soakMs: 60_000, deadlineMs: 120_000 });
    const boot = (await s.read('run/oscar/boot-token')).trim();
    // `systemctl reboot` returns, but the machine never goes down: systemd restarts the agent
    // in the very same boot (/run kept), which finds its own intent unfinished
    let agent = s.agent;
    for (let requested = 1; requested <= 3; requested++) {
      await waitUntil(() => s.reboots.length === requested);
      expect(s.reporter.reports.at(-1)?.reason).toBe('Rebooting');
      await agent.stop();
      agent = s.newAgent();
      await agent.start();
    }
    const r = await s.reporter.until('RolledBack');
    expect(r.reason).toBe('RebootFailed');
    expect(r.message).toBe(`the node did not reboot: still boot ${boot} after 3 reboot requests`);
    expect(r.previousChecksum).toBe(version('1').checksum);
    await agent.stop(); // the try's end (the lifecycle's) runs after the report: let it finish
    expect((await s.read('run/oscar/boot-token')).trim()).toBe(boot); // one boot throughout
    expect(await s.read('etc/app/app.conf')).toBe('version 1\n');
    await expect(s.read('etc/default/grub.d/oscar.cfg')).rejects.toThrow(/ENOENT/);
    await expect(stat(join(s.stateDir, 'try.json'))).rejects.toThrow(/ENOENT/);
    await expect(stat(join(s.stateDir, 'reboot.json'))).rejects.toThrow(/ENOENT/);
    // the reboot never happened, so there is no boot to undo: the three requests stay three
    expect(s.reboots).toEqual(
      Array<string>(3).fill('file /etc/default/grub.d/oscar.cfg (onChange: reboot)'),
    );
  });

  it('issue 25: a crash during a Reboot-level try that never rebooted on purpose is a crash (reverted; booted into, so it reboots back: rollback-boot.test.ts)', async () => {
    const s = await setup();
    await grantRebootLevel(s, { soakMs: 60_000, deadlineMs: 120_000 });
    await waitUntil(() => s.reboots.length === 1);
    await s.agent.stop();
    // the intent names another try: a stale or foreign intent never vouches for a boot
    const intent = JSON.parse(await s.read('var/lib/oscar/reboot.json')) as { generation: number };
    intent.generation += 100;
    await writeFile(join(s.stateDir, 'reboot.json'), JSON.stringify(intent));
    s.reporter.reports = [];
    await s.reboot();
    expect((await s.reporter.until('RollingBack')).reason).toBe('Reboot');
    expect(await s.read('etc/app/app.conf')).toBe('version 1\n');
    await waitUntil(() => s.reboots.length === 2);
    expect(await s.read('var/lib/oscar/reboot.json')).toContain('"purpose":"rollback"');
  });

  it('a try left by an earlier boot is reverted at start, before any grant arrives', async () => {
    const s = await setup();
    await onV1(s);
    s.feed.grant(grantOf(version('2'), { soakMs: 60_000, deadlineMs: 120_000 }));
    await s.reporter.until('Verifying');
    await s.agent.stop();
    expect(await s.read('etc/app/app.conf')).toBe('version 2\n');
    await rm(join(s.root, 'run/oscar/boot-token')); // /run is empty after a reboot
    s.reporter.reports = [];
    const rebooted = s.newAgent();
    await rebooted.start();
    const r = await s.reporter.until('RolledBack');
    expect(r.reason).toBe('Reboot');
    expect(await s.read('etc/app/app.conf')).toBe('version 1\n');
  });

  it('an agent restarted during a try verifies on from try.json, without the API server', async () => {
    const s = await setup();
    await onV1(s);
    s.feed.grant(grantOf(version('2'), { soakMs: 100, deadlineMs: 1_000 }));
    await s.reporter.until('Verifying');
    await s.agent.stop();
    s.reporter.reports = [];
    s.reporter.writes = false; // the API is gone: the deadline decides
    const again = s.newAgent();
    await again.start();
    expect((await s.reporter.until('RolledBack')).reason).toBe('APIUnreachable');
    expect(await s.read('etc/app/app.conf')).toBe('version 1\n');
  });

  it('an apply that fails in try mode is undone: nothing of it stays', async () => {
    const s = await setup();
    await onV1(s);
    // a file owned by a user the root does not know: the write fails midway through the plan
    const broken = desiredOf(
      config(
        [unit('app.service', { filePaths: ['/etc/app/app.conf'] })],
        [
          file('/etc/a-first.conf', 'new\n'),
          file('/etc/app/app.conf', 'version 2\n'),
          file('/etc/z.conf', 'z', { user: 'nobody-here' }),
        ],
      ),
    );
    const owners = grantedAgent({
      source: s.feed,
      reporter: s.reporter,
      applier: nodeApplier({
        root: s.root,
        stateDir: s.stateDir,
        systemd: new LocalSystemd(s.root, join(s.stateDir, 'would-run.log')),
        owners: true,
      }),
      tryState: new TryState(s.stateDir, s.root),
      health: { run: (c) => Promise.resolve({ name: c.name, ok: true, message: '' }) },
      units: {
        state: () =>
          Promise.resolve({ active: 'active', sub: '', result: '', type: '', restarts: 0 }),
      },
      scope: { namespace: 'ns', osc: 'w' },
      owners: false,
      log: silentLogger(),
      tickMs: 20,
    });
    await s.agent.stop();
    cleanups.push(() => owners.stop());
    await owners.start();
    s.feed.grant(grantOf(broken));
    const r = await s.reporter.until('RolledBack');
    expect(r.reason).toBe('ApplyFailed');
    await expect(stat(join(s.root, 'etc/a-first.conf'))).rejects.toThrow(/ENOENT/);
    expect(await s.read('etc/app/app.conf')).toBe('version 1\n');
  });

  it('a node that never confirmed anything here (it followed the Secret) rolls back to what it carried', async () => {
    const s = await setup();
    // v1 applied by an earlier agent in Secret mode: last-applied, no confirmed.json
    const { applyDesired } = await import('../apply.js');
    await applyDesired(
      {
        root: s.root,
        stateDir: s.stateDir,
        systemd: new LocalSystemd(s.root, join(s.stateDir, 'would-run.log')),
        owners: false,
      },
      version('1'),
    );
    await s.agent.start();
    s.checkOk.value = false;
    s.feed.grant(grantOf(version('2')));
    expect((await s.reporter.until('RolledBack')).previousChecksum).toBe(version('1').checksum);
    expect(await s.read('etc/app/app.conf')).toBe('version 1\n');
  });

  it('a new grant during a verification ends it; going back to the confirmed revision is plain', async () => {
    const s = await setup();
    await onV1(s);
    s.feed.grant(grantOf(version('2'), { soakMs: 60_000, deadlineMs: 120_000 }));
    await s.reporter.until('Verifying');
    s.feed.grant(grantOf(version('1'), { try: false }));
    const r = await s.reporter.until('Confirmed');
    expect(r.number).toBe(generation);
    expect(await s.read('etc/app/app.conf')).toBe('version 1\n');
    await expect(stat(join(s.stateDir, 'try.json'))).rejects.toThrow(/ENOENT/);
  });
});

describe('the agent in grant mode, with drift detection', () => {
  const until = async (what: string, ok: () => Promise<boolean> | boolean): Promise<void> => {
    const t = Date.now() + 5000;
    while (!(await ok())) {
      if (Date.now() > t) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };

  it("the grants' own applies, plain and tried, are never drift; an edit is reported and, with Revert, put back", async () => {
    const s = await setup({ drift: true });
    await s.agent.start();
    s.feed.grant(grantOf(version('1', [], 'Revert'), { try: false }));
    await s.reporter.until('Confirmed');
    s.reporter.reports = [];
    s.feed.grant(grantOf(version('2', [], 'Revert')));
    await s.reporter.until('Confirmed');
    await new Promise((r) => setTimeout(r, 100)); // the watch's quiet time, twice over
    expect(s.drifted.filter((items) => items.length > 0)).toEqual([]);

    await writeFile(join(s.root, 'etc/app/app.conf'), 'edited by hand\n');
    await until('the revert', async () => (await s.read('etc/app/app.conf')) === 'version 2\n');
    expect(s.drifted).toContainEqual(['/etc/app/app.conf content']);
    await until(
      'the report of the revert',
      () => s.reporter.sequence.at(-1)?.startsWith('reverted') === true,
    );
    expect(s.reporter.sequence.at(-1)).toBe('reverted: restart app.service');
    // the monitor's check after the revert clears the report; under load it may come a moment later
    await until('the drift report cleared', () => s.drifted.at(-1)?.length === 0);
  });

  it("a revert waits for the try's verdict, then puts back what the confirmed revision holds", async () => {
    const s = await setup({ drift: true });
    await s.agent.start();
    s.feed.grant(grantOf(version('1', [], 'Revert'), { try: false }));
    await s.reporter.until('Confirmed');
    s.reporter.reports = [];
    s.reporter.sequence = [];
    s.feed.grant(grantOf(version('2', [], 'Revert'), { soakMs: 600, deadlineMs: 3000 }));
    await s.reporter.until('Verifying');
    await writeFile(join(s.root, 'etc/app/app.conf'), 'edited during the try\n');
    await until('the drift report', () =>
      s.drifted.some((items) => items.includes('/etc/app/app.conf content')),
    );
    expect(await s.read('etc/app/app.conf')).toBe('edited during the try\n'); // not yet
    await s.reporter.until('Confirmed');
    await until('the revert', async () => (await s.read('etc/app/app.conf')) === 'version 2\n');
    // the file is back a moment before the revert's report is sent
    await until(
      'the report of the revert',
      () => s.reporter.sequence.at(-1)?.startsWith('reverted') === true,
    );
    expect(s.reporter.sequence).toEqual([
      'Verifying',
      'Confirmed',
      'reverted: restart app.service',
    ]);
  });

  it('Report: an edit is reported and stays', async () => {
    const s = await setup({ drift: true });
    await s.agent.start();
    s.feed.grant(grantOf(version('1'), { try: false }));
    await s.reporter.until('Confirmed');
    await writeFile(join(s.root, 'etc/app/app.conf'), 'tuned\n');
    await until('the drift report', () =>
      s.drifted.some((items) => items.includes('/etc/app/app.conf content')),
    );
    await new Promise((r) => setTimeout(r, 200));
    expect(await s.read('etc/app/app.conf')).toBe('tuned\n');
    expect(s.reporter.sequence.filter((e) => e.startsWith('reverted'))).toEqual([]);
  });
});
