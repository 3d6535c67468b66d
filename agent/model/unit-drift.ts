/**
 * When a declared unit's state is drift: what systemd says about a unit (ObservedUnit, from
 * `systemctl show`) against what its declaration promises. Pure; the planner turns the findings
 * into actions (unmask, mask, enable, start) and the drift monitor into reports, so both say the
 * same thing in the same words.
 *
 * What counts:
 * - masked while the declaration does not mask it, or the other way round;
 * - disabled while declared `enable: true` (a unit without [Install] is "static": not drift);
 * - for a unit declared running (`enable: true`, not masked, `command` other than `stop`):
 *   failed, or inactive — except a oneshot without RemainAfterExit (inactive is where it rests
 *   after its run) and a service whose socket is declared too (it starts on the first
 *   connection). activating, deactivating and reloading are on their way: not drift yet.
 */
import type { ResolvedUnit } from '../../api/resolved.js';
import type { ObservedUnit } from './observed.js';

export type UnitDriftReason = 'masked' | 'unmasked' | 'disabled' | 'stopped' | 'failed';

export interface UnitDrift {
  reason: UnitDriftReason;
  expected: string;
  found: string;
}

export function isMasked(seen: ObservedUnit): boolean {
  return seen.load === 'masked' || seen.fileState.startsWith('masked');
}

/** Running or on its way there: a stop is needed before it is masked. */
export function isUp(seen: ObservedUnit): boolean {
  return seen.active === 'active' || seen.active === 'activating' || seen.active === 'reloading';
}

/** The unit is declared to run: enabled, not masked, its command is not stop. */
export function declaredRunning(u: ResolvedUnit): boolean {
  return u.enable && !u.mask && u.command !== 'stop';
}

/**
 * How `seen` differs from what `u` declares; [] when it does not. `socketDeclared`: `u` is a
 * service whose socket is declared too, so inactive is its resting state.
 */
export function unitDrift(
  u: ResolvedUnit,
  seen: ObservedUnit,
  socketDeclared: boolean,
): UnitDrift[] {
  const masked = isMasked(seen);
  if (u.mask) {
    return masked
      ? []
      : [{ reason: 'unmasked', expected: 'masked', found: `not masked (${seen.load})` }];
  }
  const out: UnitDrift[] = [];
  if (masked) {
    out.push({ reason: 'masked', expected: 'not masked', found: `masked (${seen.fileState})` });
  } else if (seen.load === 'not-found') {
    return out; // its unit file is gone: the file's own drift says so
  }
  if (u.enable && seen.fileState === 'disabled') {
    out.push({ reason: 'disabled', expected: 'enabled', found: 'disabled' });
  }
  if (declaredRunning(u)) {
    if (seen.active === 'failed') {
      out.push({ reason: 'failed', expected: 'active', found: `failed (${seen.result})` });
    } else if (seen.active === 'inactive' && !seen.restsInactive && !socketDeclared) {
      out.push({ reason: 'stopped', expected: 'active', found: `inactive (${seen.sub})` });
    }
  }
  return out;
}

/** "stopped: expected active, found inactive (dead)" — a plan's reason, a report's message. */
export function describeUnitDrift(d: UnitDrift): string {
  return `${d.reason}: expected ${d.expected}, found ${d.found}`;
}
