/**
 * The agent's file system side: atomic writes with mode and owner, removals, and observing what is
 * on disk for the planner — all relative to a root directory ("/" on a node, a sandbox in local
 * mode). User and group names are looked up in the root's own /etc/passwd and /etc/group, never
 * the host's, so a sandbox root resolves names the way the node would.
 */
import { constants } from 'node:fs';
import { lstat, mkdir, open, readFile, rename, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import type { ResolvedConfig } from '../api/resolved.js';
import type { ObservedDisk, ObservedFile } from './plan.js';
import { entriesOf } from './plan.js';

/** Where a node path lives on this host: under the root. */
export function hostPath(root: string, path: string): string {
  return root === '/' ? path : join(root, path);
}

/** The temp file next to `path` that a write goes through (one agent at a time: a fixed name). */
export function tempPathFor(path: string): string {
  return join(dirname(path), `.${basename(path)}.oscar-tmp`);
}

export class Accounts {
  private constructor(
    private readonly users: ReadonlyMap<string, number>,
    private readonly groups: ReadonlyMap<string, number>,
    private readonly source: string,
  ) {}

  /** Reads ROOT/etc/passwd and ROOT/etc/group; a missing file leaves only "root" (id 0) known. */
  static async load(root: string): Promise<Accounts> {
    const parse = async (file: string): Promise<Map<string, number>> => {
      const out = new Map<string, number>([['root', 0]]);
      let text: string;
      try {
        text = await readFile(hostPath(root, file), 'utf8');
      } catch {
        return out;
      }
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
        `${what} "${name}" does not exist in ${this.source}/${file}: create it first (for example with a provision step) or use a numeric id`,
      );
    }
    return id;
  }
}

export interface Ownership {
  uid: number;
  gid: number;
}

/**
 * Writes `content` to `target` so that a reader (or a crash at any instant) sees either the old or
 * the new file, never a mix: temp file in the same directory, mode and owner set on it, fsync,
 * rename over the target, fsync of the directory. Parents are created with mode 0755.
 */
export async function writeFileAtomic(
  target: string,
  content: Uint8Array,
  mode: number,
  owner: Ownership | undefined,
  /** Directories to fsync later in one go; without it the directory is synced now. */
  dirsToSync?: Set<string>,
): Promise<void> {
  await commitTemp(await writeTemp(target, content, mode, owner), target, dirsToSync);
}

/**
 * The first half of writeFileAtomic: the complete file, with owner and mode, durable (fsync) in a
 * temp file next to `target`, which is not touched yet. Returns the temp file's path.
 */
export async function writeTemp(
  target: string,
  content: Uint8Array,
  mode: number,
  owner: Ownership | undefined,
): Promise<string> {
  await mkdir(dirname(target), { recursive: true, mode: 0o755 });
  const temp = tempPathFor(target);
  const handle = await open(
    temp,
    constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC,
    0o600,
  );
  try {
    await handle.writeFile(content);
    if (owner) await handle.chown(owner.uid, owner.gid);
    await handle.chmod(mode); // after chown: chown clears setuid/setgid bits
    await handle.sync();
  } finally {
    await handle.close();
  }
  return temp;
}

/** The second half: the temp file (written by writeTemp) replaces `target` in one rename. */
export async function commitTemp(
  temp: string,
  target: string,
  dirsToSync?: Set<string>,
): Promise<void> {
  await rename(temp, target);
  const dir = dirname(target);
  if (dirsToSync) dirsToSync.add(dir);
  else await syncDir(dir);
}

/** Removes a file; a file already gone is fine (the action may be resumed after a crash). */
export async function removeFile(target: string, dirsToSync?: Set<string>): Promise<void> {
  try {
    await unlink(target);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    return;
  }
  if (dirsToSync) dirsToSync.add(dirname(target));
  else await syncDir(dirname(target));
}

export async function syncDir(dir: string): Promise<void> {
  const handle = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

async function observeOne(
  target: string,
): Promise<{ content: Buffer; mode: number; uid: number; gid: number } | undefined> {
  let st;
  try {
    st = await lstat(target);
  } catch (error) {
    if (
      (error as NodeJS.ErrnoException).code === 'ENOENT' ||
      (error as NodeJS.ErrnoException).code === 'ENOTDIR'
    ) {
      return undefined;
    }
    throw error;
  }
  if (!st.isFile()) {
    // a symlink or directory where oscar wants a file: report something that never matches
    return {
      content: Buffer.from(`(not a regular file: mode ${st.mode.toString(8)})`),
      mode: -1,
      uid: st.uid,
      gid: st.gid,
    };
  }
  return { content: await readFile(target), mode: st.mode & 0o7777, uid: st.uid, gid: st.gid };
}

export interface ObserveOptions {
  /** Compare owners (false in a sandbox where oscar cannot chown). */
  owners: boolean;
  accounts: Accounts;
}

/**
 * What is on disk for every path the desired and the last-applied config name. Owners are
 * reported in the desired config's own words ("kubelet" rather than 998) when the ids match, so
 * the planner compares names without knowing about /etc/passwd.
 */
export async function observe(
  root: string,
  desired: ResolvedConfig,
  lastApplied: ResolvedConfig | undefined,
  opts: ObserveOptions,
): Promise<ObservedDisk> {
  const want = entriesOf(desired);
  const paths = new Set([...want.keys(), ...entriesOf(lastApplied).keys()]);
  const files = new Map<string, ObservedFile>();
  const list = [...paths];
  const results = await mapLimit(list, 32, (p) => observeOne(hostPath(root, p)));
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

/** Runs `fn` over `items` with at most `limit` in flight, keeping order. */
export async function mapLimit<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<R>,
): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
