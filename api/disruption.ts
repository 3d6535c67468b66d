/**
 * Whether moving a node from one config to another disturbs anything running: a digest of every
 * input that decides the agent's unit actions (start, stop, restart, reload, enable, disable,
 * mask) and its package installs. Two configs with the same digest differ only in files no unit
 * reacts to, so the agent writes files and at most runs daemon-reload — the MachineConfig
 * disruption policy "None". A rollout policy with nonDisruptive: Immediate lets such a revision
 * skip the waves (docs/rollouts.md). Conservative by design: any doubt makes the digest differ.
 */
import { createHash } from 'node:crypto';
import { canonicalStringify } from './canonical.js';
import type { ResolvedConfig, ResolvedFile, ResolvedUnit } from './resolved.js';
import { packageSpec } from './resolved.js';
import { DISRUPTION_LEVELS, type DisruptionLevel } from './constants.js';

function fileDigest(file: ResolvedFile | undefined): string {
  if (!file) return 'absent';
  return createHash('sha256')
    .update(`${file.mode.toString(8)} ${file.user}:${file.group}\0`)
    .update(file.content)
    .digest('hex');
}

/** What of a unit decides the planner's actions on it. */
function unitDescriptor(
  unit: ResolvedUnit,
  files: ReadonlyMap<string, ResolvedFile>,
): Record<string, unknown> {
  const base: Record<string, unknown> = {
    name: unit.name,
    mask: unit.mask,
    enable: unit.enable,
    command: unit.command,
    onChange: unit.onChange,
  };
  // A masked unit is only masked; a change with onChange none restarts nothing.
  if (unit.mask || unit.onChange === 'none') return base;
  return {
    ...base,
    content: unit.content ?? null,
    dropIns: unit.dropIns.map((d) => [d.name, d.content]),
    filePaths: unit.filePaths.map((p) => [p, fileDigest(files.get(p))]),
  };
}

/** The digest of everything in `config` that makes the agent touch a unit or a package. */
export function disruptionDigest(config: ResolvedConfig): string {
  const files = new Map(config.files.map((f) => [f.path, f]));
  const units = [...config.units]
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map((u) => unitDescriptor(u, files));
  const packages = config.packages.map(packageSpec).sort();
  return createHash('sha256')
    .update(canonicalStringify({ units, packages, type: config.type, cri: config.cri ?? null }))
    .digest('hex');
}

/**
 * Units whose restart stops every container on the node (containerd, CRI-O, Docker and its CRI
 * shim): a change that restarts one needs the node drained first.
 */
export const RUNTIME_UNITS: ReadonlySet<string> = new Set([
  'containerd.service',
  'crio.service',
  'docker.service',
  'cri-docker.service',
]);

/** Packages whose upgrade restarts the container runtime (their maintainer scripts do). */
export const RUNTIME_PACKAGES: ReadonlySet<string> = new Set([
  'containerd',
  'containerd.io',
  'runc',
  'cri-o',
  'docker.io',
  'docker-ce',
]);

/** One thing a level watches, by a name a person can read, and the digest of its state. */
type Items = ReadonlyMap<string, string>;

function digestOf(value: unknown): string {
  return createHash('sha256').update(canonicalStringify(value)).digest('hex');
}

/** What takes effect only at boot: files and units declared onChange: reboot. */
function rebootItems(config: ResolvedConfig): Items {
  const files = new Map(config.files.map((f) => [f.path, f]));
  const out = new Map<string, string>();
  for (const f of config.files) {
    if (f.onChange === 'reboot') out.set(`file ${f.path} (onChange: reboot)`, fileDigest(f));
  }
  for (const u of config.units) {
    if (u.onChange === 'reboot') {
      const d = { ...unitDescriptor({ ...u, onChange: 'restart' }, files), onChange: 'reboot' };
      out.set(`unit ${u.name} (onChange: reboot)`, digestOf(d));
    }
  }
  return out;
}

