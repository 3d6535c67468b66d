import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readStableFile } from './stable-file.js';
import { saveInTwoParts } from './testing/editor.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'oscar-stable-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('readStableFile', () => {
  it('waits out a save in two writes: never returns the first half', async () => {
    const path = join(dir, 'f');
    await writeFile(path, 'old\n');
    const saving = saveInTwoParts(path, 'new, first half\n', 'second half\n', 150);
    await new Promise((r) => setTimeout(r, 20)); // the first half is on disk
    expect((await readStableFile(path, { quietMs: 300 })).toString()).toBe(
      'new, first half\nsecond half\n',
    );
    await saving;
  });

  it('gives up on a file that never stands still, saying so', async () => {
    const path = join(dir, 'f');
    await writeFile(path, '');
    const timer = setInterval(() => void writeFile(path, String(Date.now())), 20);
    try {
      await expect(readStableFile(path, { quietMs: 100, timeoutMs: 500 })).rejects.toThrow(
        /kept changing for 1 s; not read/,
      );
    } finally {
      clearInterval(timer);
    }
  });
});
