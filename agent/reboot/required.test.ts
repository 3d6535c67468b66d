import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { rebootRequired } from './required.js';

const roots: string[] = [];
async function root(): Promise<string> {
  const r = await mkdtemp(join(tmpdir(), 'oscar-reboot-required-'));
  roots.push(r);
  return r;
}
afterEach(async () => {
  await Promise.all(roots.splice(0).map((r) => rm(r, { recursive: true, force: true })));
});

describe('rebootRequired', () => {
  it('is false on a root without the flag, true with /run/reboot-required', async () => {
    const r = await root();
    expect(await rebootRequired(r)).toBe(false);
    await mkdir(join(r, 'run'));
    await writeFile(join(r, 'run/reboot-required'), '*** System restart required ***\n');
    expect(await rebootRequired(r)).toBe(true);
  });

  it('finds it through /var/run when that is a directory of its own', async () => {
    const r = await root();
    await mkdir(join(r, 'var/run'), { recursive: true });
    await writeFile(join(r, 'var/run/reboot-required'), '');
    expect(await rebootRequired(r)).toBe(true);
  });

  it('never follows a link out of the root to the host', async () => {
    const r = await root();
    const outside = await root();
    await mkdir(join(outside, 'run'));
    await writeFile(join(outside, 'run/reboot-required'), '');
    await symlink(join(outside, 'run'), join(r, 'run'));
    expect(await rebootRequired(r)).toBe(false);
  });
});
