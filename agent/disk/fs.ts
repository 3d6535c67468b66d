/**
 * The agent's file system side: atomic writes with mode and owner, removals, and observing what is
 * on disk for the planner (read by ./reader.ts, the one reader, as drift reads) — all beneath a root ("/" on a node, a sandbox in local mode), through
 * directories opened one name at a time without following foreign links (agent/disk/beneath.ts).
 *
 * A write goes through a temp file created exclusively (O_CREAT|O_EXCL|O_NOFOLLOW) under a random
 * name, mode 0600 until it is complete; owner and mode are set on the open descriptor, never by
 * path; a rename by name in the same open directory puts it in place (rename replaces a link
 * planted at the target rather than following it). User and group names are looked up in the
 * root's own /etc/passwd and /etc/group, never the host's.
 */
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { lstat, open, readdir, rename, unlink, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import type { ResolvedConfig } from '../../api/resolved.js';
import { mapLimit } from '../../api/util.js';
import { Beneath, SymlinkRefused, NotADirectory, type Dir } from './beneath.js';
import { entriesOf } from '../model/entries.js';
import { readBeneath, readSeen } from './reader.js';
import type { ObservedDisk, ObservedFile } from '../model/observed.js';

/** Where a node path lives on this host: under the root. */
export function hostPath(root: string, path: string): string {
  return root === '/' ? path : join(root, path);
}

/**
 * Temp files are ".oscar-tmp." and 16 random hex digits: a fixed length, so a name that fits the
 * file system still fits once it is a temp file, and nothing another user can guess ahead.
 */
const TEMP_PREFIX = '.oscar-tmp.';
const TEMP_NAME = /^\.oscar-tmp\.[0-9a-f]{16}$/;

export function randomTempName(): string {
  return `${TEMP_PREFIX}${randomBytes(8).toString('hex')}`;
}

export function isTempName(name: string): boolean {
  return TEMP_NAME.test(name);
}

function errnoOf(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}

export { readFileIn } from './reader.js';

export class Accounts {
  private constructor(
    private readonly users: ReadonlyMap<string, number>,
    private readonly groups: ReadonlyMap<string, number>,
    private readonly source: string,
  ) {}

  /**
   * Reads ROOT/etc/passwd and ROOT/etc/group; a missing (or linked) file leaves only "root" (id 0)
   * known.
   */
  static async load(beneath: Beneath, root: string): Promise<Accounts> {
    const parse = async (file: string): Promise<Map<string, number>> => {
      const out = new Map<string, number>([['root', 0]]);
      const text = (await readBeneath(beneath, file))?.toString('utf8') ?? '';
      for (const line of text.split('\n')) {
        const [name, , id] = line.split(':');
        if (name && id !== undefined && /^\d+$/.test(id)) out.set(name, Number(id));
      }
      return out;
    };
    const [users, groups] = await Promise.all([parse('/etc/passwd'), parse('/etc/group')]);
    return new Accounts(users, groups, hostPath(root, '/etc'));
  }

  uid(user: string): number {
    return this.lookup(this.users, user, 'user', 'passwd');
  }

  gid(group: string): number {
    return this.lookup(this.groups, group, 'group', 'group');
  }

  private lookup(
    map: ReadonlyMap<string, number>,
    name: string,
    what: string,
    file: string,
  ): number {
    if (/^\d+$/.test(name)) return Number(name);
    const id = map.get(name);
    if (id === undefined) {
      throw new Error(
        `${what} "${name}" does not exist in ${this.source}/${file}: create it first (for example with a provision step, or a package in spec.packages) or use a numeric id`,
      );
    }
    return id;
  }
}

export interface Ownership {
  uid: number;
  gid: number;
}

/** A complete, durable temp file waiting to replace `name` in `dir`. */
export interface Temp {
  dir: Dir;
  name: string;
  temp: string;
}

/** Directories whose renames still need an fsync, by node path. */
export type DirsToSync = Map<string, Dir>;

/** A file's content: bytes, or a copy written to the new file's descriptor (copyFrom). */
export type Content = Uint8Array | ((to: FileHandle) => Promise<void>);

/** Copies an open file, 64 KiB at a time: a large file is never held in memory. */
export function copyFrom(from: FileHandle): (to: FileHandle) => Promise<void> {
  return async (to) => {
    const buf = Buffer.allocUnsafe(64 * 1024);
    for (let position = 0; ;) {
      const { bytesRead } = await from.read(buf, 0, buf.length, position);
      if (bytesRead === 0) return;
      await to.write(buf, 0, bytesRead);
      position += bytesRead;
    }
  };
}

/**
 * Writes the complete file to a new temp file in `dir`: created exclusively, never through a link,
 * mode 0600 until owner and mode are set on the descriptor (chown before chmod: chown clears
 * setuid and setgid bits), then fsync. The target is not touched yet.
 */
export async function writeTempIn(
  dir: Dir,
  name: string,
  content: Content,
  mode: number,
  owner: Ownership | undefined,
  /** Draws a temp name (tests pass their own). */
  draw: () => string = randomTempName,
): Promise<Temp> {
  for (let attempt = 0; ; attempt++) {
    const temp = draw();
    let handle: FileHandle;
    try {
      handle = await open(
        dir.at(temp),
        constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
        0o600,
      );
    } catch (error) {
      if (errnoOf(error) === 'EEXIST' && attempt < 5) continue; // someone's name: draw again
      throw error;
    }
    try {
      if (typeof content === 'function') await content(handle);
      else await handle.writeFile(content);
      if (owner) await handle.chown(owner.uid, owner.gid);
      await handle.chmod(mode);
      await handle.sync();
    } catch (error) {
      await handle.close();
      await unlink(dir.at(temp)).catch(() => undefined);
      throw error;
    }
    await handle.close();
    return { dir, name, temp };
  }
}

/**
 * The first half of an atomic write of `path` beneath the root: parents created (0755) as needed,
 * the complete file in a temp file next to it.
 */
export async function writeTemp(
  beneath: Beneath,
  path: string,
  content: Uint8Array,
  mode: number,
  owner: Ownership | undefined,
): Promise<Temp> {
  const where = await beneath.parent(path, true);
  if (!where) throw new Error(`cannot create the directories of ${path}`);
  return writeTempIn(where.dir, where.name, content, mode, owner);
}

/** The second half: the temp file replaces its target in one rename, by name in its directory. */
export async function commitTemp(t: Temp, dirsToSync?: DirsToSync): Promise<void> {
  try {
    await rename(t.dir.at(t.temp), t.dir.at(t.name));
  } catch (error) {
    await discardTemp(t);
    const code = errnoOf(error);
    if (code === 'EISDIR' || code === 'ENOTEMPTY' || code === 'EEXIST') {
      throw new Error(
        `${join(t.dir.path, t.name)} is a directory where the config declares a file: remove the directory, or change the path`,
        { cause: error },
      );
    }
    throw error;
  }
  if (dirsToSync) dirsToSync.set(t.dir.path, t.dir);
  else await t.dir.handle.sync();
}

export async function discardTemp(t: Temp): Promise<void> {
  await unlink(t.dir.at(t.temp)).catch(() => undefined);
}

/** writeTemp and commitTemp in one. */
export async function writeFileAtomic(
  beneath: Beneath,
  path: string,
  content: Uint8Array,
  mode: number,
  owner: Ownership | undefined,
  dirsToSync?: DirsToSync,
): Promise<void> {
  await commitTemp(await writeTemp(beneath, path, content, mode, owner), dirsToSync);
}

/**
 * Removes a file oscar wrote. Nothing else is removed: a path that is gone is fine (the action may
 * be resumed after a crash); a directory or a link found where oscar wrote a file, or a path that
 * now leads through a link, is something oscar did not write and is left alone. Returns why it
 * was left, or undefined when the file was removed (or already gone).
 */
export async function removeFile(
  beneath: Beneath,
  path: string,
  dirsToSync?: DirsToSync,
): Promise<string | undefined> {
  let where;
  try {
    where = await beneath.parent(path, false);
  } catch (error) {
    if (error instanceof SymlinkRefused || error instanceof NotADirectory) {
      return `not removed: ${error.message}`;
    }
    throw error;
  }
  if (!where) return undefined;
  const at = where.dir.at(where.name);
  const st = await lstat(at).catch((error: unknown) => {
    if (errnoOf(error) === 'ENOENT') return undefined;
    throw error;
  });
  if (!st) return undefined;
  if (!st.isFile()) {
    const what = st.isDirectory()
      ? 'a directory'
      : st.isSymbolicLink()
        ? 'a symbolic link'
        : 'not a regular file';
    return `not removed: ${path} is now ${what}, which oscar did not write`;
  }
  try {
    await unlink(at);
  } catch (error) {
    if (errnoOf(error) === 'ENOENT') return undefined;
    throw error;
  }
  if (dirsToSync) dirsToSync.set(where.dir.path, where.dir);
  else await where.dir.handle.sync();
  return undefined;
}

export async function syncDirs(dirs: DirsToSync): Promise<void> {
  await Promise.all([...dirs.values()].map((d) => d.handle.sync()));
  dirs.clear();
}

/**
 * Removes the temp files a killed apply left in the directories it was writing (names only oscar
 * makes, regular files only; nothing is followed). Returns how many.
 */
export async function removeStaleTemps(
  beneath: Beneath,
  dirPaths: Iterable<string>,
): Promise<number> {
  let removed = 0;
  for (const path of new Set(dirPaths)) {
    let dir: Dir | undefined;
    try {
      dir = await beneath.dir(path, false);
    } catch {
      continue; // a link or a file there now: nothing of oscar's to clean
    }
    if (!dir) continue;
    for (const name of await readdir(dir.at('.'))) {
      if (!isTempName(name)) continue;
      const st = await lstat(dir.at(name)).catch(() => undefined);
      if (!st?.isFile()) continue;
      await unlink(dir.at(name)).catch(() => undefined);
      removed++;
    }
  }
  return removed;
}

export interface ObserveOptions {
  /** Compare owners (false in a sandbox where oscar cannot chown). */
  owners: boolean;
  accounts: Accounts;
  /**
   * Read a file of another size than the declared one too, up to this many bytes (`oscar plan`
   * shows what a write replaces); the agent does not: such a file differs anyway.
   */
  readOtherSizesUpTo?: number;
  /** Only these paths (a revert's scope); the others are not read and not in the result. */
  only?: ReadonlySet<string>;
}

/**
 * What is on disk for every path the desired and the last-applied config name. Owners are
 * reported in the desired config's own words ("kubelet" rather than 998) when the ids match, so
 * the planner compares names without knowing about /etc/passwd.
 */
export async function observe(
  beneath: Beneath,
  desired: ResolvedConfig,
  lastApplied: ResolvedConfig | undefined,
  opts: ObserveOptions,
): Promise<ObservedDisk> {
  const want = entriesOf(desired);
  const last = entriesOf(lastApplied);
  const only = opts.only;
  const list = only
    ? [...only].filter((p) => want.has(p) || last.has(p))
    : [...new Set([...want.keys(), ...last.keys()])];
  const files = new Map<string, ObservedFile>();
  const results = await mapLimit(list, 32, (p) =>
    readSeen(beneath, p, want.get(p)?.content.length, opts.readOtherSizesUpTo),
  );
  list.forEach((path, i) => {
    const seen = results[i];
    if (!seen) return;
    const file: ObservedFile = { content: seen.content, mode: seen.mode };
    if (opts.owners) {
      const entry = want.get(path);
      file.user =
        entry && safeId(() => opts.accounts.uid(entry.user)) === seen.uid
          ? entry.user
          : String(seen.uid);
      file.group =
        entry && safeId(() => opts.accounts.gid(entry.group)) === seen.gid
          ? entry.group
          : String(seen.gid);
    }
    files.set(path, file);
  });
  return { files };
}

function safeId(f: () => number): number | undefined {
  try {
    return f();
  } catch {
    return undefined;
  }
}
