import {
  lstat,
  mkdir,
  mkdtemp,
  readFile,
  readdir,
  rm,
  stat,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { applyDesired, ApplyError, planFor, ReplacementNeeded } from './apply.js';
import { InvalidConfigError } from '../api/validate-config.js';
import { Journal } from './journal.js';
import { readLastApplied } from './state.js';
import { LocalSystemd, type Systemd } from './systemd.js';
import { config, desiredOf, file, unit } from './testing/fixtures.js';

let root: string;
let stateDir: string;
let systemd: LocalSystemd;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'oscar-apply-'));
  stateDir = join(root, 'var/lib/oscar');
  await mkdir(stateDir, { recursive: true });
  systemd = new LocalSystemd(root, join(stateDir, 'would-run.log'));
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

const deps = (s: Systemd = systemd) => ({ root, stateDir, systemd: s, owners: false });

const v1 = config(
  [unit('a.service', { filePaths: ['/etc/a/a.conf'] }), unit('b.service', { onChange: 'reload' })],
  [file('/etc/a/a.conf', 'a=1\n', { mode: 0o640 }), file('/etc/other', 'o\n')],
);

const jobs = async (): Promise<string[]> =>
  (await systemd.loggedJobs()).map((j) => `${j.job} ${j.unit}`.trim());

