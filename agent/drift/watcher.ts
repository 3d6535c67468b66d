/**
 * inotify on what oscar owns, through fs.watch, twice over:
 * - on directories: an editor's save (write a temp file, rename it over) or a `rm` replaces the
 *   inode a file watch would hold, while the parent directory sees every create, delete, rename,
 *   write, chmod and chown of its entries by name;
 * - on each owned file's inode (`track`, once a check found a regular file there): a directory
 *   hears only of changes made through names in it, so an edit through a hard link elsewhere, a
 *   bind mount or /proc/PID/fd would wait for the audit; the inode hears every write and chmod
 *   whatever name it came through. After a directory event that may have put another inode
 *   under the name (a create, rename or delete), the next check re-arms the file's watch.
 * No polling, no stat per file: the events only say which path to check, the check
 * (agent/drift/monitor.ts) reads it. Both kinds count against the kernel's inotify limits
 * (agent/drift/limits.ts): checked when the watches are set, and a refused watch says which
 * sysctl to raise and to what; the audit covers what is not watched.
 *
 * A directory that does not exist (someone removed it) is watched through its nearest existing
 * ancestor, and the watches are rebuilt when it appears (its files are then checked: they may
 * have been written before the watch existed). A watched directory that is removed or renamed
 * says so with an event named after itself; the watches are rebuilt the same way.
 *
 * For units: /run/systemd/units (systemd links invocation:UNIT there while a unit runs: a start,
 * stop, restart or failure changes it), /etc/systemd/system and its .wants/.requires directories
 * (enable, disable, mask) and /run/systemd/system (runtime masks). An event naming a declared
 * unit asks for a unit check.
 *
 * For packages: /var/lib/dpkg, whose `status` dpkg replaces at the end of every run (install,
 * remove, upgrade, by apt or by hand): its event asks for a package check. No polling.
 */
import { watch, type FSWatcher } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import { posix } from 'node:path';
import { DPKG_DIR, DPKG_STATUS } from '../disk/dpkg.js';
import { hostPath } from '../disk/fs.js';
import {
  limitProblem,
  readInotifyLimits,
  watchFailure,
  type InotifyLimits,
  type WatchNeed,
} from './limits.js';

export interface WatcherEvents {
  /** Something happened to this path (a node path oscar owns). */
  path(path: string): void;
  /** Something happened to a declared unit's state. */
  units(): void;
  /** The package manager's database changed. */
  packages(): void;
  /** A watch could not be set up: the audit still covers it. */
  error(error: Error): void;
  /** The kernel's inotify limits are too low for every watch (the message says what to raise). */
  limit(message: string): void;
}

/** Where systemd keeps what changes with a unit's state (node paths). */
export const UNIT_STATE_DIRS = ['/run/systemd/units', '/etc/systemd/system', '/run/systemd/system'];
const DEPENDENCY_DIR = /\.(wants|requires|upholds)$/;
const DPKG_STATUS_NAME = posix.basename(DPKG_STATUS);

interface Watched {
  /** Node path of the directory. */
  dir: string;
  handle: FSWatcher;
  /** Entries that are owned files: basename → node path. */
  files: Map<string, string>;
  /** Entries on the way to a missing directory: seeing one appear rebuilds the watches. */
  toward: Set<string>;
  /** A unit state directory: entries naming a declared unit ask for a unit check. */
  units: boolean;
  /** dpkg's directory: its status file changing asks for a package check. */
  packages: boolean;
}

export class DriftWatcher {
  private readonly watched = new Map<string, Watched>();
  private paths: ReadonlySet<string> = new Set();
  /** Inode watches: owned node path → the watch on the file itself. */
  private readonly inodes = new Map<string, FSWatcher>();
  /** Owned paths a directory event named by create, rename or delete: re-armed when checked. */
  private readonly moved = new Set<string>();
  /** The kernel refused a watch for want of room: no more inode watches until the next watch(). */
  private full = false;
  private limits: InotifyLimits | undefined;
  private limitsSaid: string | undefined;
  private units = new Set<string>();
  private packages = false;
  private rebuildTimer: NodeJS.Timeout | undefined;
  private rebuilding: Promise<void> | undefined;
  private closed = false;

  constructor(
    private readonly root: string,
    private readonly events: WatcherEvents,
    /** Quiet time before watches are rebuilt after a directory appeared or vanished. */
    private readonly rebuildDelayMs = 50,
    /** The kernel's limits (a test's stand-in; default /proc/sys/fs/inotify). */
    private readonly readLimits: () => Promise<InotifyLimits | undefined> = readInotifyLimits,
  ) {}

  /**
   * Watches the parents of `paths` and their files' inodes; the unit state directories when
   * `units` is not empty; the package manager's database when `packages`.
   */
  async watch(paths: readonly string[], units: readonly string[], packages = false): Promise<void> {
    this.paths = new Set(paths);
    this.units = new Set(units);
    this.packages = packages;
    this.full = false;
    for (const [path, handle] of this.inodes) {
      if (this.paths.has(path)) continue;
      handle.close();
      this.inodes.delete(path);
    }
    await this.rebuild(false);
    await this.checkLimits();
  }

