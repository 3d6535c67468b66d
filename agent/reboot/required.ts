/**
 * Whether the node says it needs a reboot: Debian and Ubuntu's package scripts (a new kernel, a
 * new libc) create /var/run/reboot-required (/var/run is a link to /run). Looked up beneath the
 * root, so a link in a directory root never points the agent at the host's own /run.
 */
import { lstat } from 'node:fs/promises';
import { Beneath } from '../disk/beneath.js';

/** Where the packages leave the flag, /run first (what /var/run links to). */
export const REBOOT_REQUIRED_PATHS = ['/run/reboot-required', '/var/run/reboot-required'] as const;

export async function rebootRequired(root: string): Promise<boolean> {
  const beneath = await Beneath.open(root);
  try {
    for (const path of REBOOT_REQUIRED_PATHS) {
      const found = await beneath.parent(path, false).catch(() => undefined);
      if (!found) continue;
      const st = await lstat(found.dir.at(found.name)).catch(() => undefined);
      if (st?.isFile() === true) return true;
    }
    return false;
  } finally {
    await beneath.close();
  }
}