describe('applyDesired into a directory root', () => {
  it('writes files with their mode, units, enables them and logs the jobs a node would run', async () => {
    const r = await applyDesired(deps(), desiredOf(v1));
    expect(r.resumed).toBe(false);
    expect(await readFile(join(root, 'etc/a/a.conf'), 'utf8')).toBe('a=1\n');
    expect((await stat(join(root, 'etc/a/a.conf'))).mode & 0o7777).toBe(0o640);
    expect((await stat(join(root, 'etc/a'))).mode & 0o7777).toBe(0o755);
    expect(
      (
        await lstat(join(root, 'etc/systemd/system/multi-user.target.wants/a.service'))
      ).isSymbolicLink(),
    ).toBe(true);
    expect(await jobs()).toEqual(['daemon-reload', 'start a.service', 'start b.service']);
    expect((await readLastApplied(stateDir))?.checksum).toBe(desiredOf(v1).checksum);
    // no temp files or journal left behind
    expect((await readdir(join(root, 'etc/a'))).sort()).toEqual(['a.conf']);
    expect((await readdir(stateDir)).sort()).toEqual(['last-applied.json', 'would-run.log']);
  });

  it('a second apply of the same config does nothing; a change touches only what changed', async () => {
    await applyDesired(deps(), desiredOf(v1));
    const again = await applyDesired(deps(), desiredOf(v1));
    expect(again.actions).toEqual([]);
    const v2 = structuredClone(v1);
    v2.files = [file('/etc/a/a.conf', 'a=2\n', { mode: 0o640 }), file('/etc/other', 'o\n')];
    const r = await applyDesired(deps(), desiredOf(v2));
    expect(r.actions.map((a) => a.kind)).toEqual(['writeFile', 'restart']);
    expect(r.touchedUnits.map((u) => `${u.action} ${u.name}`)).toEqual(['restart a.service']);
    expect((await jobs()).slice(-1)).toEqual(['restart a.service']);
  });

  it('repairs drift and never removes a file it did not write', async () => {
    await applyDesired(deps(), desiredOf(v1));
    await writeFile(join(root, 'etc/a/a.conf'), 'tampered');
    await writeFile(join(root, 'etc/mine'), 'not oscar');
    const next = config(v1.units, [file('/etc/a/a.conf', 'a=1\n', { mode: 0o640 })]);
    const planned = await planFor(deps(), desiredOf(next));
    expect(planned.map((a) => a.kind)).toEqual(['writeFile', 'removeFile', 'restart']);
    await applyDesired(deps(), desiredOf(next));
    expect(await readFile(join(root, 'etc/a/a.conf'), 'utf8')).toBe('a=1\n');
    expect(await readFile(join(root, 'etc/mine'), 'utf8')).toBe('not oscar');
    await expect(stat(join(root, 'etc/other'))).rejects.toThrow(/ENOENT/);
  });

  it('resumes a journaled plan: done actions are skipped, a begun restart whose unit restarted is not repeated', async () => {
    await applyDesired(deps(), desiredOf(v1));
    const v2 = config(
      [
        unit('a.service', {
          filePaths: ['/etc/a/a.conf'],
          content: '[Service]\nExecStart=/bin/x\n[Install]\nWantedBy=multi-user.target\n',
        }),
        unit('b.service', {
          onChange: 'reload',
          content:
            '[Service]\nExecStart=/bin/y\nExecReload=/bin/true\n[Install]\nWantedBy=multi-user.target\n',
        }),
      ],
      v1.files,
    );
    const d2 = desiredOf(v2);
    const actions = await planFor(deps(), d2);
    expect(actions.map((a) => a.kind)).toEqual([
      'writeFile',
      'writeFile',
      'daemonReload',
      'restart',
      'reload',
    ]);
    // simulate an agent killed right after restarting a.service, before journaling "done"
    const journal = await Journal.start(stateDir, d2.checksum, actions);
    for (const i of [0, 1, 2]) await journal.done(i);
    await journal.begin(3, await systemd.invocation('a.service'));
    await systemd.job('restart', 'a.service');
    const before = (await jobs()).length;
    const r = await applyDesired(deps(), d2);
    expect(r.resumed).toBe(true);
    // files were not written again (the crash happened after); a.service is not restarted twice
    expect((await jobs()).slice(before)).toEqual(['reload b.service']);
    expect((await jobs()).filter((j) => j === 'restart a.service')).toHaveLength(1);
    expect((await readLastApplied(stateDir))?.checksum).toBe(d2.checksum);
  });

  // red-team round 3: the journal is a file on disk; resuming it must stay inside the configs
  it('a journal of this config naming what no config declares is not resumed: nothing foreign removed, stopped or disabled', async () => {
    await applyDesired(deps(), desiredOf(v1));
    await writeFile(join(root, 'etc/mine'), 'not oscar');
    const d = desiredOf(config(v1.units, [file('/etc/a/a.conf', 'a=2\n', { mode: 0o640 })]));
    for (const foreign of [
      { kind: 'removeFile' as const, path: '/etc/mine', reason: 'forged' },
      { kind: 'disable' as const, unit: 'oscar-agent.service', reason: 'forged' },
      { kind: 'stop' as const, unit: 'sshd.service', reason: 'forged' },
      { kind: 'installPackages' as const, packages: [{ name: 'netcat' }], reason: 'forged' },
    ]) {
      await Journal.start(stateDir, d.checksum, [foreign]);
      const r = await applyDesired(deps(), d);
      expect(r.resumed).toBe(false);
      expect(await readFile(join(root, 'etc/mine'), 'utf8')).toBe('not oscar');
      expect((await jobs()).filter((j) => /oscar-agent|sshd/.test(j))).toEqual([]);
      await applyDesired(deps(), desiredOf(v1)); // back, for the next forged action
    }
  });

  it("a journaled write takes mode and owner from the desired config, not the journal's copy", async () => {
    await applyDesired(deps(), desiredOf(v1));
    const d = desiredOf(config(v1.units, [file('/etc/a/a.conf', 'a=2\n', { mode: 0o640 })]));
    const [write] = await planFor(deps(), d);
    expect(write?.kind).toBe('writeFile');
    await Journal.start(stateDir, d.checksum, [
      { ...(write as Extract<typeof write, { kind: 'writeFile' }>), mode: 0o4777 },
    ]);
    const r = await applyDesired(deps(), d);
    expect(r.resumed).toBe(true);
    expect((await stat(join(root, 'etc/a/a.conf'))).mode & 0o7777).toBe(0o640);
  });

  it('a journal of another config is dropped and the new one planned from last-applied', async () => {
    await applyDesired(deps(), desiredOf(v1));
    await Journal.start(stateDir, 'f'.repeat(64), []);
    const r = await applyDesired(deps(), desiredOf(v1));
    expect(r.resumed).toBe(false);
    expect(await Journal.read(stateDir)).toBeUndefined();
  });

  it('a failing unit job fails the apply with the unit and its journal, keeps the last good state, and resumes on retry', async () => {
    await applyDesired(deps(), desiredOf(v1));
    const good = await readLastApplied(stateDir);
    let fail = true;
    const flaky: Systemd = {
      daemonReload: () => systemd.daemonReload(),
      unitFile: (op, u) => systemd.unitFile(op, u),
      invocation: (u) => systemd.invocation(u),
      journal: () =>
        Promise.resolve(['a.service: Main process exited, code=exited, status=1/FAILURE']),
      job: async (job, u) => {
        if (fail && u === 'a.service') throw new Error('Job for a.service failed');
        await systemd.job(job, u);
      },
    };
    const v2 = config(v1.units, [
      file('/etc/a/a.conf', 'broken', { mode: 0o640 }),
      file('/etc/other', 'o\n'),
    ]);
    const error = await applyDesired(deps(flaky), desiredOf(v2)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApplyError);
    expect((error as ApplyError).unit).toBe('a.service');
    expect((error as ApplyError).journal).toEqual([
      'a.service: Main process exited, code=exited, status=1/FAILURE',
    ]);
    expect((error as ApplyError).message).toMatch(
      /restart a.service failed: Job for a.service failed/,
    );
    expect((await readLastApplied(stateDir))?.checksum).toBe(good?.checksum);
    fail = false;
    const r = await applyDesired(deps(flaky), desiredOf(v2));
    expect(r.resumed).toBe(true);
    expect(r.actions.map((a) => a.kind)).toEqual(['restart']);
    expect((await readLastApplied(stateDir))?.checksum).toBe(desiredOf(v2).checksum);
  });

  it('a write that fails in a batch: the ones before it are done, none after it shows, no temp file stays; the retry resumes', async () => {
    await mkdir(join(root, 'etc'), { recursive: true });
    await writeFile(join(root, 'etc/blocked'), 'a file where a directory must go\n');
    const c = config(
      [],
      [
        file('/etc/a/1.conf', '1\n'),
        file('/etc/blocked/2.conf', '2\n'),
        file('/etc/c/3.conf', '3\n'),
      ],
    );
    const error = await applyDesired(deps(), desiredOf(c)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApplyError);
    expect((error as ApplyError).message).toMatch(/^write \/etc\/blocked\/2\.conf .* failed: /);
    expect(await readFile(join(root, 'etc/a/1.conf'), 'utf8')).toBe('1\n');
    await expect(lstat(join(root, 'etc/c/3.conf'))).rejects.toThrow(/ENOENT/);
    expect((await readdir(join(root, 'etc/c'))).filter((n) => n.includes('oscar-tmp'))).toEqual([]);
    expect([...((await Journal.read(stateDir))?.done ?? [])]).toEqual([0]);
    await rm(join(root, 'etc/blocked'));
    const r = await applyDesired(deps(), desiredOf(c));
    expect(r.resumed).toBe(true);
    expect(r.actions.map((a) => (a.kind === 'writeFile' ? a.path : a.kind))).toEqual([
      '/etc/blocked/2.conf',
      '/etc/c/3.conf',
    ]);
    expect(await planFor(deps(), desiredOf(c))).toEqual([]);
  });

  it("sets owners from the root's own /etc/passwd when running as root, and names unknown users clearly", async (ctx) => {
    if (process.getuid?.() !== 0) return ctx.skip('chown needs root');
    await mkdir(join(root, 'etc'), { recursive: true });
    await writeFile(
      join(root, 'etc/passwd'),
      'root:x:0:0::/root:/bin/sh\nsvc:x:4242:4243::/:/bin/false\n',
    );
    await writeFile(join(root, 'etc/group'), 'root:x:0:\nsvc:x:4243:\n');
    const c = config([], [file('/etc/svc.conf', 's', { user: 'svc', group: 'svc', mode: 0o600 })]);
    await applyDesired({ ...deps(), owners: true }, desiredOf(c));
    const st = await stat(join(root, 'etc/svc.conf'));
    expect([st.uid, st.gid, st.mode & 0o7777]).toEqual([4242, 4243, 0o600]);
    expect(await planFor({ ...deps(), owners: true }, desiredOf(c))).toEqual([]);
    const bad = config([], [file('/etc/x.conf', 's', { user: 'nosuch' })]);
    await expect(applyDesired({ ...deps(), owners: true }, desiredOf(bad))).rejects.toThrow(
      /user "nosuch" does not exist in .*\/etc\/passwd/,
    );
  });
});

