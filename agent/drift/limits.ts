/**
 * The kernel's inotify limits, which the drift watch lives within: every owned file is watched
 * on its inode (so an edit through a hard link, a bind mount or an open descriptor is seen) and
 * every directory on its name (so a replace, a delete or a chmod by name is seen). Both count
 * against fs.inotify.max_user_watches, which every process of the same user shares; the agent
 * needs one inotify instance (Node keeps one per process) out of fs.inotify.max_user_instances.
 *
 * When a limit is too low the watch does what it can and the audit covers the rest; the message
 * names the sysctl and the number to set, so the operator can fix it. Pure but for the reader.
 */
import { readFile } from 'node:fs/promises';

export interface InotifyLimits {
  maxUserWatches: number;
  maxUserInstances: number;
}

/** What the watch needs: a watch per owned file's inode and per watched directory. */
export interface WatchNeed {
  files: number;
  directories: number;
}

/** Room left for the node's other watchers (systemd, udev, editors …) in the suggested number. */
const HEADROOM = 8_192;

const SYSCTL_DIR = '/proc/sys/fs/inotify';

/** The limits as the kernel reports them; undefined where it does not (no /proc). */
export async function readInotifyLimits(dir = SYSCTL_DIR): Promise<InotifyLimits | undefined> {
  const read = async (name: string): Promise<number | undefined> => {
    try {
      const n = Number((await readFile(`${dir}/${name}`, 'utf8')).trim());
      return Number.isSafeInteger(n) ? n : undefined;
    } catch {
      return undefined;
    }
  };
  const [maxUserWatches, maxUserInstances] = await Promise.all([
    read('max_user_watches'),
    read('max_user_instances'),
  ]);
  if (maxUserWatches === undefined || maxUserInstances === undefined) return undefined;
  return { maxUserWatches, maxUserInstances };
}

export function watchesNeeded(need: WatchNeed): number {
  return need.files + need.directories;
}

/** The number to set: what oscar needs plus room for the node's other watchers. */
export function suggestedWatches(need: WatchNeed): number {
  return watchesNeeded(need) + HEADROOM;
}

const FALLBACK =
  'until then an edit through another name of a file (hard link, bind mount, open descriptor) waits for the next audit';

function watchesMessage(need: WatchNeed, have: string): string {
  const n = watchesNeeded(need);
  const s = suggestedWatches(need);
  return (
    `inotify: the drift watch needs ${String(n)} watches (${String(need.files)} files and ` +
    `${String(need.directories)} directories) and ${have}; raise fs.inotify.max_user_watches to ` +
    `at least ${String(s)} (sysctl -w fs.inotify.max_user_watches=${String(s)}, and the same in ` +
    `/etc/sysctl.d/ to keep it); ${FALLBACK}`
  );
}

/** Why the watch cannot fit under these limits, or undefined when it can (checked at start). */
export function limitProblem(need: WatchNeed, limits: InotifyLimits): string | undefined {
  if (limits.maxUserInstances < 1) {
    return `inotify: fs.inotify.max_user_instances is ${String(limits.maxUserInstances)}; the drift watch needs 1 (sysctl -w fs.inotify.max_user_instances=128); ${FALLBACK}`;
  }
  if (watchesNeeded(need) > limits.maxUserWatches) {
    return watchesMessage(
      need,
      `fs.inotify.max_user_watches is ${String(limits.maxUserWatches)} for all processes of this user`,
    );
  }
  return undefined;
}

/**
 * What a failed watch means, by its error code: ENOSPC is the watch limit (other processes of
 * this user hold the rest), EMFILE the instance limit or the open-file limit.
 */
export function watchFailure(
  code: string | undefined,
  need: WatchNeed,
  limits: InotifyLimits | undefined,
): string | undefined {
  if (code === 'ENOSPC') {
    const max =
      limits === undefined
        ? 'the kernel refused more'
        : `fs.inotify.max_user_watches (${String(limits.maxUserWatches)}) is used up by this and other processes of this user`;
    return watchesMessage(need, max);
  }
  if (code === 'EMFILE') {
    const now = limits === undefined ? '' : ` (${String(limits.maxUserInstances)} now)`;
    return `inotify: no inotify instance could be opened: raise fs.inotify.max_user_instances${now} (sysctl -w fs.inotify.max_user_instances=${String(Math.max(128, (limits?.maxUserInstances ?? 0) * 2))}), or the agent's open-file limit (LimitNOFILE=); ${FALLBACK}`;
  }
  return undefined;
}
