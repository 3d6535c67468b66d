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
export {
  policiesOf,
  repairFor,
  type DriftRepair,
  type Policies,
  type RepairMode,
} from '../model/repair.js';

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
