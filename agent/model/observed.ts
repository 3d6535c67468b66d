/**
 * What the node carries now, as the readers report it (agent/disk/fs.ts reads files for the planner,
 * agent/unit-state.ts asks systemd about units): the planner and the drift check compare
 * the desired state with these. Types only.
 */
import type { InstalledPackage } from './package-drift.js';

/** A file as the observer found it on disk. `user`/`group` undefined: ownership not compared. */
export interface ObservedFile {
  /** Undefined: not read, since it cannot match (another size, a link, not a regular file). */
  content: Buffer | undefined;
  mode: number;
  user?: string;
  group?: string;
}

/** What is on disk now, for every path of the desired and the last-applied config. */
export interface ObservedDisk {
  /** A path absent from the map does not exist on disk. */
  files: ReadonlyMap<string, ObservedFile>;
  /** What systemd says about declared units; absent (a directory root): no unit is compared. */
  units?: ReadonlyMap<string, ObservedUnit>;
  /**
   * The package manager's database (agent/disk/dpkg.ts): a package absent from the map is not
   * installed; the map absent (no database the agent reads): no package is compared.
   */
  packages?: ReadonlyMap<string, InstalledPackage>;
}

/** What the drift check found at a path (agent/disk/reader.ts): a file by its hash, or not one. */
export type Found =
  | { kind: 'file'; sha256: string; size: number; mode: number; uid: number; gid: number }
  | { kind: 'missing' }
  /** A symlink, a directory, a FIFO …: never what oscar wrote. */
  | { kind: 'other'; type: string };

/** A unit as `systemctl show` describes it. */
export interface ObservedUnit {
  /** LoadState: loaded, not-found, masked, bad-setting, error. */
  load: string;
  /** ActiveState: active, inactive, failed, activating, deactivating, reloading. */
  active: string;
  /** SubState, for messages: running, exited, dead, auto-restart … */
  sub: string;
  /** UnitFileState: enabled, disabled, static, masked, masked-runtime, indirect … ("" if none). */
  fileState: string;
  /** Result of the last run, for messages: success, exit-code, signal, start-limit-hit … */
  result: string;
  /** Type=oneshot without RemainAfterExit: inactive is where it rests after a successful run. */
  restsInactive: boolean;
}

export interface UnitStateReader {
  /** The state of each unit named; a unit systemd does not know comes back not-found. */
  read(units: readonly string[]): Promise<Map<string, ObservedUnit>>;
}
