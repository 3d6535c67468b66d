/**
 * The entries model: every path a config makes oscar write (its files, unit files and drop-ins),
 * one Entry each. The planner, the file observer, the executor and the drift check all walk a
 * config through this one view, so a path is a path wherever it was declared.
 */
import type { ResolvedConfig } from '../../api/resolved.js';
import { dropInPath, unitPath } from '../../api/resolved.js';

/** One path oscar manages, whatever declared it. Read-only: a file's entry is its ResolvedFile. */
export interface Entry {
  readonly path: string;
  readonly content: Buffer;
  readonly mode: number;
  readonly user: string;
  readonly group: string;
  /** The unit a unit file or drop-in belongs to. */
  readonly unit?: string;
}

const UNIT_FILE_MODE = 0o644;

/**
 * A frozen config's entries, built once: the drift check, the observer and the planner each walk
 * the same config, and a revert of one file at 10,000 paths spent most of its time building
 * these maps again (a config is frozen once checked: agent/desired-check.ts).
 */
const built = new WeakMap<ResolvedConfig, ReadonlyMap<string, Entry>>();

/** Every path a config makes oscar write: its files, unit files and drop-ins. */
export function entriesOf(config: ResolvedConfig | undefined): ReadonlyMap<string, Entry> {
  if (!config) return new Map();
  const known = built.get(config);
  if (known) return known;
  const out = buildEntries(config);
  if (Object.isFrozen(config)) built.set(config, out);
  return out;
}

function buildEntries(config: ResolvedConfig): Map<string, Entry> {
  const out = new Map<string, Entry>();
  // A file is its own entry: no copy (the planner runs on every change and every poll of a
  // 1,000-file node; what it allocates is what the GC pauses for).
  for (const f of config.files) out.set(f.path, f);
  for (const u of config.units) {
    if (u.content !== undefined && !u.mask) {
      const path = unitPath(u.name);
      out.set(path, unitEntry(path, u.content, u.name));
    }
    for (const d of u.dropIns) {
      const path = dropInPath(u.name, d.name);
      out.set(path, unitEntry(path, d.content, u.name));
    }
  }
  return out;
}

function unitEntry(path: string, content: string, unit: string): Entry {
  return {
    path,
    content: Buffer.from(content, 'utf8'),
    mode: UNIT_FILE_MODE,
    user: 'root',
    group: 'root',
    unit,
  };
}
