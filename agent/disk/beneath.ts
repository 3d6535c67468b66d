/**
 * Paths beneath a root, resolved one name at a time without following a link the agent did not
 * make. The agent runs as root and writes into directories other users may own
 * (/home/core/.ssh): a path resolved by the kernel in one go follows whatever links such a user
 * plants, in any component, between any check and any use.
 *
 * Node has no openat(2), but Linux names the directory an open descriptor refers to as
 * /proc/self/fd/N: "/proc/self/fd/N/name" looks `name` up in exactly that directory, wherever it
 * has been moved meanwhile. So a directory is opened by opening each name below the directory
 * opened before it, with O_NOFOLLOW|O_DIRECTORY, from a descriptor of the root; files are created,
 * renamed, read and removed by name in such a directory. No component is ever looked up through a
 * path string that someone else could change after it was checked.
 *
 * A symbolic link on the way is refused (SymlinkRefused names the path and the link), except the
 * few an operating system makes itself (OS_LINKS: /var/run -> /run, the merged-/usr links), and
 * only when the link is owned by root (or by the agent's own user in a directory root) and points
 * where the list says; its target is then resolved the same way, beneath the root.
 */
import { constants } from 'node:fs';
import { lstat, mkdir, open, readlink, type FileHandle } from 'node:fs/promises';
import { posix } from 'node:path';

/** Links an OS makes itself, by path, with the only target accepted for each. */
export const OS_LINKS: ReadonlyMap<string, string> = new Map([
  ['/bin', '/usr/bin'],
  ['/sbin', '/usr/sbin'],
  ['/lib', '/usr/lib'],
  ['/lib32', '/usr/lib32'],
  ['/lib64', '/usr/lib64'],
  ['/libx32', '/usr/libx32'],
  ['/var/run', '/run'],
  ['/var/lock', '/run/lock'],
]);

/** An allowed link may lead to another allowed link; more than this is a loop. */
const MAX_LINKS = 4;

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;

/** A symbolic link on a path the agent writes, reads or removes, which it does not follow. */
export class SymlinkRefused extends Error {
  constructor(
    /** The node path the agent was resolving. */
    readonly path: string,
    /** The component that is a link. */
    readonly link: string,
    readonly target: string,
    why: string,
  ) {
    super(
      `refusing ${path}: ${link} is a symbolic link (to ${target}) ${why}; the agent follows no link it did not make (docs/agent.md, "Security model"): replace the link with a directory, or declare the path it points to`,
    );
    this.name = 'SymlinkRefused';
  }
}

/** Something other than a directory where a path needs one. */
export class NotADirectory extends Error {
  constructor(readonly path: string) {
    super(
      `${path} is not a directory, but a declared path needs it to be one: remove it, or change the declared path`,
    );
    this.name = 'NotADirectory';
  }
}

function errnoOf(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}

/** "/a/b/c" → ["/a/b", "c"]; "/c" → ["/", "c"]. */
export function splitPath(path: string): [string, string] {
  const slash = path.lastIndexOf('/');
  return [slash <= 0 ? '/' : path.slice(0, slash), path.slice(slash + 1)];
}

/** An open directory beneath the root, and its node path. */
export interface Dir {
  readonly path: string;
  readonly handle: FileHandle;
  /** The host path of `name` in this directory, looked up in the directory itself. */
  at(name: string): string;
}

function dirOf(path: string, handle: FileHandle): Dir {
  const base = `/proc/self/fd/${String(handle.fd)}`;
  return { path, handle, at: (name) => `${base}/${name}` };
}

export interface BeneathOptions {
  /** Owners an allowed OS link may have: root, and in a directory root the agent's own user. */
  linkOwners?: readonly number[];
}

/**
 * Directories beneath one root, opened safely and kept open (by node path) until close(): an apply
 * opens each directory it writes in once, however many files it writes there.
 */
export class Beneath {
  private readonly dirs = new Map<string, Promise<Dir | undefined>>();
  /** Directories found, for the common case: a lookup without a promise chain. */
  private readonly opened = new Map<string, Dir>();
  /** Every descriptor opened, closed by close() whatever became of its cache entry. */
  private readonly handles = new Set<FileHandle>();
  private readonly linkOwners: ReadonlySet<number>;

  private constructor(
    private readonly root: Dir,
    opts: BeneathOptions,
  ) {
    this.linkOwners = new Set(opts.linkOwners ?? [0, process.geteuid?.() ?? 0]);
  }