/** What restarts the container runtime: its units, spec.cri, the runtime's packages. */
function drainItems(config: ResolvedConfig): Items {
  const files = new Map(config.files.map((f) => [f.path, f]));
  const out = new Map<string, string>();
  for (const u of config.units) {
    if (RUNTIME_UNITS.has(u.name) && u.onChange !== 'reboot') {
      out.set(
        `container runtime ${u.name} restarts (pods stop)`,
        digestOf(unitDescriptor(u, files)),
      );
    }
  }
  if (config.cri) out.set('spec.cri changes the container runtime', digestOf(config.cri));
  for (const p of config.packages) {
    if (RUNTIME_PACKAGES.has(p.name))
      out.set(`package ${p.name} (the container runtime) changes`, packageSpec(p));
  }
  return out;
}

function itemsDigest(items: Items): string {
  return digestOf([...items].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** A config's digest per level: equal digests at a level ⇒ nothing of that level changed. */
export interface DisruptionDigests {
  /** disruptionDigest(): any unit or package touched. */
  restart: string;
  drain: string;
  reboot: string;
}

export function disruptionDigests(config: ResolvedConfig): DisruptionDigests {
  return {
    restart: disruptionDigest(config),
    drain: itemsDigest(drainItems(config)),
    reboot: itemsDigest(rebootItems(config)),
  };
}

/** An empty config's digests: what a node that carries nothing of oscar's yet is compared with. */
const NOTHING: ResolvedConfig = {
  type: '',
  purpose: 'reconcile',
  units: [],
  files: [],
  packages: [],
};

/**
 * The level of moving from `from` to `to` by their digests (the controller's view: it keeps the
 * digests of every revision on its Secret). Unknown digests (`undefined`) count as changed.
 */
export function levelBetween(
  from: Partial<DisruptionDigests> | undefined,
  to: Partial<DisruptionDigests>,
): DisruptionLevel {
  const differs = (k: keyof DisruptionDigests): boolean =>
    from?.[k] === undefined || to[k] === undefined || from[k] !== to[k];
  if (differs('reboot')) return 'Reboot';
  if (differs('drain')) return 'Drain';
  if (differs('restart')) return 'Restart';
  return 'None';
}

/** A level and why, for `oscar plan`, the agent's log and its report. */
export interface Disruption {
  level: DisruptionLevel;
  reasons: string[];
}

function changedItems(from: Items, to: Items): string[] {
  const out: string[] = [];
  for (const [k, v] of to) if (from.get(k) !== v) out.push(k);
  for (const k of from.keys()) if (!to.has(k)) out.push(`${k}: removed`);
  return out.sort();
}

/**
 * The disruption of moving a node from `from` (what it last applied; undefined: nothing) to
 * `to`, with the items that decide it. `rebootRequired`: the node says so itself (Debian's
 * /var/run/reboot-required after a package change). Same digests as levelBetween, so the
 * controller and the node never disagree on a config change.
 */
export function disruptionOf(
  from: ResolvedConfig | undefined,
  to: ResolvedConfig,
  node: { rebootRequired?: boolean } = {},
): Disruption {
  const was = from ?? NOTHING;
  const reboot = changedItems(rebootItems(was), rebootItems(to));
  if (node.rebootRequired === true)
    reboot.push('the node requires a reboot (/var/run/reboot-required)');
  if (reboot.length > 0) return { level: 'Reboot', reasons: reboot };
  const drain = changedItems(drainItems(was), drainItems(to));
  if (drain.length > 0) return { level: 'Drain', reasons: drain };
  if (disruptionDigest(was) !== disruptionDigest(to)) {
    return { level: 'Restart', reasons: ['units or packages change'] };
  }
  return { level: 'None', reasons: [] };
}

/** Whether `level` is at least `floor`: None < Restart < Drain < Reboot. */
export function atLeast(level: DisruptionLevel, floor: DisruptionLevel): boolean {
  return DISRUPTION_LEVELS.indexOf(level) >= DISRUPTION_LEVELS.indexOf(floor);
}
