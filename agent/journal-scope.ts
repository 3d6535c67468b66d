/**
 * What a resumed journal may do: exactly what a plan from the last applied config to the desired
 * one could hold (agent/plan.ts) — write a file the desired config declares (checked by the
 * executor, which takes the bytes from it), remove a file the last applied config declared, act
 * on a unit one of the two declares, install packages the desired config lists. The journal sits
 * in the agent's own state directory, but it is a file on disk: one damaged or written by hand
 * must never make the agent remove, stop, mask or install something no config of oscar's named.
 */
import type { ResolvedConfig } from '../api/resolved.js';
import { packageSpec } from '../api/resolved.js';
import type { JournalAction } from './journal.js';
import { entriesOf } from './model/entries.js';

/** The first journaled action outside the two configs, as words for a log line; else undefined. */
export function actionOutsideConfigs(
  actions: readonly JournalAction[],
  desired: ResolvedConfig,
  last: ResolvedConfig | undefined,
): string | undefined {
  const lastEntries = entriesOf(last);
  const units = new Set([...desired.units, ...(last?.units ?? [])].map((u) => u.name));
  const packages = new Set(desired.packages.map(packageSpec));
  for (const action of actions) {
    switch (action.kind) {
      case 'writeFile':
      case 'daemonReload':
        break; // writes are matched to the desired config's entries by the executor
      case 'removeFile':
        if (!lastEntries.has(action.path)) return `a removal of ${JSON.stringify(action.path)}`;
        break;
      case 'installPackages': {
        const foreign = action.packages.map(packageSpec).find((p) => !packages.has(p));
        if (foreign !== undefined) return `an install of package ${JSON.stringify(foreign)}`;
        break;
      }
      default:
        if (!units.has(action.unit)) return `${action.kind} of unit ${JSON.stringify(action.unit)}`;
    }
  }
  return undefined;
}
