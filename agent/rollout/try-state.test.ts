// Try mode's backups and restores against the node's file system: they run as root on paths other
// users may own (/home/core/.ssh/authorized_keys), so they follow no link the agent did not make.
import { execFileSync } from 'node:child_process';
import {
  lstat,
  mkdir,
  mkdtemp,
  readFile,
  readdir,
  readlink,
  rename,
  rm,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { config, desiredOf, file } from '../testing/fixtures.js';
import type { Grant } from './grant.js';
import { backInOldState, TryState, type TryRecord } from './try-state.js';

let base: string;
let root: string;
let outside: string;
let stateDir: string;
beforeEach(async () => {
  base = await mkdtemp(join(tmpdir(), 'oscar-try-state-'));
  root = join(base, 'root');
  outside = join(base, 'outside');
  stateDir = join(root, 'var/lib/oscar');
  await mkdir(join(root, 'home/core/.ssh'), { recursive: true });
  await mkdir(outside);
  await mkdir(stateDir, { recursive: true, mode: 0o700 });
});
afterEach(async () => {
  await rm(base, { recursive: true, force: true });
});

const KEYS = '/home/core/.ssh/authorized_keys';
const next = desiredOf(config([], [file(KEYS, 'ssh-ed25519 AAAA oscar\n')]));
const grant: Grant = {
  generation: 1,
  osc: 'web',
  number: 2,
  secretName: 'web-rev-2',
  checksum: next.checksum,
  grantedTime: '2026-12-03T00:00:00Z',
  canary: false,
};

async function tree(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of await readdir(dir, { recursive: true })) {
    const p = join(dir, name);
    const st = await lstat(p);
    out[name] = st.isSymbolicLink()
      ? `-> ${await readlink(p)}`
      : st.isFile()
        ? await readFile(p, 'utf8')
        : 'dir';
  }
  return out;
}

describe('try mode backups', () => {
  it('backs up and restores a replaced file byte for byte, with its mode', async () => {
    await writeFile(join(root, KEYS), 'the user key\n', { mode: 0o600 });
    const state = new TryState(stateDir, root);
    const record = await state.begin(next, undefined, grant);
    expect(record.backups).toMatchObject([{ path: KEYS, kind: 'file', mode: 0o600 }]);
    await writeFile(join(root, KEYS), 'what the try wrote\n');
    await state.restoreBackups(record, false);
    expect(await readFile(join(root, KEYS), 'utf8')).toBe('the user key\n');
    expect((await lstat(join(root, KEYS))).mode & 0o777).toBe(0o600);
  });

  it('copies a large file without holding it: 48 MiB back byte for byte', async () => {
    const big = Buffer.alloc(48 * 1024 * 1024);
    for (let i = 0; i < big.length; i += 4096) big.writeUInt32LE(i, i);
    await writeFile(join(root, KEYS), big);
    const state = new TryState(stateDir, root);
    const record = await state.begin(next, undefined, grant);
    await writeFile(join(root, KEYS), 'what the try wrote\n');
    await state.restoreBackups(record, false);
    expect((await readFile(join(root, KEYS))).equals(big)).toBe(true);
  });

  it('never backs up through a linked directory (a user could point it at any file)', async () => {
    await writeFile(join(outside, 'authorized_keys'), 'root-only secret\n');
    await rm(join(root, 'home/core/.ssh'), { recursive: true });
    await symlink(outside, join(root, 'home/core/.ssh'));
    const record = await new TryState(stateDir, root).begin(next, undefined, grant);
    expect(record.backups).toEqual([]);
    expect(await readdir(join(stateDir, 'try-backup'))).toEqual([]);
  });

  it('records a link at the path as a link, without reading where it points, and puts it back', async () => {
    await writeFile(join(outside, 'target'), 'not oscars to read\n');
    await symlink(join(outside, 'target'), join(root, KEYS));
    const state = new TryState(stateDir, root);
    const record = await state.begin(next, undefined, grant);
    expect(record.backups).toMatchObject([
      { path: KEYS, kind: 'symlink', target: join(outside, 'target') },
    ]);
    expect(await readdir(join(stateDir, 'try-backup'))).toEqual([]);
    await rm(join(root, KEYS));
    await writeFile(join(root, KEYS), 'what the try wrote\n');
    await state.restoreBackups(record, false);
    expect(await readlink(join(root, KEYS))).toBe(join(outside, 'target'));
    expect(await readFile(join(outside, 'target'), 'utf8')).toBe('not oscars to read\n');
  });

  it('does not block on a FIFO at the path, nor back it up', async () => {
    execFileSync('mkfifo', [join(root, KEYS)]);
    const record = await new TryState(stateDir, root).begin(next, undefined, grant);
    expect(record.backups).toEqual([]);
  });

  it('restores nothing through a directory swapped for a link during the try (refused, naming the link)', async () => {
    await writeFile(join(root, KEYS), 'the user key\n');
    const state = new TryState(stateDir, root);
    const record = await state.begin(next, undefined, grant);
    // the user who owns /home/core moves .ssh away and points it at a root-owned directory
    await rename(join(root, 'home/core/.ssh'), join(root, 'home/core/old-ssh'));
    await symlink(outside, join(root, 'home/core/.ssh'));
    await expect(state.restoreBackups(record, false)).rejects.toThrow(
      /refusing \/home\/core\/\.ssh: \/home\/core\/\.ssh is a symbolic link \(to .*outside\)/,
    );
    expect(await tree(outside)).toEqual({});
  });

  it('restores a link by replacing what is there, never by writing through it', async () => {
    await symlink('/etc/motd', join(root, KEYS));
    const state = new TryState(stateDir, root);
    const record = await state.begin(next, undefined, grant);
    // a link to a file outside now stands at the path
    await rm(join(root, KEYS));
    await writeFile(join(outside, 'victim'), 'untouched\n');
    await symlink(join(outside, 'victim'), join(root, KEYS));
    await state.restoreBackups(record, false);
    expect(await readlink(join(root, KEYS))).toBe('/etc/motd');
    expect(await tree(outside)).toEqual({ victim: 'untouched\n' });
    expect((await readdir(join(root, 'home/core/.ssh'))).sort()).toEqual(['authorized_keys']);
  });

  it('keeps the boot token beneath the root, refusing a linked /run/oscar', async () => {
    await mkdir(join(root, 'run'));
    await symlink(outside, join(root, 'run/oscar'));
    await expect(new TryState(stateDir, root).bootToken()).rejects.toThrow(
      /\/run\/oscar is a symbolic link/,
    );
    expect(await tree(outside)).toEqual({});
  });

  it('refuses a state directory others can write, naming the fix', async () => {
    execFileSync('chmod', ['0777', stateDir]);
    await expect(new TryState(stateDir, root).current()).rejects.toThrow(/chmod go-w/);
  });

  it('names confirmed.json and the way out when it is damaged', async () => {
    await writeFile(join(stateDir, 'confirmed.json'), '{"torn');
    await expect(new TryState(stateDir, root).confirmed()).rejects.toThrow(
      /confirmed\.json is damaged .*; remove it: the last applied state then counts as confirmed/,
    );
  });
});