describe('packages', () => {
  const withPackages = {
    ...v1,
    files: [...v1.files, file('/etc/app/owned', 'o\n', { user: 'app', group: 'app' })],
    packages: [{ name: 'chrony' }, { name: 'jq', version: '1.6' }],
  };

  /**
   * A package manager stand-in that notes, at each install, whether the root's files and the
   * file owned by a user a package would create were there yet.
   */
  function recordingPackages() {
    const calls: string[] = [];
    const there = (path: string): Promise<string> =>
      stat(join(root, path)).then(
        () => 'written',
        () => 'not yet',
      );
    return {
      calls,
      fail: false,
      async install(this: { fail: boolean }, p: readonly { name: string }[]): Promise<void> {
        const written = `root's files ${await there('etc/a/a.conf')}, app's file ${await there('etc/app/owned')}`;
        calls.push(`install ${p.map((x) => x.name).join(' ')} (${written})`);
        if (this.fail) throw new Error('E: Unable to locate package chrony');
      },
    };
  }

  it("are installed after the root's files, before files of other owners, once; a failure keeps the last good state and the retry installs", async () => {
    const packages = recordingPackages();
    packages.fail = true;
    const failed = applyDesired({ ...deps(), packages }, desiredOf(withPackages));
    await expect(failed).rejects.toThrow(ApplyError);
    await expect(failed).rejects.toThrow(
      'install chrony jq=1.6 failed: E: Unable to locate package chrony',
    );
    expect(await readLastApplied(stateDir)).toBeUndefined();

    packages.fail = false;
    await applyDesired({ ...deps(), packages }, desiredOf(withPackages));
    expect(packages.calls).toEqual([
      "install chrony jq (root's files written, app's file not yet)",
      "install chrony jq (root's files written, app's file not yet)",
    ]);
    expect(await readFile(join(root, 'etc/app/owned'), 'utf8')).toBe('o\n');
    expect((await readLastApplied(stateDir))?.checksum).toBe(desiredOf(withPackages).checksum);
    // applied: the same packages are not installed again
    const again = await applyDesired({ ...deps(), packages }, desiredOf(withPackages));
    expect(again.actions).toEqual([]);
    expect(packages.calls).toHaveLength(2);
  });

  it('fail with a clear message when the agent was given no package manager', async () => {
    await expect(applyDesired(deps(), desiredOf(withPackages))).rejects.toThrow(
      'no package manager was given to this agent',
    );
  });
});

