/**
 * Reads what is at a path oscar owns, as the drift check needs it: type, mode, owner and the
 * sha256 of the content — hashed in bounded chunks, never held whole. A path on a node is
 * hostile input: the last component is opened with O_NOFOLLOW (a symlink is reported as one,
 * never followed) and O_NONBLOCK (a FIFO put there cannot stall the agent), and only a regular
 * file is read, at most MAX_HASHED bytes of it.
 */
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import type { Found } from './expectation.js';

/** A file larger than this is reported by its size: hashing gigabytes helps nobody. */
export const MAX_HASHED = 64 * 1024 * 1024;

const CHUNK = 64 * 1024;

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
  let handle;
  try {
    handle = await open(
      hostPath,
      constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY,
    );
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return { kind: 'missing' };
    if (code === 'ELOOP') return { kind: 'other', type: 'symlink' };
    throw error;
  }
  try {
    const st = await handle.stat();
    if (!st.isFile()) return { kind: 'other', type: typeOf(st.mode) };
    const base = { size: st.size, mode: st.mode & 0o7777, uid: st.uid, gid: st.gid };
    if (st.size > MAX_HASHED) return { kind: 'file', sha256: `size-${String(st.size)}`, ...base };
    const hash = createHash('sha256');
    // per read, not shared: reads run concurrently; a small file needs a small buffer
    const chunk = Buffer.allocUnsafe(Math.min(CHUNK, st.size + 1));
    let size = 0;
    for (;;) {
      const { bytesRead } = await handle.read(chunk, 0, chunk.length, null);
      if (bytesRead === 0) break;
      hash.update(chunk.subarray(0, bytesRead));
      size += bytesRead;
      if (size > MAX_HASHED) break;
    }
    return { kind: 'file', sha256: hash.digest('hex'), ...base, size };
  } finally {
    await handle.close();
  }
}
