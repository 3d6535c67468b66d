/**
 * The agent's state directory, opened and checked before anything in it is trusted: it must be a
 * real directory (reached without following a link other than an OS link, see agent/disk/beneath.ts),
 * owned by the agent's own user (root on a node), and writable by nobody else — whoever can write
 * there can make the agent re-apply, resume or skip whatever they like. Its files are then read
 * and written by name in the open directory, never through its path again.
 */
import { constants } from 'node:fs';
import { mkdir, open, rm, unlink, type FileHandle } from 'node:fs/promises';
import { Beneath, NotADirectory, SymlinkRefused, splitPath, type Dir } from './disk/beneath.js';
import { commitTemp, readFileIn, writeTempIn } from './disk/fs.js';
import { posix, resolve } from 'node:path';

/** A problem with the state directory or a file in it: names the file and the fix. */
export class StateError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'StateError';
  }
}

export class StateDir {
  /** Subdirectories opened by subdir(), closed with the state directory. */
  private readonly subdirs: FileHandle[] = [];

  private constructor(
    readonly path: string,
    private readonly beneath: Beneath,
    readonly dir: Dir,
  ) {}

  /** Opens (creating it 0700 when missing) and checks the state directory at host path `path`. */
  static async open(path: string): Promise<StateDir> {
    const state = await StateDir.openIn(path, true);
    if (!state) throw new StateError(`${path} vanished while the agent opened it`);
    return state;
  }

  /**
   * Opens and checks the state directory when it exists; undefined when it (or a parent) is
   * missing. Reading never creates it: `oscar plan` is a dry run and must leave the host as it was.
   */
  static openExisting(path: string): Promise<StateDir | undefined> {
    return StateDir.openIn(path, false);
  }

  private static async openIn(path: string, create: boolean): Promise<StateDir | undefined> {
    const absolute = posix.normalize(resolve(path));
    const beneath = await Beneath.open('/');
    try {
      const [parentPath, name] = splitPath(absolute);
      const parent = await beneath.dir(parentPath, create);
      if (!parent) {
        if (!create) {
          await beneath.close();
          return undefined;
        }
        throw new StateError(`cannot create ${parentPath}`);
      }
      if (create) {
        await mkdir(parent.at(name), { mode: 0o700 }).catch((error: unknown) => {
          if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
        });
      }
      const dir = await beneath.dir(absolute, false);
      if (!dir) {
        await beneath.close();
        return undefined;
      }
      const st = await dir.handle.stat();
      const me = process.geteuid?.() ?? 0;
      if (st.uid !== me) {
        throw new StateError(
          `the state directory ${absolute} is owned by uid ${String(st.uid)}, not by the agent's user (uid ${String(me)}): whoever owns it can steer the agent; fix: chown ${String(me)} ${absolute} (or remove it)`,
        );
      }
      if ((st.mode & 0o022) !== 0) {
        throw new StateError(
          `the state directory ${absolute} is writable by ${(st.mode & 0o002) !== 0 ? 'everyone' : 'its group'} (mode ${(st.mode & 0o7777).toString(8).padStart(4, '0')}): another user could plant or replace its files; fix: chmod go-w ${absolute}`,
        );
      }
      return new StateDir(absolute, beneath, dir);
    } catch (error) {
      await beneath.close();
      if (error instanceof SymlinkRefused || error instanceof NotADirectory) {
        throw new StateError(
          `the state directory ${absolute} is not safe to use: ${error.message}`,
          {
            cause: error,
          },
        );
      }
      throw error;
    }
  }

  /** Opens the state directory, runs `fn` with it, closes it. */
  static async with<T>(path: string, fn: (state: StateDir) => Promise<T>): Promise<T> {
    const state = await StateDir.open(path);
    try {
      return await fn(state);
    } finally {
      await state.close();
    }
  }

  /** The file's host path, for messages. */
  file(name: string): string {
    return posix.join(this.path, name);
  }

  /** A regular file's bytes; undefined when it is missing (or is no regular file). */
  read(name: string): Promise<Buffer | undefined> {
    return readFileIn(this.dir, name);
  }

  /** Replaces the file atomically (temp file, fsync, rename, fsync of the directory), mode 0600. */
  async write(name: string, bytes: Uint8Array): Promise<void> {
    await commitTemp(await writeTempIn(this.dir, name, bytes, 0o600, undefined));
  }

  async remove(name: string): Promise<void> {
    await unlink(this.dir.at(name)).catch((error: unknown) => {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    });
  }

  /** Opens a file in the directory without following a link (O_NOFOLLOW is added). */
  openFile(name: string, flags: number, mode = 0o600): Promise<FileHandle> {
    return open(this.dir.at(name), flags | constants.O_NOFOLLOW, mode);
  }

  /**
   * A directory in the state directory (created 0700 when `create`), opened by name without
   * following a link; undefined when it is missing.
   */
  async subdir(name: string, create: boolean): Promise<Dir | undefined> {
    const at = this.dir.at(name);
    if (create) {
      await mkdir(at, { mode: 0o700 }).catch((error: unknown) => {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      });
    }
    let handle: FileHandle;
    try {
      handle = await open(at, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') return undefined;
      if (code === 'ELOOP' || code === 'ENOTDIR') {
        throw new StateError(
          `${this.file(name)} is not a directory (a link or a file): remove it and let the agent make it again`,
          { cause: error },
        );
      }
      throw error;
    }
    this.subdirs.push(handle);
    const base = `/proc/self/fd/${String(handle.fd)}`;
    return { path: posix.join(this.path, name), handle, at: (entry) => `${base}/${entry}` };
  }

  /** Removes a directory of the state directory with everything in it (links are not followed). */
  async removeTree(name: string): Promise<void> {
    await rm(this.dir.at(name), { recursive: true, force: true });
  }

  async close(): Promise<void> {
    await Promise.all(this.subdirs.splice(0).map((h) => h.close()));
    await this.beneath.close();
  }
}