describe('a state the node cannot take in place', () => {
  it('another OS type or cgroup driver is refused before anything is touched', async () => {
    const withCri = (c: typeof v1, cgroupDriver: 'systemd' | 'cgroupfs') => ({
      ...c,
      cri: { name: 'containerd' as const, cgroupDriver },
    });
    await applyDesired(deps(), desiredOf(withCri(v1, 'systemd')));
    const log = await readFile(join(stateDir, 'would-run.log'), 'utf8');
    const otherOs = { ...withCri(v1, 'systemd'), type: 'flatcar' };
    await expect(applyDesired(deps(), desiredOf(otherOs))).rejects.toThrow(ReplacementNeeded);
    await expect(planFor(deps(), desiredOf(otherOs))).rejects.toThrow(
      'spec.type changed from "debian" to "flatcar": an OS cannot become another in place; replace the machine',
    );
    await expect(applyDesired(deps(), desiredOf(withCri(v1, 'cgroupfs')))).rejects.toThrow(
      'spec.cri.cgroupDriver changed from systemd to cgroupfs',
    );
    // nothing was touched: the files, the jobs a node would have run, the last good state
    expect(await readFile(join(root, 'etc/a/a.conf'), 'utf8')).toBe('a=1\n');
    expect(await readFile(join(stateDir, 'would-run.log'), 'utf8')).toBe(log);
    expect((await readLastApplied(stateDir))?.checksum).toBe(
      desiredOf(withCri(v1, 'systemd')).checksum,
    );
  });

  it('is fine on a first apply, and when a runtime is added', async () => {
    await applyDesired(deps(), desiredOf(v1));
    const added = { ...v1, cri: { name: 'containerd' as const, cgroupDriver: 'systemd' as const } };
    await expect(applyDesired(deps(), desiredOf(added))).resolves.toMatchObject({ resumed: false });
  });
});

