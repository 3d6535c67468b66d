/**
 * OS profiles: what an operating system needs on top of what the operator declared, added as a
 * pure step BEFORE any format is rendered, so every format (and the agent, through the reconcile
 * Secret) sees the same expanded configuration.
 *
 * - flatcar: its auto-update services would reboot a node under Kubernetes' feet; they are masked.
 * - spec.cri containerd (every OS): /etc/containerd/config.toml with the cgroup driver, and a
 *   drop-in for containerd.service that points it at that file and restarts it on failure.
 * - apt / zypper OSes: `containerd` joins spec.packages when spec.cri asks for it.
 *
 * Declarations always win: an extra is added only where the operator declared nothing at the
 * same path, unit or drop-in name. That also makes `expand` idempotent.
 */
import { compare } from '../api/resolve.js';
import type {
  ResolvedConfig,
  ResolvedCri,
  ResolvedFile,
  ResolvedPackage,
  ResolvedUnit,
} from '../api/resolved.js';

export type PackageManager = 'apt' | 'zypper';

export interface OsProfile {
  /** spec.type values this profile describes. */
  readonly types: readonly string[];
  /** How spec.packages are installed; undefined: detected at run time (generic) or none. */
  readonly packageManager?: PackageManager;
  /** False for OSes without a package manager (Flatcar): packages are refused. */
  readonly hasPackages: boolean;
  /** Units the OS needs masked. */
  readonly maskedUnits: readonly string[];
}

export const PROFILES: readonly OsProfile[] = [
  { types: ['ubuntu', 'debian'], packageManager: 'apt', hasPackages: true, maskedUnits: [] },
  { types: ['opensuse'], packageManager: 'zypper', hasPackages: true, maskedUnits: [] },
  {
    types: ['flatcar'],
    hasPackages: false,
    // update-engine downloads updates, locksmithd reboots to apply them: both are replaced by the
    // provider rolling machines.
    maskedUnits: ['locksmithd.service', 'update-engine.service'],
  },
];

/** A type no profile names (generic, a provider's own type): no extras, packages detected. */
export const GENERIC_PROFILE: OsProfile = { types: [], hasPackages: true, maskedUnits: [] };

export function profileFor(type: string, profiles: readonly OsProfile[] = PROFILES): OsProfile {
  return profiles.find((p) => p.types.includes(type)) ?? GENERIC_PROFILE;
}

export const CONTAINERD_CONFIG_PATH = '/etc/containerd/config.toml';
export const CONTAINERD_UNIT = 'containerd.service';
export const CONTAINERD_DROP_IN = '10-oscar-cri.conf';

/** containerd 1.x configuration (version 2) with the runc runtime's cgroup driver. */
export function containerdConfig(cri: ResolvedCri): string {
  return [
    '# Written by oscar from spec.cri: the container runtime of this Kubernetes node.',
    'version = 2',
    '',
    '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]',
    '  runtime_type = "io.containerd.runc.v2"',
    '',
    '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]',
    `  SystemdCgroup = ${cri.cgroupDriver === 'systemd' ? 'true' : 'false'}`,
    '',
  ].join('\n');
}

/**
 * CONTAINERD_CONFIG: Flatcar's containerd.service reads its config from this variable (its default
 * lives in /usr/share); Debian's and Ubuntu's read /etc/containerd/config.toml anyway.
 * Delegate=yes: kubelet's systemd cgroup driver needs containerd to own its cgroup subtree.
 */
export const CONTAINERD_DROP_IN_CONTENT = [
  '# Written by oscar from spec.cri.',
  '[Service]',
  `Environment=CONTAINERD_CONFIG=${CONTAINERD_CONFIG_PATH}`,
  'Delegate=yes',
  'Restart=always',
  'RestartSec=5',
  '',
].join('\n');

export interface Expanded {
  /** The declared configuration plus the extras, in resolve's order (units by name, files by path). */
  config: ResolvedConfig;
  /** Units the profile added or changed (the changed unit in its final form). */
  extraUnits: ResolvedUnit[];
  /** Files the profile added. */
  extraFiles: ResolvedFile[];
}

/** True when `items` are in `key` order without duplicates, as resolve leaves them. */
function strictlyOrdered<T>(items: readonly T[], key: (item: T) => string): boolean {
  for (let i = 1; i < items.length; i++) {
    if (compare(key(items[i - 1] as T), key(items[i] as T)) >= 0) return false;
  }
  return true;
}

function cloneUnit(unit: ResolvedUnit): ResolvedUnit {
  const copy: ResolvedUnit = {
    ...unit,
    dropIns: unit.dropIns.map((d) => ({ ...d })),
    filePaths: [...unit.filePaths],
  };
  return copy;
}

/**
 * Adds what the configuration's OS and runtime need. Pure: the input is not modified. Running it
 * on its own output adds nothing more.
 */
