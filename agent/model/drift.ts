/**
 * Drift as the agent's parts exchange it: what drifted (items and reports, which the monitor makes
 * and the reporter and metrics send) and the hooks an agent loop calls around its applies. Types
 * only, so the loop, the reporter and the monitor meet here rather than in each other.
 */
import type { DriftPolicy } from '../../api/constants.js';
import type { ResolvedConfig } from '../../api/resolved.js';

/** The policies the drift check watches (an Ignore path or unit is never read). */
export type WatchedPolicy = Exclude<DriftPolicy, 'Ignore'>;

/** What found the drift: the watcher, the periodic audit, the check before an apply, the start. */
export type DriftTrigger = 'start' | 'watch' | 'audit' | 'apply' | 'revert';

export interface DriftItem {
  /** "path:/etc/x.conf", "unit:x.service" or "package:chrony". */
  key: string;
  path?: string;
  unit?: string;
  /** A declared package (missing, at another version, half-installed). */
  package?: string;
  reason: string;
  expected: string;
  found: string;
  policy: WatchedPolicy;
  since: Date;
}

export interface DriftReport {
  /** Everything that is drifted now, by key. */
  items: readonly DriftItem[];
  /** Drifted since the last report. */
  added: readonly DriftItem[];
  /** Drifted at the last report, not any more. */
  resolved: readonly DriftItem[];
  trigger: DriftTrigger;
  /** `resolved` was put back by a revert (not by hand, nor by an apply of a new state). */
  reverted: boolean;
}

/** How an apply ended, for the monitor's idea of what the node must carry. */
export type ApplyOutcome =
  /** The node now carries this config in full (it is last-applied). */
  | { applied: ResolvedConfig }
  /** An apply of this config stopped half-way: what it wrote is not drift either. */
  | { failed: ResolvedConfig }
  /** What was applied did not change: a refused state, or a revert (`revert`) of drift. */
  | { unchanged: true; revert?: boolean };

/**
 * What a revert puts back: the Revert drift the monitor holds when the revert starts, by path,
 * unit and package. The revert reads and repairs only these (agent/revert.ts), so its cost follows
 * what drifted, not the node's size; drift found meanwhile is checked after it and gets its own.
 */
export interface RevertScope {
  readonly paths: ReadonlySet<string>;
  readonly units: ReadonlySet<string>;
  readonly packages: ReadonlySet<string>;
}

/** What the agent loop calls (agent/agent.ts). */
export interface DriftHooks {
  start(applied: ResolvedConfig | undefined): Promise<void>;
  /** Before an apply: check everything (not for a revert, which a check just asked for), pause. */
  beforeApply(kind: 'apply' | 'revert'): Promise<void>;
  /** The Revert drift known now (after beforeApply('revert')): what a revert repairs. */
  revertScope(): RevertScope;
  /** After an apply, failed or not: what is expected now; resume. */
  afterApply(outcome: ApplyOutcome): void;
  stop(): Promise<void>;
}
