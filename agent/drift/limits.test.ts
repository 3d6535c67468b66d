import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { limitProblem, readInotifyLimits, suggestedWatches, watchFailure } from './limits.js';

const need = { files: 10_000, directories: 120 };

describe('inotify limits', () => {
  it('enough room: no message', () => {
    expect(limitProblem(need, { maxUserWatches: 65_536, maxUserInstances: 128 })).toBeUndefined();
  });

  it('too few watches: names the sysctl, what is needed and the number to set', () => {
    const m = limitProblem(need, { maxUserWatches: 8_192, maxUserInstances: 128 });
    expect(m).toContain('needs 10120 watches (10000 files and 120 directories)');
    expect(m).toContain('fs.inotify.max_user_watches is 8192');
    expect(m).toContain(`sysctl -w fs.inotify.max_user_watches=${String(suggestedWatches(need))}`);
    expect(suggestedWatches(need)).toBeGreaterThan(10_120);
  });

  it('no instance allowed: names fs.inotify.max_user_instances', () => {
    expect(limitProblem(need, { maxUserWatches: 1e6, maxUserInstances: 0 })).toContain(
      'fs.inotify.max_user_instances is 0',
    );
  });

  it('a refused watch says which limit by its code; other errors are not about limits', () => {
    const limits = { maxUserWatches: 8_192, maxUserInstances: 128 };
    expect(watchFailure('ENOSPC', need, limits)).toMatch(
      /fs\.inotify\.max_user_watches \(8192\) is used up.*max_user_watches=18312/,
    );
    expect(watchFailure('EMFILE', need, limits)).toContain(
      'fs.inotify.max_user_instances (128 now)',
    );
    expect(watchFailure('EACCES', need, limits)).toBeUndefined();
  });

  it('reads the limits from /proc/sys (or a directory like it); none where there is none', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'oscar-inotify-'));
    try {
      expect(await readInotifyLimits(dir)).toBeUndefined();
      await writeFile(join(dir, 'max_user_watches'), '524288\n');
      await writeFile(join(dir, 'max_user_instances'), '128\n');
      expect(await readInotifyLimits(dir)).toEqual({
        maxUserWatches: 524_288,
        maxUserInstances: 128,
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    const host = await readInotifyLimits();
    expect(host?.maxUserWatches).toBeGreaterThan(0);
  });
});
