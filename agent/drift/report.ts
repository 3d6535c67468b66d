/**
 * Drift in the words of the node's report: status.drift (a count and the first items), the
 * Drifted condition's reason and message, and the notes of its Events. Pure; agent/report.ts
 * sends them.
 */
import { DRIFT_REPORT_ITEMS } from '../../api/constants.js';
import type { DriftedItem } from '../../api/schema.js';
import type { DriftItem, DriftReport } from '../model/drift.js';

/** How many items a condition message or an Event note names before "and N more". */
const NAMED = 10;
/** events.k8s.io/v1 refuses a note above 1 KiB. */
const NOTE_BYTES = 1024;

const seconds = (d: Date): string => d.toISOString().replace(/\.\d+Z$/, 'Z');

export /** A drifted item as log fields: what, why, expected and found (hashes, modes, states — no content). */
function itemFields(i: DriftItem): Record<string, string> {
  return {
    ...(i.path !== undefined ? { path: i.path } : {}),
    ...(i.unit !== undefined ? { unit: i.unit } : {}),
    ...(i.package !== undefined ? { package: i.package } : {}),
    reason: i.reason,
    expected: i.expected,
    found: i.found,
    policy: i.policy,
  };
}

export function statusItem(i: DriftItem): DriftedItem {
  return { ...itemFields(i), since: seconds(i.since) } as DriftedItem;
}

/** status.drift: always with its list (empty when nothing drifted), so a merge patch clears it. */
export function driftStatus(r: DriftReport): { count: number; items: DriftedItem[] } {
  return { count: r.items.length, items: r.items.slice(0, DRIFT_REPORT_ITEMS).map(statusItem) };
}

/** `text` cut to at most `max` UTF-8 bytes, on a character boundary, marked when cut. */
export function truncateBytes(text: string, max: number): string {
  if (Buffer.byteLength(text) <= max) return text;
  let t = text.slice(0, max);
  while (Buffer.byteLength(`${t}…`) > max) t = t.slice(0, -1);
  return `${t}…`;
}

/** One item in words: what, why, expected and found (hashes, modes, states — never content). */
export function describeItem(i: DriftItem): string {
  const what = i.path ?? i.unit ?? i.package ?? i.key;
  return `${what}: ${i.reason} (expected ${i.expected}, found ${i.found}; ${i.policy})`;
}

function listing(items: readonly DriftItem[], limit: number): string {
  const named = items.slice(0, NAMED).map(describeItem).join('; ');
  const more = items.length > NAMED ? `; and ${String(items.length - NAMED)} more` : '';
  return truncateBytes(`${named}${more}`, limit);
}

export interface DriftCondition {
  status: 'True' | 'False';
  reason: string;
  message: string;
}

/**
 * Drifted=True while anything differs (reason DriftDetected, or Reverting when every item is
 * about to be put back); False with NoDrift, or Reverted after a revert put it back. The message
 * changes only with the drift, so an audit that finds nothing new writes nothing.
 */
export function driftCondition(r: DriftReport): DriftCondition {
  if (r.items.length > 0) {
    const reverting = r.items.every((i) => i.policy === 'Revert');
    return {
      status: 'True',
      reason: reverting ? 'Reverting' : 'DriftDetected',
      message: `${String(r.items.length)} path(s) and unit(s) differ from what was applied: ${listing(r.items, 4000)}`,
    };
  }
  if (r.reverted) {
    return {
      status: 'False',
      reason: 'Reverted',
      message: `reverted: ${r.resolved.map((i) => i.path ?? i.unit ?? i.package ?? i.key).join(', ')}`,
    };
  }
  return {
    status: 'False',
    reason: 'NoDrift',
    message: 'what the agent applied is on the node as it applied it',
  };
}

export interface DriftEvent {
  type: 'Warning' | 'Normal';
  reason: 'DriftDetected' | 'DriftReverted';
  action: 'Detect' | 'Revert';
  note: string;
}

/** The Events a report calls for: newly drifted items, and what a revert put back. */
export function driftEvents(r: DriftReport): DriftEvent[] {
  const out: DriftEvent[] = [];
  if (r.added.length > 0) {
    out.push({
      type: 'Warning',
      reason: 'DriftDetected',
      action: 'Detect',
      note: listing(r.added, NOTE_BYTES),
    });
  }
  if (r.reverted) {
    const names = r.resolved.map((i) => i.path ?? i.unit ?? i.package ?? i.key).join(', ');
    out.push({
      type: 'Normal',
      reason: 'DriftReverted',
      action: 'Revert',
      note: truncateBytes(`put back: ${names}`, NOTE_BYTES),
    });
  }
  return out;
}
