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
 * Revert units, so "a unit that did not change is never touched" holds for the rest. A revert
 * repairs Revert paths and units only.
 */
import { DEFAULT_DRIFT_POLICY, type DriftPolicy } from '../../api/constants.js';
import { dropInPath, unitPath, type ResolvedConfig } from '../../api/resolved.js';

export interface Policies {
  /** Every path the config makes oscar write (files, unit files, drop-ins) → its policy. */
  readonly paths: ReadonlyMap<string, DriftPolicy>;
  /** Every declared unit → its policy. */
  readonly units: ReadonlyMap<string, DriftPolicy>;
}

export function policiesOf(config: ResolvedConfig | undefined): Policies {
  const paths = new Map<string, DriftPolicy>();
  const units = new Map<string, DriftPolicy>();
  if (!config) return { paths, units };
  const fallback = config.driftPolicy ?? DEFAULT_DRIFT_POLICY;
  for (const f of config.files) paths.set(f.path, f.driftPolicy ?? fallback);
  for (const u of config.units) {
    const policy = u.driftPolicy ?? fallback;
    units.set(u.name, policy);
    if (u.content !== undefined && !u.mask) paths.set(unitPath(u.name), policy);
    for (const d of u.dropIns) paths.set(dropInPath(u.name, d.name), policy);
  }
  return { paths, units };
}

/** Which drift a plan may repair (agent/plan.ts reads it; default: all of it). */
export interface DriftRepair {
  /** A file, unit file or drop-in that differs on disk from what was applied. */
  readonly path: (path: string) => boolean;
  /** A unit's state: stopped, failed, disabled, masked or unmasked. */
  readonly unit: (name: string) => boolean;
}

/** An apply of a desired state, or a revert of drift to the state last applied. */
export type RepairMode = 'apply' | 'revert';

export function repairFor(config: ResolvedConfig, mode: RepairMode): DriftRepair {
  const { paths, units } = policiesOf(config);
  const revert = (p: DriftPolicy | undefined): boolean => p === 'Revert';
  return mode === 'revert'
    ? { path: (p) => revert(paths.get(p)), unit: (u) => revert(units.get(u)) }
    : { path: (p) => paths.get(p) !== 'Ignore', unit: (u) => revert(units.get(u)) };
}

export interface RevertBackoffOptions {
  /** Delay before the second revert in a row; doubles with each further one. */
  baseMs?: number;
  maxMs?: number;
  /** A revert this long after the previous one starts the series again (no delay). */
  quietMs?: number;
}

/**
 * How long to wait before the next revert: the first at once, then, while drift keeps coming
 * back (another tool rewriting the file, a unit that keeps failing), base, 2×base, … up to max.
 * Pure: the caller passes the clock.
 */
export class RevertBackoff {
  private readonly baseMs: number;
  private readonly maxMs: number;
  private readonly quietMs: number;
  private streak = 0;
  private last: number | undefined;

  constructor(opts: RevertBackoffOptions = {}) {
    this.baseMs = opts.baseMs ?? 1_000;
    this.maxMs = opts.maxMs ?? 5 * 60_000;
    this.quietMs = opts.quietMs ?? 10 * 60_000;
  }

  /** The delay from `nowMs` before the next revert may run. */
  delay(nowMs: number): number {
    if (this.last === undefined || nowMs - this.last >= this.quietMs) return 0;
    const wait = Math.min(this.maxMs, this.baseMs * 2 ** Math.max(0, this.streak - 1));
    return Math.max(0, this.last + wait - nowMs);
  }

  /** A revert ran at `nowMs`. */
  ran(nowMs: number): void {
    this.streak =
      this.last === undefined || nowMs - this.last >= this.quietMs ? 1 : this.streak + 1;
    this.last = nowMs;
  }
}
