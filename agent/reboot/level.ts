/**
 * The disruption of one plan on one node: the config change's level (api/disruption.ts, the
 * same rule the controller reads from revision digests), raised to Restart when the plan itself
 * touches a unit or a package (drift repair does, with no config change), and to Reboot when the
 * node says so. A plan with nothing to do disturbs nothing unless the node wants a reboot.
 */
import { disruptionOf, type Disruption } from '../../api/disruption.js';
import type { ResolvedConfig } from '../../api/resolved.js';
import { isUnitAction, type Action } from '../model/actions.js';

/** Actions that leave running programs alone: enablement and masks act at the next start. */
const QUIET = new Set(['enable', 'disable', 'mask', 'unmask']);

export function planDisruption(
  actions: readonly Action[],
  last: ResolvedConfig | undefined,
  desired: ResolvedConfig,
  node: { rebootRequired?: boolean } = {},
): Disruption {
  if (actions.length === 0) {
    return node.rebootRequired === true
      ? disruptionOf(desired, desired, node)
      : { level: 'None', reasons: [] };
  }
  const byConfig = disruptionOf(last, desired, node);
  if (byConfig.level !== 'None') return byConfig;
  const touches = actions.some(
    (a) => a.kind === 'installPackages' || (isUnitAction(a) && !QUIET.has(a.kind)),
  );
  return touches ? { level: 'Restart', reasons: ['the plan restarts or starts units'] } : byConfig;
}

/** One line for the plan's text and the agent's log. */
export function formatDisruption(d: Disruption): string {
  return d.reasons.length === 0
    ? `disruption: ${d.level}`
    : `disruption: ${d.level} (${d.reasons.join('; ')})`;
}
