import { execFileSync } from 'node:child_process';
import { chmod, chown, mkdir, mkdtemp, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { canonicalize } from '../api/canonical.js';
import { missing } from '../test/support/tools.js';
import { Journal } from './journal.js';
import { lockStateDir } from './lock.js';
import { StateDir } from './state-dir.js';
import { readLastApplied, writeLastApplied } from './state.js';
import { config, file } from './testing/fixtures.js';

let work: string;

beforeEach(async () => {
  work = await mkdtemp(join(tmpdir(), 'oscar-state-'));
});

afterEach(async () => {
  await rm(work, { recursive: true, force: true });
});

describe('the state directory', () => {
  it('is created 0700 (parents 0755) when missing', async () => {
    const dir = join(work, 'var/lib/oscar');
    await StateDir.with(dir, () => Promise.resolve());
    expect((await stat(dir)).mode & 0o7777).toBe(0o700);
    expect((await stat(join(work, 'var/lib'))).mode & 0o7777).toBe(0o755);
  });

  it('is refused when it is a link, for the journal, last-applied and the lock alike', async () => {
    const real = join(work, 'elsewhere');
    await mkdir(real, { mode: 0o700 });
    const dir = join(work, 'state');
    await symlink(real, dir);
    const refused =
      /the state directory .*\/state is not safe to use: refusing .*\/state: .* is a symbolic link/;
    await expect(readLastApplied(dir)).rejects.toThrow(refused);
    await expect(writeLastApplied(dir, Buffer.from('{}'))).rejects.toThrow(refused);
    await expect(Journal.read(dir)).rejects.toThrow(refused);
    await expect(lockStateDir(dir)).rejects.toThrow(refused);
  });

  it('is refused when its group or everyone can write it, with the fix', async () => {
    const dir = join(work, 'state');
    await mkdir(dir);
    await chmod(dir, 0o777);
    await expect(readLastApplied(dir)).rejects.toThrow(
      `the state directory ${dir} is writable by everyone (mode 0777): another user could plant or replace its files; fix: chmod go-w ${dir}`,
    );
    await chmod(dir, 0o770);
    await expect(readLastApplied(dir)).rejects.toThrow(/writable by its group .* fix: chmod go-w/);
  });

  it('is refused when another user owns it', async () => {
    if (process.getuid?.() !== 0) {
      missing('root', 'giving a directory to another user needs root');
      return;
    }
    const dir = join(work, 'state');
    await mkdir(dir, { mode: 0o700 });
    await chown(dir, 1000, 1000);
    await expect(readLastApplied(dir)).rejects.toThrow(
      new RegExp(
        `the state directory ${dir} is owned by uid 1000, not by the agent's user \\(uid 0\\).* fix: chown 0 ${dir}`,
      ),
    );
  });
});

describe('last-applied.json', () => {
  it('damaged, or holding a config oscar would refuse: an error naming the file and the fix', async () => {
    const dir = join(work, 'state');
    await mkdir(dir, { mode: 0o700 });
    await writeFile(join(dir, 'last-applied.json'), '{"kind":');
    await expect(readLastApplied(dir)).rejects.toThrow(
      new RegExp(
        `${dir}/last-applied.json is damaged .*; remove it to let the agent re-apply everything`,
      ),
    );
    const hostile = config([], [file('/etc/ok', 'x')]);
    await writeFile(
      join(dir, 'last-applied.json'),
      canonicalize(hostile).replace('"/etc/ok"', '"/../../etc/shadow"'),
    );
    await expect(readLastApplied(dir)).rejects.toThrow(
      /last-applied.json holds a config oscar would refuse \(spec.files\[0\].path: must not contain "\.\." segments.*\); remove it/,
    );
  });

  // red-team round 3: the file holds the node's file contents (from Secrets): its damage report
  // reaches the log and the node's status, and must quote none of it
  it('damaged next to file content: the error quotes no byte of it', async () => {
    const dir = join(work, 'state');
    await mkdir(dir, { mode: 0o700 });
    const good = canonicalize(config([], [file('/etc/token', 'c2VjcmV0LXRva2Vu')]));
    for (const damaged of [
      good.replace('"content":"', '"content":t'),
      good.replace('"content":"', '"content":"\u0007'),
      `${good.slice(0, -1)}c2VjcmV0LXRva2Vu`,
    ]) {
      await writeFile(join(dir, 'last-applied.json'), damaged);
      const error = await readLastApplied(dir).catch((e: unknown) => e as Error);
      expect(error).toBeInstanceOf(Error);
      expect((error as Error).message).toMatch(/last-applied.json is (damaged|.*refuse)/);
      expect((error as Error).message).not.toMatch(/c2Vj|YzJW|2VjcmV0/);
    }
  });

  it('a FIFO or a link in its place is not read (no hang, no other file): nothing was applied', async () => {
    const dir = join(work, 'state');
    await mkdir(dir, { mode: 0o700 });
    execFileSync('mkfifo', [join(dir, 'last-applied.json')]);
    expect(await readLastApplied(dir)).toBeUndefined();
    await rm(join(dir, 'last-applied.json'));
    await writeFile(join(work, 'other.json'), canonicalize(config([], [file('/etc/x', 'x')])));
    await symlink(join(work, 'other.json'), join(dir, 'last-applied.json'));
    expect(await readLastApplied(dir)).toBeUndefined();
  });
});
