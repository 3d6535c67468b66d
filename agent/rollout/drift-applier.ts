/**
 * Grant mode with drift detection: the applier tells the drift monitor before and after every
 * apply — a grant, a try's rollback, a revert of drift — as the Secret-mode loop (agent/agent.ts)
 * does, so the agent's own writes are never drift and the monitor expects what is applied now.
 */
import type { DriftHooks } from '../drift/monitor.js';
import { ReplacementNeeded } from '../apply.js';
import type { Applier } from './granted-agent.js';

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
          error instanceof ReplacementNeeded ? { unchanged: true } : { failed: desired.config },
        );
        throw error;
      }
    },
    ...(revertDrift
      ? {
          revertDrift: async () => {
            await drift.beforeApply('revert');
            try {
              return await revertDrift();
            } finally {
              drift.afterApply({ unchanged: true, revert: true });
            }
          },
        }
      : {}),
  };
}
