/**
 * The resolved configuration: an OperatingSystemConfig with defaults applied and every file's
 * content turned into bytes (secretRef / configMapRef already looked up). Renderers, the
 * controller and the agent all work on this shape; its canonical form (api/canonical.ts) is
 * what the reconcile Secret carries and what the checksum is taken over.
 */
import type { Format, OnChange, Purpose, UnitCommand } from './schema.js';

export interface ResolvedFile {
  path: string;
  /** Numeric mode, 0 to 0o7777. */
  mode: number;
  user: string;
  group: string;
  content: Buffer;
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
