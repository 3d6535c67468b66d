/**
 * A revert: the state last applied, applied again with the Revert policy's repairs only
 * (agent/drift/policy.ts) — the normal planner and journal, so a drifted file restarts the units
 * that list it and a killed agent resumes the revert instead of repeating it. With a scope (the
 * drift the monitor found) only its paths, units and packages are read and repaired: a revert
 * costs what drifted, not the node's size.
 */
import { shortChecksum, type Logger } from '../log/logger.js';
import { applyDesired, type ApplyDeps, type ApplyResult } from './apply.js';
import { Journal } from './journal.js';
import type { RevertScope } from './model/drift.js';
import { readLastApplied } from './state.js';

/** Undefined when there is nothing to revert to, or an interrupted apply must resume first. */
export async function revertDrift(
  deps: ApplyDeps,
  log: Logger,
  scope?: RevertScope,
): Promise<ApplyResult | undefined> {
  const last = await readLastApplied(deps.stateDir);
  if (!last) return undefined;
  const pending = await Journal.read(deps.stateDir);
  if (pending && pending.checksum !== last.checksum) {
    // its desired state will be delivered again and resumed; a revert now would undo half of it
    log.info(
      { checksum: shortChecksum(pending.checksum) },
      'drift revert postponed: an interrupted apply resumes first',
    );
    return undefined;
  }
  return applyDesired(deps, last, { revert: true, ...(scope ? { scope } : {}) });
}