  /** What every watch takes: the owned files' inodes and the directories watched now. */
  private need(): WatchNeed {
    return { files: this.paths.size, directories: this.watched.size };
  }

  /** Says once per verdict when the kernel's limits cannot hold every watch. */
  private async checkLimits(): Promise<void> {
    this.limits ??= await this.readLimits();
    const problem = this.limits ? limitProblem(this.need(), this.limits) : undefined;
    if (problem !== undefined && problem !== this.limitsSaid) this.events.limit(problem);
    this.limitsSaid = problem;
  }

  /**
   * A check read `path`: a regular file (`regular`) gets a watch on its inode, re-armed when a
   * directory event may have put another inode under the name; anything else gets none.
   */
  track(path: string, regular: boolean): void {
    if (this.closed) return;
    const had = this.inodes.get(path);
    const moved = this.moved.delete(path);
    if (had && regular && !moved) return;
    had?.close();
    this.inodes.delete(path);
    if (!regular || !this.paths.has(path) || this.full) return;
    const handle = this.openInode(path);
    if (handle) this.inodes.set(path, handle);
  }

  private openInode(path: string): FSWatcher | undefined {
    let handle: FSWatcher;
    try {
      handle = watch(hostPath(this.root, path), (event) => {
        if (this.closed || this.inodes.get(path) !== handle) return;
        // 'rename': the inode was moved or its last name removed; the check re-arms the watch
        if (event === 'rename') this.moved.add(path);
        this.events.path(path);
      });
    } catch (error) {
      this.refused(path, error as NodeJS.ErrnoException);
      return undefined;
    }
    handle.on('error', () => {
      handle.close();
      if (this.inodes.get(path) === handle) this.inodes.delete(path);
      this.events.path(path);
    });
    return handle;
  }

  private refused(path: string, error: NodeJS.ErrnoException): void {
    if (error.code === 'ENOENT' || error.code === 'ENOTDIR') {
      this.events.path(path); // gone meanwhile: the check sees it
      return;
    }
    const message = watchFailure(error.code, this.need(), this.limits);
    if (message === undefined) {
      this.events.error(new Error(`cannot watch ${path}: ${error.message}`));
      return;
    }
    this.full = true;
    if (message !== this.limitsSaid) this.events.limit(message);
    this.limitsSaid = message;
  }

  /** The file at `path` is watched on its inode. */
  tracks(path: string): boolean {
    return this.inodes.has(path);
  }

  /** The number of owned files watched on their inodes (a metric, and the tests' view). */
  get files(): number {
    return this.inodes.size;
  }

  /** Watches are about to be rebuilt (a directory appeared or vanished). */
  get busy(): boolean {
    return this.rebuildTimer !== undefined || this.rebuilding !== undefined;
  }

  /** The number of directories watched (a metric, and the tests' view). */
  get directories(): number {
    return this.watched.size;
  }

  close(): void {
    this.closed = true;
    if (this.rebuildTimer) clearTimeout(this.rebuildTimer);
    for (const w of this.watched.values()) w.handle.close();
    this.watched.clear();
    for (const h of this.inodes.values()) h.close();
    this.inodes.clear();
  }

  private scheduleRebuild(): void {
    if (this.closed || this.rebuildTimer) return;
    this.rebuildTimer = setTimeout(() => {
      this.rebuildTimer = undefined;
      void this.rebuild(true);
    }, this.rebuildDelayMs);
  }

  /**
   * Sets the watches to what the paths need now. `announce`: report every path of a directory
   * that is newly watched (it may have changed while it was not).
   */
  private async rebuild(announce: boolean): Promise<void> {
    while (this.rebuilding) await this.rebuilding;
    this.rebuilding = this.doRebuild(announce).finally(() => {
      this.rebuilding = undefined;
    });
    await this.rebuilding;
  }

