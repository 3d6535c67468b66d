/**
 * Reads what is at a path oscar owns, as the drift check needs it: type, mode, owner and the
 * sha256 of the content. A path on a node is hostile input: the last component is opened with
 * O_NOFOLLOW (a symlink is reported as one, never followed) and O_NONBLOCK (a FIFO put there
 * cannot stall the agent), and only a regular file is read, at most MAX_HASHED bytes of it.
 *
 * An audit reads every owned file, so this allocates little per file: plain descriptors rather
 * than FileHandle objects, and a file that fits one chunk (almost every config file) is read in
 * one call and hashed one-shot, without a Hash object waiting for the GC. (Measured: six audits
 * of 1,000 files leave the process ~3–3.5 MB larger either way — mostly the heap and compiled
 * code the checks need — so this is about garbage, not the idle RSS.)
 */
import { createHash, hash } from 'node:crypto';
import { close, constants, fstat, open, read, type Stats } from 'node:fs';
import { promisify } from 'node:util';
import type { Found } from '../model/observed.js';

/** A file larger than this is reported by its size: hashing gigabytes helps nobody. */
export const MAX_HASHED = 64 * 1024 * 1024;

const CHUNK = 64 * 1024;
const FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY;

const openP = promisify(open);
const fstatP = promisify(fstat);
const closeP = promisify(close);
const readP = (fd: number, buffer: Buffer): Promise<number> =>
  new Promise((resolve, reject) => {
    read(fd, buffer, 0, buffer.length, null, (error, bytesRead) => {
      if (error) reject(error);
      else resolve(bytesRead);
    });
  });

function typeOf(mode: number): string {
  switch (mode & constants.S_IFMT) {
    case constants.S_IFDIR:
      return 'directory';
    case constants.S_IFLNK:
      return 'symlink';
    case constants.S_IFIFO:
      return 'fifo';
    case constants.S_IFSOCK:
      return 'socket';
    case constants.S_IFCHR:
      return 'character device';
    case constants.S_IFBLK:
      return 'block device';
    default:
      return 'not a regular file';
  }
}

export async function readFound(hostPath: string): Promise<Found> {
  let fd: number;
  try {
    fd = await openP(hostPath, FLAGS);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return { kind: 'missing' };
    if (code === 'ELOOP') return { kind: 'other', type: 'symlink' };
    throw error;
  }
  try {
    const st: Stats = await fstatP(fd);
    if (!st.isFile()) return { kind: 'other', type: typeOf(st.mode) };
    const base = { mode: st.mode & 0o7777, uid: st.uid, gid: st.gid };
    if (st.size > MAX_HASHED) {
      return { kind: 'file', sha256: `size-${String(st.size)}`, size: st.size, ...base };
    }
    // one byte more than its size: a file that grew meanwhile does not fit, and is streamed
    const first = Buffer.allocUnsafe(Math.min(CHUNK, st.size + 1));
    let n = await readP(fd, first);
    if (n < first.length) {
      return { kind: 'file', sha256: hash('sha256', first.subarray(0, n)), size: n, ...base };
    }
    const h = createHash('sha256').update(first);
    let size = n;
    const chunk = Buffer.allocUnsafe(CHUNK);
    while ((n = await readP(fd, chunk)) > 0 && size <= MAX_HASHED) {
      h.update(chunk.subarray(0, n));
      size += n;
    }
    return { kind: 'file', sha256: h.digest('hex'), size, ...base };
  } finally {
    await closeP(fd);
  }
}
