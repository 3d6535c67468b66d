/**
 * How desired states reach the node: the real executor (agent/apply.ts and its journal), or
 * memory (the scale bench). `withDrift` wraps an applier so the drift monitor is told before and
 * after every apply — a grant, a try's rollback, a revert of drift — and the agent's own writes
 * are never drift.
 */
import { silentLogger, type Logger } from '../log/logger.js';
import { applyDesired, type ApplyDeps, type ApplyResult } from './apply.js';
import { waitsForNextState } from './loop.js';
import { revertDrift } from './revert.js';
import type { DriftHooks, RevertScope } from './model/drift.js';
import { readLastApplied, writeLastApplied, type Desired } from './state.js';

/** How revisions reach the node: the real executor, or memory (the scale bench). */
export interface Applier {
  lastApplied(): Promise<Desired | undefined>;
  apply(desired: Desired): Promise<ApplyResult>;
  /** Records `desired` as applied without applying it (a failed apply, before its revert). */
  markApplied(desired: Desired): Promise<void>;
  /**
   * Puts Revert drift back (agent/revert.ts): what `scope` names, or all of it without one;
   * undefined when there was nothing to do.
   */
  revertDrift?(scope?: RevertScope): Promise<ApplyResult | undefined>;
}

export function nodeApplier(deps: ApplyDeps, log: Logger = silentLogger()): Applier {
  return {
    lastApplied: () => readLastApplied(deps.stateDir),
    apply: (desired) => applyDesired(deps, desired),
    markApplied: (desired) => writeLastApplied(deps.stateDir, desired.bytes, desired.config),
    revertDrift: (scope) => revertDrift(deps, log, scope),
  };
}

export function withDrift(inner: Applier, drift: DriftHooks): Applier {
  const revertDrift = inner.revertDrift?.bind(inner);
  return {
    lastApplied: () => inner.lastApplied(),
    markApplied: (desired) => inner.markApplied(desired),
    apply: async (desired) => {
      await drift.beforeApply('apply');
      try {
        const result = await inner.apply(desired);
        drift.afterApply({ applied: desired.config });
        return result;
      } catch (error) {
        // a refused state changed nothing; a failed one may be half on disk (both accepted)
        drift.afterApply(
          waitsForNextState(error) ? { unchanged: true } : { failed: desired.config },
        );
        throw error;
      }
    },
    ...(revertDrift
      ? {
          revertDrift: async () => {
            await drift.beforeApply('revert');
            try {
              // what the monitor found, not every file of the node read again
              return await revertDrift(drift.revertScope());
            } finally {
              drift.afterApply({ unchanged: true, revert: true });
            }
          },
        }
      : {}),
  };
}
