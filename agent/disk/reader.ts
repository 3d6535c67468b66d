/**
 * The agent's one reader of the node's disk, for the planner (agent/disk/fs.ts `observe`), the
 * drift check (agent/drift/monitor.ts) and the state directory alike. A path on a node is hostile
 * input: it is resolved beneath the root one name at a time (agent/disk/beneath.ts: a symlink in a
 * parent is never followed, as for every write), the last component is opened with O_NOFOLLOW (a
 * symlink is reported as one) and O_NONBLOCK (a FIFO put there cannot stall the agent), and only a
 * regular file is read — what of it each caller needs: its bytes, the bytes if the size can match,
 * or its sha256 (at most MAX_HASHED bytes).
 *
 * An audit reads every owned file, so this allocates little per file: plain descriptors rather
 * than FileHandle objects, and a file that fits one chunk (almost every config file) is read in
 * one call and hashed one-shot, without a Hash object waiting for the GC. (Measured: six audits
 * of 1,000 files leave the process ~3–3.5 MB larger either way — mostly the heap and compiled
 * code the checks need — so this is about garbage, not the idle RSS.)
 */
import { createHash, hash } from 'node:crypto';
import { close, constants, fstat, open, read, readFile, type Stats } from 'node:fs';
import { promisify } from 'node:util';
import type { Found } from '../model/observed.js';
import { NotADirectory, SymlinkRefused, type Beneath, type Dir } from './beneath.js';

/** A file larger than this is reported by its size: hashing gigabytes helps nobody. */
export const MAX_HASHED = 64 * 1024 * 1024;

const CHUNK = 64 * 1024;
const FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY;

const openP = promisify(open);
const fstatP = promisify(fstat);
const closeP = promisify(close);
const readFileP = promisify(readFile);
const readP = (fd: number, buffer: Buffer, position: number | null = null): Promise<number> =>
  new Promise((resolve, reject) => {
    read(fd, buffer, 0, buffer.length, position, (error, bytesRead) => {
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

/** What is at a path, opened: a descriptor and its stats, or why there is none to read. */
export type Opened =
  | { kind: 'open'; fd: number; st: Stats }
  | { kind: 'missing' }
  /** The path itself is a symbolic link (never followed). */
  | { kind: 'link' }
  /** A parent is a link the agent does not follow (SymlinkRefused), or not a directory. */
  | { kind: 'unreachable'; why: 'symlink' | 'notDirectory' };

function errnoOf(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}

/** Opens `name` in the open directory `dir`, following no link. */
export async function openIn(dir: Dir, name: string): Promise<Opened> {
  let fd: number;
  try {
    fd = await openP(dir.at(name), FLAGS);
  } catch (error) {
    const code = errnoOf(error);
    if (code === 'ENOENT' || code === 'ENOTDIR') return { kind: 'missing' };
    if (code === 'ELOOP') return { kind: 'link' };
    throw error;
  }
  try {
    return { kind: 'open', fd, st: await fstatP(fd) };
  } catch (error) {
    await closeP(fd);
    throw error;
  }
}

/** Opens node path `path` beneath the root, as every write resolves it. */
export async function openBeneath(beneath: Beneath, path: string): Promise<Opened> {
  let where;
  try {
    where = await beneath.parent(path, false);
  } catch (error) {
    if (error instanceof SymlinkRefused) return { kind: 'unreachable', why: 'symlink' };
    if (error instanceof NotADirectory) return { kind: 'unreachable', why: 'notDirectory' };
    throw error;
  }
  return where ? openIn(where.dir, where.name) : { kind: 'missing' };
}

/** Runs `fn` on what `opened` holds, closing its descriptor afterwards. */
async function using<T>(opened: Opened, fn: (o: Opened) => Promise<T>): Promise<T> {
  try {
    return await fn(opened);
  } finally {
    if (opened.kind === 'open') await closeP(opened.fd);
  }
}

/** A regular file's bytes, by name in `dir`; undefined when there is none to read. */
export async function readFileIn(dir: Dir, name: string): Promise<Buffer | undefined> {
  return using(await openIn(dir, name), async (o) =>
    o.kind === 'open' && o.st.isFile() ? readFileP(o.fd) : undefined,
  );
}

/** A file's bytes beneath the root; undefined when it is missing or not reachable safely. */
export async function readBeneath(beneath: Beneath, path: string): Promise<Buffer | undefined> {
  return using(await openBeneath(beneath, path), async (o) =>
    o.kind === 'open' && o.st.isFile() ? readFileP(o.fd) : undefined,
  );
}

/** What the planner sees at a path: its owner and mode, and its bytes when they were read. */
export interface Seen {
  content: Buffer | undefined;
  mode: number;
  uid: number;
  gid: number;
}

/** A path that exists but can never match a declared file (a link, a directory, unreachable). */
const FOREIGN: Seen = { content: undefined, mode: -1, uid: -1, gid: -1 };

/**
 * What the planner sees at `path`: undefined when nothing is. The content is read only when its
 * size is `wantSize` (a file of another size cannot match: a huge file planted where oscar writes
 * is never read into memory) or at most `otherSizesUpTo`.
 */
export async function readSeen(
  beneath: Beneath,
  path: string,
  wantSize: number | undefined,
  otherSizesUpTo: number | undefined,
): Promise<Seen | undefined> {
  return using(await openBeneath(beneath, path), async (o) => {
    if (o.kind === 'missing') return undefined;
    if (o.kind !== 'open') return FOREIGN;
    const { fd, st } = o;
    if (!st.isFile()) return { ...FOREIGN, uid: st.uid, gid: st.gid };
    const seen: Seen = { content: undefined, mode: st.mode & 0o7777, uid: st.uid, gid: st.gid };
    const other = otherSizesUpTo !== undefined && st.size <= otherSizesUpTo;
    if (st.size === wantSize || other) {
      const buf = Buffer.allocUnsafe(st.size + 1); // one more: a file that grew does not match
      seen.content = buf.subarray(0, await readP(fd, buf, 0));
    }
    return seen;
  });
}

/** What the drift check finds at `path`: a file by its hash, or what is there instead. */
export async function readFound(beneath: Beneath, path: string): Promise<Found> {
  return using(await openBeneath(beneath, path), async (o) => {
    if (o.kind === 'missing') return { kind: 'missing' };
    if (o.kind === 'link') return { kind: 'other', type: 'symlink' };
    if (o.kind === 'unreachable') {
      return o.why === 'symlink'
        ? { kind: 'other', type: 'symlink in its path' }
        : { kind: 'missing' };
    }
    return hashOpen(o.fd, o.st);
  });
}

/** A regular file's hash, size, mode and owner; what is there instead of one. */
async function hashOpen(fd: number, st: Stats): Promise<Found> {
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
}
