/**
 * cloud-init's `write_files` opens a file under its own umask (systemd's 0022: a new file is
 * 0644), writes the content and only then chmods it to the declared mode (cloudinit/util.py,
 * `write_file`). A file whose mode denies group or other read — a key, a token, the bootstrap
 * kubeconfig — is readable by every local account for that moment, and a process that opened
 * it then keeps its descriptor. `write_files` truncates an existing file and keeps its mode, so
 * the cloud-config renderer has each such file made empty, 0600 and root's by a `bootcmd`
 * (bootcmd runs before write_files) before write_files opens it: the content is then only ever
 * written into a file no one else can open.
 *
 * The guard runs through `cloud-init-per instance`: bootcmd runs on every boot, the guard only on
 * an instance's first, so a reboot never empties a file. Per path it never follows a link planted
 * there (a link is left to cloud-init as before), makes the parents as cloud-init does (mkdir -p,
 * 0755), and puts a fresh inode in place by rename (mktemp makes it 0600 with O_EXCL): a file the
 * image already had, and any descriptor open on it, never sees the new content. It exits 0 so
 * cloud-init-per records it as done; a path it cannot prepare (a directory) fails in write_files.
 */
import type { TextFile } from './common.js';
import { scalar } from './yaml-writer.js';

/** Read bits for group and other: a mode without both of them is private. */
const GROUP_AND_OTHER_READ = 0o044;

/** The `cloud-init-per` name of the guard (its semaphore: bootper.oscar_private_files.instance). */
export const PRIVATE_FILES_GUARD_NAME = 'oscar-private-files';

/** $0 of the guard's shell: what `ps` and a failure message show. */
export const PRIVATE_FILES_GUARD_ARG0 = 'oscar';

/**
 * The guard's shell text; its arguments are the paths (absolute: no `--` needed). One short line,
 * since it is in every provision payload (YAML writes it double-quoted). `${p%/*}/` is the parent
 * with a trailing slash (`/` for a file in the root); mktemp makes its file 0600 and exclusively.
 */
export const PRIVATE_FILES_GUARD_SCRIPT =
  'for p do [ -L "$p" ]&&continue;d=${p%/*}/;(umask 22;mkdir -p "$d")&&' +
  't=$(mktemp "$d.oscar-XXXXXXXX")&&{ mv -Tf "$t" "$p"||rm -f "$t";};done;exit 0';

/** True for a mode that denies group or other read (0600, 0640, 0400, 0750; not 0644, 0755). */
export function isPrivateMode(mode: number): boolean {
  return (mode & GROUP_AND_OTHER_READ) !== GROUP_AND_OTHER_READ;
}

/** What the guard looks at of a file. */
type PathAndMode = Pick<TextFile, 'path' | 'mode'>;

/** The paths the guard must prepare, in write_files order. */
export function privatePaths(files: readonly PathAndMode[]): string[] {
  return files.filter((f) => isPrivateMode(f.mode)).map((f) => f.path);
}

/** The guard as a bootcmd command (an argv list), or undefined when no file is private. */
export function privateFilesGuard(files: readonly PathAndMode[]): string[] | undefined {
  const paths = privatePaths(files);
  if (paths.length === 0) return undefined;
  return [
    'cloud-init-per',
    'instance',
    PRIVATE_FILES_GUARD_NAME,
    'sh',
    '-c',
    PRIVATE_FILES_GUARD_SCRIPT,
    PRIVATE_FILES_GUARD_ARG0,
    ...paths,
  ];
}

/** The `bootcmd:` section carrying the guard ('' when no file is private). */
export function privateFilesBootcmd(files: readonly PathAndMode[]): string {
  const guard = privateFilesGuard(files);
  if (guard === undefined) return '';
  return (
    '# private files exist empty, 0600, before write_files writes them (once per instance)\n' +
    `bootcmd:\n  - [${guard.map(scalar).join(', ')}]\n`
  );
}