// issue 25: a try reverted after its reboot stays open until the old state is proven in a boot.
describe('a try rolling back', () => {
  it('is back in the old state in any boot but the one the revert happened in', () => {
    const record = { boot: 'B' } as TryRecord;
    const rolling = { ...record, rollback: { reason: 'r', message: 'm', fromBoot: 'B' } };
    expect(backInOldState(rolling, 'B')).toBe(false); // the reboot back has not happened
    expect(backInOldState(rolling, 'C')).toBe(true);
    expect(backInOldState(record, 'C')).toBe(false); // not rolling back: a crash, not a return
  });

  it('keeps its rollback, units and a new deadline in try.json across agents', async () => {
    const state = new TryState(stateDir, root);
    const begun = await state.begin(next, undefined, grant);
    const units = [{ name: 'app.service', restarts: 4 }];
    const rb = { reason: 'HealthCheckFailed', message: 'health check x', fromBoot: begun.boot };
    await state.rollingBack(begun, rb, units);
    const again = new TryState(stateDir, root);
    expect((await again.current())?.rollback).toEqual(rb);
    const moved = await again.backInBoot((await again.current())!, 'other-boot', 1234);
    expect(await again.current()).toMatchObject({
      boot: 'other-boot',
      deadline: 1234,
      units: [{ name: 'app.service', restarts: 0 }],
      rollback: rb,
    });
    expect(moved.boot).toBe('other-boot');
  });

  it('proves the confirmed revision with the checks it was confirmed with, none after a plain apply', async () => {
    const state = new TryState(stateDir, root);
    const check = {
      name: 'kubelet',
      kind: 'exec' as const,
      command: ['/bin/true'],
      timeoutMs: 1000,
      periodMs: 1000,
      failureThreshold: 3,
    };
    await state.setConfirmed(next.bytes, [check]);
    expect(await state.confirmedChecks(next.checksum)).toEqual([check]);
    expect(await state.confirmedChecks('another')).toEqual([]); // stale: another revision's
    await state.setConfirmed(next.bytes);
    expect(await state.confirmedChecks(next.checksum)).toEqual([]);
  });
});
