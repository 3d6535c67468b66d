/**
 * Drift policies: what the agent does when something it applied changed on the node.
 * - Report (the default): a Drifted condition, an Event and a metric; the agent changes nothing.
 * - Revert: the same report, then the agent puts it back through the normal planner and journal
 *   (so a drifted file restarts the units that list it, as a change would), rate-limited with an
 *   exponential backoff so it never fights another tool in a tight loop.
 * - Ignore: neither; an operator is expected to tune it. Its declaration still counts: when the
 *   config changes it, the apply writes it.
 * `spec.driftPolicy` sets the config's; a file's or a unit's own driftPolicy overrides it (a unit's
 * covers its unit file, its drop-ins and its state).
 *
 * What an apply repairs: the apply of a desired state writes every file, unit file and drop-in
 * that differs (Report and Revert alike: an apply makes the node carry what it declares), but
 * not an Ignore one; it acts on a unit's state (starts a stopped unit, re-enables …) only for
 * Revert units, so "a unit that did not change is never touched" holds for the rest. A declared
 * package that is missing or at another version is reinstalled like a drifted file is written
 * (Report and Revert alike; packages take the config's policy). A revert repairs Revert paths,
 * units and packages only.
 */
import { DEFAULT_DRIFT_POLICY, type DriftPolicy } from '../../api/constants.js';
import { dropInPath, unitPath, type ResolvedConfig } from '../../api/resolved.js';
import type { RevertScope } from './drift.js';

export interface Policies {
  /** Every path the config makes oscar write (files, unit files, drop-ins) → its policy. */
  readonly paths: ReadonlyMap<string, DriftPolicy>;
  /** Every declared unit → its policy. */
  readonly units: ReadonlyMap<string, DriftPolicy>;
  /** Every declared package → its policy (the config's: a package has none of its own). */
  readonly packages: ReadonlyMap<string, DriftPolicy>;
}

/** A frozen (checked) config's policies, built once: every plan and drift check asks. */
const built = new WeakMap<ResolvedConfig, Policies>();

export function policiesOf(config: ResolvedConfig | undefined): Policies {
  if (!config) return { paths: new Map(), units: new Map(), packages: new Map() };
  const known = built.get(config);
  if (known) return known;
  const out = buildPolicies(config);
  if (Object.isFrozen(config)) built.set(config, out);
  return out;
}

function buildPolicies(config: ResolvedConfig): Policies {
  const paths = new Map<string, DriftPolicy>();
  const units = new Map<string, DriftPolicy>();
  const packages = new Map<string, DriftPolicy>();
  const fallback = config.driftPolicy ?? DEFAULT_DRIFT_POLICY;
  for (const p of config.packages) packages.set(p.name, fallback);
  for (const f of config.files) paths.set(f.path, f.driftPolicy ?? fallback);
  for (const u of config.units) {
    const policy = u.driftPolicy ?? fallback;
    units.set(u.name, policy);
    if (u.content !== undefined && !u.mask) paths.set(unitPath(u.name), policy);
    for (const d of u.dropIns) paths.set(dropInPath(u.name, d.name), policy);
  }
  return { paths, units, packages };
}

/** Which drift a plan may repair (agent/plan.ts reads it; default: all of it). */
export interface DriftRepair {
  /** A file, unit file or drop-in that differs on disk from what was applied. */
  readonly path: (path: string) => boolean;
  /** A unit's state: stopped, failed, disabled, masked or unmasked. */
  readonly unit: (name: string) => boolean;
  /** A declared package missing, at another version, or left half-way (reinstalled). */
  readonly package: (name: string) => boolean;
}

/** An apply of a desired state, or a revert of drift to the state last applied. */
export type RepairMode = 'apply' | 'revert';

/**
 * What a plan in `mode` repairs; a revert with a `scope` (the drift the monitor found) only what
 * the scope names, so the paths it did not read are not taken for missing.
 */
export function repairFor(
  config: ResolvedConfig,
  mode: RepairMode,
  scope?: RevertScope,
): DriftRepair {
  const { paths, units, packages } = policiesOf(config);
  const revert = (p: DriftPolicy | undefined): boolean => p === 'Revert';
  const within = (names: ReadonlySet<string> | undefined, name: string): boolean =>
    names === undefined || names.has(name);
  return mode === 'revert'
    ? {
        path: (p) => within(scope?.paths, p) && revert(paths.get(p)),
        unit: (u) => within(scope?.units, u) && revert(units.get(u)),
        package: (p) => within(scope?.packages, p) && revert(packages.get(p)),
      }
    : {
        path: (p) => paths.get(p) !== 'Ignore',
        unit: (u) => revert(units.get(u)),
        // like a file: an apply makes the node carry the packages it declares
        package: (p) => packages.get(p) !== 'Ignore',
      };
}

/** Every drift may be repaired (what a plan without policies does). */
export const REPAIR_ALL: DriftRepair = { path: () => true, unit: () => true, package: () => true };
