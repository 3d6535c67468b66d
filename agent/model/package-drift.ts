/**
 * When a declared package is drift: what the package manager's database says (InstalledPackage,
 * from dpkg's status file: agent/disk/dpkg.ts) against the declaration. Pure; the planner turns a
 * finding into a reinstall and the drift monitor into a report, in the same words.
 *
 * What counts: the package is not installed (removed, purged, only its config files left);
 * installed at another version than the one declared (a package declared without a version may
 * be at any); or left half-way by an interrupted dpkg (half-installed, unpacked,
 * half-configured). A package waiting for its triggers is installed.
 */
import type { ResolvedPackage } from '../../api/resolved.js';

/** One package in the package manager's database. */
export interface InstalledPackage {
  version: string;
  /** dpkg's state: installed, config-files, half-configured, unpacked, triggers-pending … */
  state: string;
}

export type PackageDriftReason = 'missing' | 'version' | 'broken';

export interface PackageDrift {
  reason: PackageDriftReason;
  expected: string;
  found: string;
}

/** dpkg's states in which the package is there and usable. */
const INSTALLED = new Set(['installed', 'triggers-pending', 'triggers-awaited']);
/** dpkg's states in which nothing of the package is left but, at most, its config files. */
const ABSENT = new Set(['not-installed', 'config-files']);

/** dpkg counts a missing epoch as 0: "0:1.2" and "1.2" are one version. */
function sameVersion(a: string, b: string): boolean {
  const bare = (v: string): string => (v.startsWith('0:') ? v.slice(2) : v);
  return bare(a) === bare(b);
}

export function describePackage(p: ResolvedPackage): string {
  return p.version === undefined ? 'installed' : `installed ${p.version}`;
}

/** How `seen` differs from `declared`, or undefined when it is what the declaration asks for. */
export function packageDrift(
  declared: ResolvedPackage,
  seen: InstalledPackage | undefined,
): PackageDrift | undefined {
  const expected = describePackage(declared);
  if (seen === undefined || ABSENT.has(seen.state)) {
    return {
      reason: 'missing',
      expected,
      found: seen ? `${seen.state} ${seen.version}` : 'missing',
    };
  }
  if (!INSTALLED.has(seen.state)) {
    return { reason: 'broken', expected, found: `${seen.state} ${seen.version}` };
  }
  if (declared.version !== undefined && !sameVersion(declared.version, seen.version)) {
    return { reason: 'version', expected, found: `installed ${seen.version}` };
  }
  return undefined;
}
