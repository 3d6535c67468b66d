/**
 * What the renderers need to know of a unit file or drop-in: its syntax errors (the guard) and
 * which [Install] keys it sets (whether enabling it means anything). Both depend on the text alone,
 * so they are remembered by text across renders, in a small bounded memo: the controller renders
 * an OSC again on every change, most changes leave its units alone, and many OSCs share the same
 * units (kubelet, containerd). A hit is one Map lookup instead of a parse.
 */
import { hasKey, parseUnitFile, type UnitFileError } from '../api/systemd/unit-file.js';
import type { UnitTextFacts } from '../api/validate-config.js';

/** Keys of [Install] the renderers look at. */
const INSTALL_KEYS = [
  'WantedBy',
  'RequiredBy',
  'UpheldBy',
  'Alias',
  'Also',
  'DefaultInstance',
] as const;
export type InstallKey = (typeof INSTALL_KEYS)[number];

/** What the renderers and the config checks (UnitTextFacts) need to know of a unit text. */
export interface UnitFacts extends UnitTextFacts {
  readonly errors: readonly UnitFileError[];
  /** The [Install] keys the text sets. */
  readonly install: ReadonlySet<InstallKey>;
}

/** Bounds of the memo: entries, and characters of text held as keys. */
const MAX_ENTRIES = 1024;
const MAX_CHARS = 1024 * 1024;
/** A text longer than this is parsed every time (rare, and it would crowd out the rest). */
const MAX_TEXT = 64 * 1024;

const memo = new Map<string, UnitFacts>();
let heldChars = 0;

function factsOf(text: string): UnitFacts {
  const parsed = parseUnitFile(text);
  const install = new Set<InstallKey>();
  for (const key of INSTALL_KEYS) if (hasKey(parsed, 'Install', key)) install.add(key);
  return {
    errors: parsed.errors,
    install,
    sectionCount: parsed.sections.length,
    execReload: hasKey(parsed, 'Service', 'ExecReload'),
  };
}

/** The facts of a unit text, parsed at most once while it stays in the memo. */
export function unitFacts(text: string): UnitFacts {
  const known = memo.get(text);
  if (known !== undefined) {
    // least recently used goes first: a hit moves to the end
    memo.delete(text);
    memo.set(text, known);
    return known;
  }
  const facts = factsOf(text);
  if (text.length > MAX_TEXT) return facts;
  memo.set(text, facts);
  heldChars += text.length;
  for (const oldest of memo.keys()) {
    if (memo.size <= MAX_ENTRIES && heldChars <= MAX_CHARS) break;
    memo.delete(oldest);
    heldChars -= oldest.length;
  }
  return facts;
}

/** Entries and characters held, for tests. */
export function memoSize(): { entries: number; chars: number } {
  return { entries: memo.size, chars: heldChars };
}
