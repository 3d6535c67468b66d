import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { sha256 } from '../drift/expectation.js';
import type { Found } from '../model/observed.js';
import { Beneath } from './beneath.js';
import { readFound as readFoundBeneath } from './reader.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'oscar-reader-'));
});

/** What is at a host path below the test's directory, read beneath it as the monitor reads. */
async function readFound(hostPath: string): Promise<Found> {
  const beneath = await Beneath.open(dir);
  try {
    return await readFoundBeneath(beneath, hostPath.slice(dir.length));
  } finally {
    await beneath.close();
  }
}
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('readFound', () => {
  it('a regular file: its hash, size, mode and owner', async () => {
    const big = Buffer.alloc(200_000, 7); // more than one read
    await writeFile(join(dir, 'f'), big, { mode: 0o640 });
    expect(await readFound(join(dir, 'f'))).toMatchObject({
      kind: 'file',
      sha256: sha256(big),
      size: 200_000,
      mode: 0o640,
    });
  });

  it('hostile entries are described, never followed or waited on: a symlink, a FIFO, a directory, nothing', async () => {
    await writeFile(join(dir, 'secret'), 'x');
    await symlink(join(dir, 'secret'), join(dir, 'link'));
    execFileSync('mkfifo', [join(dir, 'fifo')]);
    await mkdir(join(dir, 'd'));
    expect(await readFound(join(dir, 'link'))).toEqual({ kind: 'other', type: 'symlink' });
    expect(await readFound(join(dir, 'fifo'))).toEqual({ kind: 'other', type: 'fifo' });
    expect(await readFound(join(dir, 'd'))).toEqual({ kind: 'other', type: 'directory' });
    expect(await readFound(join(dir, 'none'))).toEqual({ kind: 'missing' });
    expect(await readFound(join(dir, 'secret', 'below'))).toEqual({ kind: 'missing' });
  });
});
