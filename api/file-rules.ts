/**
 * A file's owner and mode beyond their syntax: what the agent (root) and the renderers' scripts
 * would do with them on a node. Both layers of checks call these — an OSC's (api/deep-validate.ts)
 * and a resolved config's (api/validate-config.ts, which the agent and the renderers' guard run) —
 * so a config is refused the same way wherever it comes from.
 */

/**
 * The largest user or group id a file can be given. chown(2) reads 4294967295, (uid_t)-1, as
 * "leave it unchanged", so a file declared for that owner would stay root's; above it no id exists
 * (Node refuses the call, Ignition and chown(1) the config), so the apply would fail on every node.
 */
export const MAX_OWNER_ID = 4_294_967_294;

/** A message when `part` (a user or a group) is a numeric id no file can have, else undefined. */
function idProblem(part: string, what: 'user' | 'group'): string | undefined {
  if (!/^\d+$/.test(part)) return undefined;
  if (part.length <= 9 || Number(part) <= MAX_OWNER_ID) return undefined;
  return `the ${what} id ${part} is above ${MAX_OWNER_ID}, the largest id a file can have (4294967295 means "unchanged" to chown, so the file would stay root's): use the account's real id or its name`;
}

/** A message for an owner's numeric ids ("user:group", each part a name or an id), or undefined. */
export function checkOwnerIds(user: string, group: string): string | undefined {
  return idProblem(user, 'user') ?? idProblem(group, 'group');
}

const SETID = 0o6000;
const WORLD_WRITE = 0o002;
const GROUP_WRITE = 0o020;

/**
 * A message when `mode` lets another local account take over what root wrote, or undefined.
 *
 * - Writable by everyone (o+w): the agent writes as root the files root's services read or run
 *   (units, drop-ins, cron tables, profile scripts, binaries); any local account — a service's
 *   user, a process escaped from a container — could rewrite one and run as root. The sticky bit
 *   protects only a directory's entries, not a file's content, so it does not help.
 * - Set-user-id or set-group-id and writable by its group: whoever is in the group replaces the
 *   program and runs as its owner (root by default).
 *
 * Shared writing has a safe form: a group that owns the file and may write it, without set-id.
 */
export function checkModeSafety(mode: number): string | undefined {
  const octal = (m: number): string => m.toString(8).padStart(4, '0');
  const setIdGroupWritable = (m: number): boolean => (m & SETID) !== 0 && (m & GROUP_WRITE) !== 0;
  if ((mode & WORLD_WRITE) !== 0) {
    let fixed = mode & ~WORLD_WRITE;
    if (setIdGroupWritable(fixed)) fixed &= ~GROUP_WRITE;
    return `"${octal(mode)}" lets every local account write this file, which oscar writes as root for the node's services: any of them could rewrite it and run as root. Drop the others' write bit ("${octal(fixed)}"); to share it, give a group write access with owner "root:GROUP"`;
  }
  if (setIdGroupWritable(mode)) {
    return `"${octal(mode)}" is set-user-id or set-group-id and writable by its group: any member could replace the program and run as its owner. Drop the group's write bit ("${octal(mode & ~GROUP_WRITE)}")`;
  }
  return undefined;
}

/**
 * `mode` with the bits checkModeSafety refuses taken away (for generators of legal configs): the
 * others' write bit, and the group's where set-id stays.
 */
export function safeMode(mode: number): number {
  const m = mode & ~WORLD_WRITE;
  return (m & SETID) !== 0 ? m & ~GROUP_WRITE : m;
}