  private async doRebuild(announce: boolean): Promise<void> {
    if (this.closed) return;
    const want = new Map<
      string,
      { files: Map<string, string>; toward: Set<string>; units: boolean; packages: boolean }
    >();
    const entry = (dir: string) => {
      let e = want.get(dir);
      if (!e) {
        e = { files: new Map(), toward: new Set(), units: false, packages: false };
        want.set(dir, e);
      }
      return e;
    };
    const byDir = new Map<string, string[]>();
    for (const p of this.paths) {
      const d = posix.dirname(p);
      const list = byDir.get(d);
      if (list) list.push(p);
      else byDir.set(d, [p]);
    }
    if (this.units.size > 0) {
      for (const d of UNIT_STATE_DIRS) if (!byDir.has(d)) byDir.set(d, []);
      for (const name of await this.dependencyDirs()) {
        const d = `/etc/systemd/system/${name}`;
        if (!byDir.has(d)) byDir.set(d, []);
      }
    }
    if (this.packages && !byDir.has(DPKG_DIR)) byDir.set(DPKG_DIR, []);
    for (const [dir, files] of byDir) {
      const anchor = await this.existingAncestor(dir);
      if (anchor === dir) {
        const e = entry(dir);
        for (const p of files) e.files.set(posix.basename(p), p);
        e.units ||= this.units.size > 0 && isUnitStateDir(dir);
        e.packages ||= this.packages && dir === DPKG_DIR;
      } else if (anchor !== undefined) {
        // watch the ancestor for the next component on the way down to `dir`
        const rest = dir.slice(anchor === '/' ? 1 : anchor.length + 1);
        entry(anchor).toward.add(rest.split('/')[0] ?? rest);
      }
    }
    const fresh: string[] = [];
    for (const [dir, w] of this.watched) {
      if (!want.has(dir)) {
        w.handle.close();
        this.watched.delete(dir);
      }
    }
    for (const [dir, e] of want) {
      const had = this.watched.get(dir);
      if (had) {
        had.files = e.files;
        had.toward = e.toward;
        had.units = e.units;
        had.packages = e.packages;
        continue;
      }
      const handle = this.open(dir);
      if (!handle) continue;
      this.watched.set(dir, { dir, handle, ...e });
      fresh.push(dir);
    }
    if (!announce) return;
    for (const dir of fresh) this.touchAll(dir);
  }

  private open(dir: string): FSWatcher | undefined {
    let handle: FSWatcher;
    try {
      handle = watch(hostPath(this.root, dir), (event, name) => {
        this.onEvent(dir, event, name);
      });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') {
        this.scheduleRebuild(); // gone meanwhile
        return undefined;
      }
      const message = watchFailure(code, this.need(), this.limits);
      if (message !== undefined && message !== this.limitsSaid) this.events.limit(message);
      else if (message === undefined)
        this.events.error(new Error(`cannot watch ${dir}: ${(error as Error).message}`));
      this.limitsSaid = message ?? this.limitsSaid;
      return undefined;
    }
    handle.on('error', (error) => {
      // the directory went away under the watch: rebuild from what exists now
      handle.close();
      if (this.watched.get(dir)?.handle === handle) this.watched.delete(dir);
      this.touchAll(dir);
      this.scheduleRebuild();
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') this.events.error(error);
    });
    return handle;
  }

  private onEvent(dir: string, event: string, name: string | null): void {
    const w = this.watched.get(dir);
    if (!w || this.closed) return;
    if (name === null) {
      // the kernel did not say which entry (an overflowed queue): everything here may have changed
      this.touchAll(dir);
      this.scheduleRebuild();
      return;
    }
    const owned = w.files.get(name);
    if (owned !== undefined) {
      // a create, rename or delete may have put another inode under the name
      if (event === 'rename') this.moved.add(owned);
      this.events.path(owned);
    }
    if (w.toward.has(name)) this.scheduleRebuild();
    if (w.units) {
      if (this.units.has(name) || this.units.has(name.replace(/^invocation:/, ''))) {
        this.events.units();
      }
      if (dir === '/etc/systemd/system' && DEPENDENCY_DIR.test(name)) this.scheduleRebuild();
    }
    if (w.packages && name === DPKG_STATUS_NAME) this.events.packages();
    if (name === posix.basename(dir)) {
      // the directory itself was removed or renamed (or an entry shares its name): the watch may
      // hold an inode that is gone, even if a new directory of that name exists already
      this.touchAll(dir);
      w.handle.close();
      this.watched.delete(dir);
      this.scheduleRebuild();
    }
  }

  private touchAll(dir: string): void {
    const w = this.watched.get(dir);
    for (const p of w?.files.values() ?? []) {
      this.moved.add(p);
      this.events.path(p);
    }
    if (w?.units) this.events.units();
    if (w?.packages) this.events.packages();
  }

  private async isDirectory(dir: string): Promise<boolean> {
    try {
      return (await stat(hostPath(this.root, dir))).isDirectory();
    } catch {
      return false;
    }
  }

  private async existingAncestor(dir: string): Promise<string | undefined> {
    for (let d = dir; ; d = posix.dirname(d)) {
      if (await this.isDirectory(d)) return d;
      if (d === '/') return undefined;
    }
  }

  private async dependencyDirs(): Promise<string[]> {
    try {
      const entries = await readdir(hostPath(this.root, '/etc/systemd/system'), {
        withFileTypes: true,
      });
      return entries
        .filter((e) => e.isDirectory() && DEPENDENCY_DIR.test(e.name))
        .map((e) => e.name);
    } catch {
      return [];
    }
  }
}

function isUnitStateDir(dir: string): boolean {
  return UNIT_STATE_DIRS.includes(dir) || DEPENDENCY_DIR.test(dir);
}