export function expand(
  config: ResolvedConfig,
  profiles: readonly OsProfile[] = PROFILES,
): Expanded {
  const profile = profileFor(config.type, profiles);
  if (
    config.cri === undefined &&
    profile.maskedUnits.length === 0 &&
    strictlyOrdered(config.units, (u) => u.name) &&
    strictlyOrdered(config.files, (f) => f.path)
  ) {
    return unexpanded(config);
  }
  const x: Expansion = {
    units: new Map(config.units.map((u) => [u.name, cloneUnit(u)])),
    files: new Map(config.files.map((f) => [f.path, f])),
    packages: config.packages.map((p) => ({ ...p })),
    changedUnits: new Set<string>(),
    extraFiles: [],
  };
  maskProfileUnits(x, profile);
  if (config.cri?.name === 'containerd') addContainerd(x, config.cri, profile);
  const expanded: ResolvedConfig = {
    ...config,
    units: [...x.units.values()].sort((a, b) => compare(a.name, b.name)),
    files: [...x.files.values()].sort((a, b) => compare(a.path, b.path)),
    packages: x.packages,
  };
  if (config.cri) expanded.cri = { ...config.cri };
  return {
    config: expanded,
    extraUnits: expanded.units.filter((u) => x.changedUnits.has(u.name)),
    extraFiles: x.extraFiles,
  };
}

/**
 * Nothing to add (the usual case without spec.cri) and in resolve's order already: fresh lists
 * of the same entries; anything else takes the general path.
 */
function unexpanded(config: ResolvedConfig): Expanded {
  return {
    config: {
      ...config,
      units: [...config.units],
      files: [...config.files],
      packages: config.packages.map((p) => ({ ...p })),
    },
    extraUnits: [],
    extraFiles: [],
  };
}

/** The expansion under way: fresh copies of the config's lists, and what was added or changed. */
interface Expansion {
  units: Map<string, ResolvedUnit>;
  files: Map<string, ResolvedFile>;
  packages: ResolvedPackage[];
  changedUnits: Set<string>;
  extraFiles: ResolvedFile[];
}

/** The OS's units to mask, unless the config declares them (the operator decided). */
function maskProfileUnits(x: Expansion, profile: OsProfile): void {
  for (const name of profile.maskedUnits) {
    if (x.units.has(name)) continue;
    x.units.set(name, {
      name,
      enable: false,
      mask: true,
      command: 'stop',
      onChange: 'none',
      dropIns: [],
      filePaths: [],
    });
    x.changedUnits.add(name);
  }
}

/** spec.cri containerd: its config file, its unit and drop-in, and its package. */
function addContainerd(
  x: Expansion,
  cri: NonNullable<ResolvedConfig['cri']>,
  profile: OsProfile,
): void {
  if (!x.files.has(CONTAINERD_CONFIG_PATH)) {
    const file: ResolvedFile = {
      path: CONTAINERD_CONFIG_PATH,
      mode: 0o644,
      user: 'root',
      group: 'root',
      content: Buffer.from(containerdConfig(cri), 'utf8'),
    };
    x.files.set(file.path, file);
    x.extraFiles.push(file);
  }
  const unit = containerdUnit(x);
  if (!unit.mask) pointUnitAtConfig(x, unit);
  if (
    profile.packageManager !== undefined &&
    !x.packages.some((p) => p.name === 'containerd' || p.name === 'containerd.io')
  ) {
    x.packages.push({ name: 'containerd' });
    x.packages.sort((a, b) => compare(a.name, b.name));
  }
}

/** The containerd unit, declared or added. */
function containerdUnit(x: Expansion): ResolvedUnit {
  const declared = x.units.get(CONTAINERD_UNIT);
  if (declared !== undefined) return declared;
  const unit: ResolvedUnit = {
    name: CONTAINERD_UNIT,
    enable: true,
    mask: false,
    // the runtime may already run from the image with its packaged config: restart it
    command: 'restart',
    onChange: 'restart',
    dropIns: [],
    filePaths: [],
  };
  x.units.set(unit.name, unit);
  x.changedUnits.add(unit.name);
  return unit;
}

/** The unit reads oscar's config (its drop-in) and restarts when the config file changes. */
function pointUnitAtConfig(x: Expansion, unit: ResolvedUnit): void {
  if (!unit.dropIns.some((d) => d.name === CONTAINERD_DROP_IN)) {
    unit.dropIns.push({ name: CONTAINERD_DROP_IN, content: CONTAINERD_DROP_IN_CONTENT });
    unit.dropIns.sort((a, b) => compare(a.name, b.name));
    x.changedUnits.add(unit.name);
  }
  if (!unit.filePaths.includes(CONTAINERD_CONFIG_PATH)) {
    unit.filePaths.push(CONTAINERD_CONFIG_PATH);
    unit.filePaths.sort(compare);
    x.changedUnits.add(unit.name);
  }
}
