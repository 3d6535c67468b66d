/**
 * The package manager's own database, as the planner and the drift check read it: dpkg's status
 * file (/var/lib/dpkg/status), which dpkg rewrites (a new file renamed over the old) at the end
 * of every run, so it is read whole and never half-written. Read beneath the root like every
 * other node path (agent/disk/beneath.ts): a link on the way is refused, never followed.
 *
 * A node without it (no dpkg: an rpm-based OS, Flatcar, a directory root in local mode) has no
 * package database oscar reads: its packages are not observed, so they are never drift.
 */
import type { InstalledPackage } from '../model/package-drift.js';
import { NotADirectory, SymlinkRefused, type Beneath } from './beneath.js';
import { readFileIn } from './fs.js';

export const DPKG_DIR = '/var/lib/dpkg';
export const DPKG_STATUS = `${DPKG_DIR}/status`;

/**
 * Package name → what dpkg says of it. A package installed for several architectures is listed
 * once, by its installed instance if it has one.
 */
export function parseDpkgStatus(text: string): Map<string, InstalledPackage> {
  const out = new Map<string, InstalledPackage>();
  for (const stanza of text.split(/\n\s*\n/)) {
    let name: string | undefined;
    let version = '';
    let state: string | undefined;
    for (const line of stanza.split('\n')) {
      if (line.startsWith(' ') || line.startsWith('\t')) continue; // a continuation line
      const colon = line.indexOf(':');
      if (colon < 0) continue;
      const value = line.slice(colon + 1).trim();
      switch (line.slice(0, colon)) {
        case 'Package':
          name = value;
          break;
        case 'Version':
          version = value;
          break;
        case 'Status':
          // "want flag state": install ok installed, deinstall ok config-files …
          state = value.split(/\s+/)[2];
      }
    }
    if (name === undefined || state === undefined) continue;
    const had = out.get(name);
    if (had?.state === 'installed') continue;
    out.set(name, { version, state });
  }
  return out;
}

/** dpkg's database beneath the root; undefined on a node without one. */
export async function readPackageDatabase(
  beneath: Beneath,
): Promise<Map<string, InstalledPackage> | undefined> {
  let bytes: Buffer | undefined;
  try {
    const where = await beneath.parent(DPKG_STATUS, false);
    bytes = where && (await readFileIn(where.dir, where.name));
  } catch (error) {
    if (error instanceof SymlinkRefused || error instanceof NotADirectory) return undefined;
    throw error;
  }
  if (bytes === undefined) return undefined;
  return parseDpkgStatus(bytes.toString('utf8'));
}