  /**
   * Opens the root itself (the operator's choice: "/" on a node, a directory in local mode). Needs
   * /proc, as every Linux node has it.
   */
  static async open(root: string, opts: BeneathOptions = {}): Promise<Beneath> {
    let handle: FileHandle;
    try {
      handle = await open(root, constants.O_RDONLY | constants.O_DIRECTORY);
    } catch (error) {
      throw new Error(`cannot open the root ${root}: ${(error as Error).message}`, {
        cause: error,
      });
    }
    const dir = dirOf('/', handle);
    try {
      await lstat(dir.at('.'));
    } catch (error) {
      await handle.close();
      throw new Error(
        `cannot resolve paths beneath ${root}: /proc/self/fd is not available (${(error as Error).message}); the agent needs /proc mounted`,
        { cause: error },
      );
    }
    return new Beneath(dir, opts);
  }

  /**
   * The directory at node path `path`, opened without following a foreign link; missing ones are
   * created (mode 0755) when `create`, else undefined is returned.
   */
  dir(path: string, create: boolean): Promise<Dir | undefined> {
    return this.dirAt(path, create, 0);
  }

  /** The directory that holds `path`, and the name of `path` in it. */
  async parent(path: string, create: boolean): Promise<{ dir: Dir; name: string } | undefined> {
    const [dirPath, name] = splitPath(path);
    const dir = await this.dir(dirPath, create);
    return dir && { dir, name };
  }

  private dirAt(path: string, create: boolean, links: number): Promise<Dir | undefined> {
    if (path === '/') return Promise.resolve(this.root);
    const opened = this.opened.get(path);
    if (opened) return Promise.resolve(opened);
    const known = this.dirs.get(path);
    if (known && !create) return known;
    // Concurrent callers share one promise per path, so a directory is opened once; one found
    // missing is looked up again (and created) when a caller asks to create it.
    const next = known
      ? known.then((d) => d ?? this.openDir(path, true, links))
      : this.openDir(path, create, links);
    this.dirs.set(path, next);
    // a failure is not kept: the next call tries again (and reports again)
    next.then(
      (d) => {
        if (d) this.opened.set(path, d);
      },
      () => {
        if (this.dirs.get(path) === next) this.dirs.delete(path);
      },
    );
    return next;
  }

  private async openDir(path: string, create: boolean, links: number): Promise<Dir | undefined> {
    const [parentPath, name] = splitPath(path);
    const parent = await this.dirAt(parentPath, create, links);
    if (!parent) return undefined;
    const at = parent.at(name);
    for (let attempt = 0; ; attempt++) {
      try {
        const handle = await open(at, DIR_FLAGS);
        this.handles.add(handle);
        return dirOf(path, handle);
      } catch (error) {
        const code = errnoOf(error);
        if (code === 'ENOENT' && create && attempt < 3) {
          try {
            await mkdir(at, { mode: 0o755 });
          } catch (mkdirError) {
            if (errnoOf(mkdirError) !== 'EEXIST') throw mkdirError;
          }
          continue;
        }
        if (code === 'ENOENT') return undefined;
        if (code === 'ELOOP' || code === 'ENOTDIR') {
          const st = await lstat(at).catch(() => undefined);
          if (st?.isSymbolicLink()) return this.followOsLink(path, at, st.uid, create, links);
          if (st && !st.isDirectory()) throw new NotADirectory(path);
          continue; // changed under us: look again
        }
        throw error;
      }
    }
  }

  /** An OS link is followed, beneath the root, when it is on the list and trustworthy. */
  private async followOsLink(
    path: string,
    at: string,
    uid: number,
    create: boolean,
    links: number,
  ): Promise<Dir | undefined> {
    const target = await readlink(at).catch(() => '?');
    const expected = OS_LINKS.get(path);
    if (expected === undefined) {
      throw new SymlinkRefused(path, path, target, 'that is not one of the OS links it allows');
    }
    if (!this.linkOwners.has(uid)) {
      throw new SymlinkRefused(
        path,
        path,
        target,
        `owned by uid ${String(uid)}, not root: an OS link is owned by root`,
      );
    }
    const resolved = posix.normalize(
      posix.isAbsolute(target) ? target : posix.join(posix.dirname(path), target),
    );
    if (resolved !== expected || links >= MAX_LINKS) {
      throw new SymlinkRefused(path, path, target, `that does not point to ${expected}`);
    }
    return this.dirAt(expected, create, links + 1);
  }

  /** Closes every directory opened. */
  async close(): Promise<void> {
    await Promise.all([...this.dirs.values()].map((p) => p.catch(() => undefined)));
    this.dirs.clear();
    this.opened.clear();
    const handles = [...this.handles, this.root.handle];
    this.handles.clear();
    await Promise.all(handles.map((h) => h.close()));
  }
}
