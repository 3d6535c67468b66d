/**
 * Which parts of an OperatingSystemConfig's status each write changed, for the benches that
 * count status writes (capi-nodes): a watch sees every stored version, and the difference to the
 * one before says why it was written — a new rendering (checksum), its conditions, the node
 * counts (status.nodes), the rollout controller's status.rollout — or that nothing visible moved.
 */
import { isDeepStrictEqual } from 'node:util';

type Status = Record<string, unknown> | undefined;

/**
 * The status fields that differ between two stored versions, `rollout.<field>` for the rollout
 * controller's part; empty when the status is the same (a spec or metadata change).
 */
export function statusChanges(before: Status, after: Status): string[] {
  const a = before ?? {};
  const b = after ?? {};
  const changed: string[] = [];
  for (const k of [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()) {
    if (isDeepStrictEqual(a[k], b[k])) continue;
    if (k !== 'rollout') {
      changed.push(k);
      continue;
    }
    const ra = (a.rollout ?? {}) as Record<string, unknown>;
    const rb = (b.rollout ?? {}) as Record<string, unknown>;
    for (const r of [...new Set([...Object.keys(ra), ...Object.keys(rb)])].sort()) {
      if (!isDeepStrictEqual(ra[r], rb[r])) changed.push(`rollout.${r}`);
    }
  }
  return changed;
}

/** One stored status version of one OSC, as a watch saw it. */
export interface StatusWrite {
  osc: string;
  at: number;
  changed: string[];
  /** What the bench shows beside it, e.g. the node counts the version carries. */
  detail?: string;
}

/** Who wrote a status version: the rollout controller's part, the OSC controller's, or both. */
export function writerOf(changed: readonly string[]): 'rollout' | 'osc' | 'both' {
  const rollout = changed.some((c) => c.startsWith('rollout.'));
  const other = changed.some((c) => !c.startsWith('rollout.'));
  return rollout && other ? 'both' : rollout ? 'rollout' : 'osc';
}

/**
 * Lines for a bench's output: per object its writes in order, then (for OSCs, `writers`) the count
 * per writer.
 */
export function formatStatusWrites(
  writes: readonly StatusWrite[],
  t0: number,
  writers = true,
): string[] {
  const lines: string[] = [];
  const byOsc = new Map<string, StatusWrite[]>();
  for (const w of writes) byOsc.set(w.osc, [...(byOsc.get(w.osc) ?? []), w]);
  for (const [osc, ws] of [...byOsc].sort(([a], [b]) => a.localeCompare(b))) {
    lines.push(`    ${osc}: ${String(ws.length)} status writes`);
    for (const w of ws) {
      lines.push(
        `      +${((w.at - t0) / 1000).toFixed(1).padStart(6)} s  ${writers ? `${writerOf(w.changed).padEnd(7)} ` : ''}${w.changed.join(', ')}${w.detail ? `  ${w.detail}` : ''}`,
      );
    }
  }
  if (!writers) return lines;
  const count = (who: string): number => writes.filter((w) => writerOf(w.changed) === who).length;
  lines.push(
    `    by writer: OSC controller ${String(count('osc'))}, rollout controller ${String(count('rollout'))}, both in one version ${String(count('both'))}`,
  );
  return lines;
}