describe('what the node may contain, and what a config may say (issue 13)', () => {
  it('a desired state oscar validate would refuse is refused before anything is touched', async () => {
    await applyDesired(deps(), desiredOf(v1));
    const log = await readFile(join(stateDir, 'would-run.log'), 'utf8');
    const hostile = config(v1.units, [
      ...v1.files,
      file('/../../etc/cron.d/x', '* * * * * root sh\n'),
    ]);
    const error = await applyDesired(deps(), desiredOf(hostile)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidConfigError);
    expect((error as Error).message).toMatch(
      /spec\.files\[0\]\.path: must not contain "\.\." segments/,
    );
    await expect(planFor(deps(), desiredOf(hostile))).rejects.toThrow(InvalidConfigError);
    expect(await readFile(join(stateDir, 'would-run.log'), 'utf8')).toBe(log);
    expect((await readLastApplied(stateDir))?.checksum).toBe(desiredOf(v1).checksum);
  });

  it('a declared file inside the state directory, when the state directory lives in the root elsewhere', async () => {
    const custom = { ...deps(), stateDir: join(root, 'etc/oscar-state') };
    const c = config([], [file('/etc/oscar-state/last-applied.json', '{}')]);
    await expect(applyDesired(custom, desiredOf(c))).rejects.toThrow(
      /spec\.files\[0\]\.path: "\/etc\/oscar-state\/last-applied.json" is inside \/etc\/oscar-state, this agent's own state directory/,
    );
  });

  it('a directory found where oscar wrote a file that leaves the config: left alone, the apply goes on, later ones too', async () => {
    await applyDesired(deps(), desiredOf(v1));
    await rm(join(root, 'etc/other'));
    await mkdir(join(root, 'etc/other/sub'), { recursive: true });
    const logged: string[] = [];
    const without = config(v1.units, [file('/etc/a/a.conf', 'a=1\n', { mode: 0o640 })]);
    await applyDesired({ ...deps(), log: (m) => logged.push(m) }, desiredOf(without));
    expect(logged).toEqual([
      expect.stringMatching(/remove \/etc\/other: not removed: \/etc\/other is now a directory/),
    ]);
    expect((await stat(join(root, 'etc/other/sub'))).isDirectory()).toBe(true);
    expect((await readLastApplied(stateDir))?.checksum).toBe(desiredOf(without).checksum);
    const next = config(v1.units, [file('/etc/a/a.conf', 'a=2\n', { mode: 0o640 })]);
    await expect(applyDesired(deps(), desiredOf(next))).resolves.toMatchObject({ resumed: false });
  });

  it('a file oscar wrote whose parent is now a link: the removal removes nothing through it', async () => {
    const outside = await mkdtemp(join(tmpdir(), 'oscar-outside-'));
    try {
      await writeFile(join(outside, 'a.conf'), 'not oscar\n');
      await applyDesired(deps(), desiredOf(v1));
      await rm(join(root, 'etc/a'), { recursive: true });
      await symlink(outside, join(root, 'etc/a'));
      const logged: string[] = [];
      const v2 = config([unit('b.service', { onChange: 'reload' })], [file('/etc/other', 'o\n')]);
      await applyDesired({ ...deps(), log: (m) => logged.push(m) }, desiredOf(v2));
      expect(await readFile(join(outside, 'a.conf'), 'utf8')).toBe('not oscar\n');
      expect(logged.join('\n')).toMatch(
        /remove \/etc\/a\/a\.conf: not removed: refusing \/etc\/a: \/etc\/a is a symbolic link/,
      );
    } finally {
      await rm(outside, { recursive: true, force: true });
    }
  });

  it('a write below a link fails naming the path and the link; the last good state stays; without the link it converges', async () => {
    await applyDesired(deps(), desiredOf(v1));
    const outside = await mkdtemp(join(tmpdir(), 'oscar-outside-'));
    try {
      await rm(join(root, 'etc/a'), { recursive: true });
      await symlink(outside, join(root, 'etc/a'));
      const v2 = config(v1.units, [
        file('/etc/a/a.conf', 'a=2\n', { mode: 0o640 }),
        file('/etc/other', 'o\n'),
      ]);
      const error = await applyDesired(deps(), desiredOf(v2)).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ApplyError);
      expect((error as Error).message).toMatch(
        new RegExp(
          `^write /etc/a/a\\.conf .* failed: refusing /etc/a: /etc/a is a symbolic link \\(to ${outside}\\)`,
        ),
      );
      expect(await readdir(outside)).toEqual([]);
      expect((await readLastApplied(stateDir))?.checksum).toBe(desiredOf(v1).checksum);
      await rm(join(root, 'etc/a'));
      await applyDesired(deps(), desiredOf(v2));
      expect(await readFile(join(root, 'etc/a/a.conf'), 'utf8')).toBe('a=2\n');
    } finally {
      await rm(outside, { recursive: true, force: true });
    }
  });
});
