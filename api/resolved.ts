/**
 * The resolved configuration: an OperatingSystemConfig with defaults applied and every file's
 * content turned into bytes (secretRef / configMapRef already looked up). Renderers, the
 * controller and the agent all work on this shape; its canonical form (api/canonical.ts) is
 * what the reconcile Secret carries and what the checksum is taken over.
 */
import type { DriftPolicy, Format, OnChange, Purpose, UnitCommand } from './schema.js';

export interface ResolvedFile {
  path: string;
  /** Numeric mode, 0 to 0o7777. */
  mode: number;
  user: string;
  group: string;
  content: Buffer;
  /** Absent: the config's driftPolicy applies. */
  driftPolicy?: DriftPolicy;
  /** Set only for "reboot" (absent is "none"), so configs without it keep their checksums. */
  onChange?: 'reboot';
}

export interface ResolvedDropIn {
  name: string;
  content: string;
}

export interface ResolvedUnit {
  name: string;
  enable: boolean;
  mask: boolean;
  command: UnitCommand;
  onChange: OnChange;
  /** Absent: the unit ships with the OS and oscar manages only its drop-ins. */
  content?: string;
  dropIns: ResolvedDropIn[];
  filePaths: string[];
  /** Absent: the config's driftPolicy applies. */
  driftPolicy?: DriftPolicy;
}

export interface ResolvedPackage {
  name: string;
  version?: string;
}

/** "name" or "name=version": how apt-get and zypper (and oscar's messages) name a package. */
export function packageSpec(p: ResolvedPackage): string {
  return p.version === undefined ? p.name : `${p.name}=${p.version}`;
}

export interface ResolvedCri {
  name: 'containerd';
  cgroupDriver: 'systemd' | 'cgroupfs';
}

export interface ResolvedConfig {
  type: string;
  purpose: Purpose;
  format?: Format;
  units: ResolvedUnit[];
  files: ResolvedFile[];
  packages: ResolvedPackage[];
  cri?: ResolvedCri;
  /** Absent: Report. */
  driftPolicy?: DriftPolicy;
}

/** "0644" → 0o644. Assumes the string was validated. */
export function parseMode(permissions: string): number {
  return parseInt(permissions, 8);
}

/** 0o644 → "0644": always four digits, the form cloud-init and humans expect. */
export function formatMode(mode: number): string {
  return mode.toString(8).padStart(4, '0');
}

/** Where systemd reads a unit oscar writes. */
export const UNIT_DIR = '/etc/systemd/system';

export function unitPath(unitName: string): string {
  return `${UNIT_DIR}/${unitName}`;
}

export function dropInPath(unitName: string, dropInName: string): string {
  return `${UNIT_DIR}/${unitName}.d/${dropInName}`;
}

/** "1000" and the like: an owner given by id, which needs no lookup. */
export function isNumericId(part: string): boolean {
  const c = part.charCodeAt(0);
  return c >= 0x30 && c <= 0x39 && /^[0-9]+$/.test(part);
}

/**
 * A file owned by a user or group *name* other than root is written after spec.packages are
 * installed, since a package may be what creates that user (cloud-init's `defer: true`); every
 * other file, unit files and drop-ins included, before them, since a package may need them (an
 * apt source and its keyring). One rule for the agent, the script and the cloud-config.
 */
export function writtenAfterPackages(file: { user: string; group: string }): boolean {
  return (
    (file.user !== 'root' && !isNumericId(file.user)) ||
    (file.group !== 'root' && !isNumericId(file.group))
  );
}

/**
 * Freezes a config deeply enough that a mark kept beside it (validated, checked) stays true:
 * the config, its lists, units, drop-ins, files and packages; contents stay Buffers.
 */
export function freezeConfig(config: ResolvedConfig): ResolvedConfig {
  for (const unit of config.units) {
    for (const d of unit.dropIns) Object.freeze(d);
    Object.freeze(unit.dropIns);
    Object.freeze(unit.filePaths);
    Object.freeze(unit);
  }
  for (const file of config.files) Object.freeze(file);
  for (const p of config.packages) Object.freeze(p);
  Object.freeze(config.units);
  Object.freeze(config.files);
  Object.freeze(config.packages);
  if (config.cri) Object.freeze(config.cri);
  return Object.freeze(config);
}
