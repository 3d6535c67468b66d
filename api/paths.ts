/**
 * The rules for the paths oscar writes on a node, in one place: the OSC's deep checks
 * (api/deep-validate.ts) and the checks of a resolved config (api/validate-config.ts, which the
 * agent and the renderers' guard run) both call these, so `oscar validate`, the controller and
 * the agent refuse the same paths for the same reasons.
 */
import { AGENT_STATE_DIR, NAME_MAX_BYTES } from './constants.js';
import { fieldError, type FieldError } from './field-error.js';
import { hiddenCharacter, uncomposed } from './visible-text.js';
import { dropInPath, unitPath } from './resolved.js';

/**
 * Directories the OS owns wholesale: writing a file *at* one of these paths would replace the
 * directory. (Files *inside* them are fine, except under the kernel's virtual file systems.)
 */
export const PROTECTED_PATHS = new Set([
  '/',
  '/bin',
  '/boot',
  '/dev',
  '/etc',
  '/etc/systemd',
  '/etc/systemd/system',
  '/home',
  '/lib',
  '/lib64',
  '/media',
  '/mnt',
  '/opt',
  '/proc',
  '/root',
  '/run',
  '/sbin',
  '/srv',
  '/sys',
  '/tmp',
  '/usr',
  '/usr/bin',
  '/usr/lib',
  '/usr/local',
  '/usr/local/bin',
  '/usr/sbin',
  '/usr/share',
  '/var',
  '/var/lib',
  '/var/log',
]);

/** Virtual file systems: nothing written there survives or means what it seems to. */
const VIRTUAL_ROOT_PREFIX = /^\/(?:proc|sys|dev)\//;

/** A message for a path, or undefined when the path is acceptable. */
export function checkFilePath(path: string): string | undefined {
  if (!path.startsWith('/')) return `must be an absolute path starting with "/" (got "${path}")`;
  if (path.includes('\0')) return 'must not contain a NUL byte';
  const hidden = hiddenCharacter(path) ?? uncomposed(path);
  if (hidden) return hidden;
  if (path.length > 1 && path.endsWith('/')) {
    return `must name a file, not a directory: remove the trailing "/" ("${path.replace(/\/+$/, '')}")`;
  }
  if (path.includes('//'))
    return `must be normalised: replace "//" with "/" ("${path.replace(/\/+/g, '/')}")`;
  if (path.includes('/.')) {
    const segments = path.split('/').slice(1);
    if (segments.includes('..'))
      return 'must not contain ".." segments: write the path it resolves to';
    if (segments.includes('.')) return 'must not contain "." segments: write the path without them';
  }
  if (PROTECTED_PATHS.has(path)) {
    return `"${path}" is a directory the operating system owns; name a file inside it instead`;
  }
  if (VIRTUAL_ROOT_PREFIX.test(path)) {
    return `"${path}" is on a kernel virtual file system; configure it another way (sysctl files in /etc/sysctl.d, udev rules in /etc/udev/rules.d)`;
  }
  if (path === AGENT_STATE_DIR || path.startsWith(`${AGENT_STATE_DIR}/`)) {
    return `"${path}" is inside ${AGENT_STATE_DIR}, the oscar agent's own state directory (its journal, last-applied config and lock); put the file elsewhere`;
  }
  return checkNameLengths(path);
}

/**
 * Every name on the path must fit a file system's NAME_MAX (255 bytes): a longer one can never be
 * created, so the apply would fail on every node, every time. UTF-8 takes at most three bytes per
 * UTF-16 unit, so a path shorter than 86 characters needs no counting.
 */
function checkNameLengths(path: string): string | undefined {
  if (path.length * 3 <= NAME_MAX_BYTES) return undefined;
  for (const name of path.split('/')) {
    if (name.length * 3 <= NAME_MAX_BYTES) continue;
    const bytes = Buffer.byteLength(name, 'utf8');
    if (bytes > NAME_MAX_BYTES) {
      return `the name "${name.slice(0, 40)}…" is ${bytes} bytes long; a file system takes at most ${NAME_MAX_BYTES} bytes per file or directory name: shorten it`;
    }
  }
  return undefined;
}

/**
 * A unit with drop-ins keeps them in the directory "NAME.d": a name longer than NAME_MAX - 2 leaves
 * that directory's name too long to create. A message, or undefined.
 */
export function checkDropInDirName(unitName: string): string | undefined {
  const dir = `${unitName}.d`;
  if (dir.length <= NAME_MAX_BYTES) return undefined; // unit names are ASCII: one byte each
  return `is ${unitName.length} characters long, so its drop-in directory "${dir.slice(0, 40)}…" would be longer than the ${NAME_MAX_BYTES} bytes a directory name may have: shorten the name to at most ${NAME_MAX_BYTES - 2} characters, or drop the drop-ins`;
}

/** A path a config makes oscar write, and the field that declares it (for messages). */
export interface DeclaredPath {
  path: string;
  field: string;
}

/**
 * The paths of the unit declared at `field` (spec.units[i]): its unit file, when oscar writes one,
 * and its drop-ins (undefined: a drop-in whose name is invalid, left out).
 */
export function unitPaths(
  name: string,
  writesUnitFile: boolean,
  dropIns: readonly (string | undefined)[],
  field: string,
  out: DeclaredPath[],
): void {
  if (writesUnitFile) out.push({ path: unitPath(name), field: `${field}.name` });
  dropIns.forEach((d, j) => {
    if (d !== undefined) {
      out.push({ path: dropInPath(name, d), field: `${field}.dropIns[${j}].name` });
    }
  });
}

/**
 * Paths that can never all be written: one of them is a directory of another (a file at /etc/app
 * and another at /etc/app/inner.conf; a file where a unit's drop-in directory must be; a file below
 * a unit file). Reported once per path that would have to be both a file and a directory, at its
 * declaration, naming the declaration below it.
 */
export function pathConflicts(declared: readonly DeclaredPath[]): FieldError[] {
  const byPath = new Map<string, DeclaredPath>();
  for (const d of declared) if (!byPath.has(d.path)) byPath.set(d.path, d);
  const out: FieldError[] = [];
  const reported = new Set<string>();
  for (const below of declared) {
    for (
      let end = below.path.lastIndexOf('/');
      end > 0;
      end = below.path.lastIndexOf('/', end - 1)
    ) {
      const dir = below.path.slice(0, end);
      const file = byPath.get(dir);
      if (!file || reported.has(dir)) continue;
      reported.add(dir);
      out.push(
        fieldError(
          file.field,
          `"${dir}" is written as a file, but ${below.field} ("${below.path}") needs it to be a directory; keep only one of them`,
        ),
      );
    }
  }
  return out;
}
