/**
 * Reading a file someone may be saving right now. Editors save in several writes (truncate, then
 * write; or write in chunks); a file read between them is half a file, and half an
 * OperatingSystemConfig is often still a valid one — with units missing, which the agent would then
 * stop and remove. So a file is read only once it has stood still: the same inode, size and
 * modification time before the read and `quietMs` after it, and as many bytes as its size.
 */
import { readFile, stat } from 'node:fs/promises';
import { sleep } from '../api/util.js';

/** How long a file must stand still before a watcher's change is read (chokidar and readStable). */
export const QUIET_MS = 300;

export interface StableReadOptions {
  quietMs?: number;
  /** Give up (throw) when the file keeps changing for this long. */
  timeoutMs?: number;
}

export async function readStableFile(path: string, opts: StableReadOptions = {}): Promise<Buffer> {
  const quietMs = opts.quietMs ?? QUIET_MS;
  const deadline = Date.now() + (opts.timeoutMs ?? 30_000);
  for (;;) {
    const before = await stat(path);
    const bytes = await readFile(path);
    await sleep(quietMs);
    const after = await stat(path);
    if (
      before.ino === after.ino &&
      before.size === after.size &&
      before.mtimeMs === after.mtimeMs &&
      bytes.length === after.size
    ) {
      return bytes;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `${path} kept changing for ${String(Math.round((opts.timeoutMs ?? 30_000) / 1000))} s; not read (it is read once it stands still for ${String(quietMs)} ms)`,
      );
    }
  }
}

/** chokidar's own wait for a file to stop growing, with the same quiet time. */
export const AWAIT_WRITE_FINISH = { stabilityThreshold: QUIET_MS, pollInterval: 50 } as const;
