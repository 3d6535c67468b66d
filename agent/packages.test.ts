import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LocalPackages, PackageError, SystemPackages } from './packages.js';
import type { RunResult } from './systemd.js';

let bin: string;

beforeEach(async () => {
  bin = await mkdtemp(join(tmpdir(), 'oscar-packages-'));
});

afterEach(async () => {
  await rm(bin, { recursive: true, force: true });
});

interface Call {
  cmd: string;
  args: readonly string[];
  env: Readonly<Record<string, string>> | undefined;
}

/** A package manager stand-in: records each call and answers from `results` in turn. */
function recorder(results: Partial<RunResult>[] = []) {
  const calls: Call[] = [];
  const run = (
    cmd: string,
    args: readonly string[],
    _timeoutMs: number,
    env?: Readonly<Record<string, string>>,
  ): Promise<RunResult> => {
    calls.push({ cmd, args, env });
    return Promise.resolve({ code: 0, stdout: '', stderr: '', ...results[calls.length - 1] });
  };
  return { calls, run };
}

describe('SystemPackages', () => {
  it('refreshes apt lists, then installs with apt-get, non-interactive, keeping config files, names only as names', async () => {
    await writeFile(join(bin, 'apt-get'), '');
    const { calls, run } = recorder();
    await new SystemPackages(run, [bin]).install([
      { name: 'chrony' },
      { name: 'jq', version: '1.6' },
    ]);
    expect(calls.map((c) => [c.cmd, ...c.args].join(' '))).toEqual([
      `${bin}/apt-get update -q`,
      // APT::Cmd::Pattern-Only: a name no package has fails instead of installing every package
      // it matches as a regular expression ("a.b" matches 645 names in Debian 12's lists)
      `${bin}/apt-get install -y -q -o Dpkg::Options::=--force-confold -o APT::Cmd::Pattern-Only=true --allow-downgrades chrony jq=1.6`,
    ]);
    expect(calls.every((c) => c.env?.DEBIAN_FRONTEND === 'noninteractive')).toBe(true);
  });

  it('a version that starts like an option stays inside its one argument, NAME=VERSION (red-team round 2)', async () => {
    await writeFile(join(bin, 'apt-get'), '');
    const { calls, run } = recorder();
    await new SystemPackages(run, [bin]).install([{ name: 'tar', version: '-o' }]);
    const install = calls.at(-1)?.args ?? [];
    expect(install.at(-1)).toBe('tar=-o');
    expect(install.filter((a) => a === '-o')).toHaveLength(2); // oscar's own two -o options only
  });

  it('installs even when the refresh fails, and says so; a failed install names the command and why', async () => {
    await writeFile(join(bin, 'apt-get'), '');
    const logs: string[] = [];
    const { calls, run } = recorder([
      { code: 100, stderr: 'E: Could not resolve deb.debian.org' },
      { code: 100, stdout: 'Reading package lists...', stderr: 'E: Unable to locate package nope' },
    ]);
    const install = new SystemPackages(run, [bin]).install([{ name: 'nope' }], (m) => logs.push(m));
    await expect(install).rejects.toThrow(PackageError);
    await expect(install).rejects.toThrow(
      /apt-get install .* nope failed \(exit 100\):\nReading package lists...\nE: Unable to locate package nope/,
    );
    expect(calls).toHaveLength(2);
    expect(logs).toEqual([
      'apt-get update failed, installing anyway:\nE: Could not resolve deb.debian.org',
    ]);
  });

  it('uses zypper where there is no apt-get, and refuses clearly where there is neither', async () => {
    await writeFile(join(bin, 'zypper'), '');
    const { calls, run } = recorder();
    await new SystemPackages(run, [bin]).install([{ name: 'chrony', version: '4.1' }]);
    expect(calls.map((c) => [c.cmd, ...c.args].join(' '))).toEqual([
      `${bin}/zypper --non-interactive install chrony=4.1`,
    ]);
    const none = new SystemPackages(recorder().run, [join(bin, 'empty')]);
    await expect(none.install([{ name: 'chrony' }])).rejects.toThrow(
      'cannot install chrony: the node has neither apt-get nor zypper',
    );
  });

  it('does nothing for no packages', async () => {
    const { calls, run } = recorder();
    await new SystemPackages(run, [bin]).install([]);
    expect(calls).toEqual([]);
  });
});

describe('LocalPackages', () => {
  it('records what a node would install in the "would run" log', async () => {
    const log = join(bin, 'would-run.log');
    await new LocalPackages(log).install([{ name: 'a' }, { name: 'b', version: '2' }]);
    expect(await readFile(log, 'utf8')).toMatch(/^\S+ install-packages a b=2\n$/);
  });
});
