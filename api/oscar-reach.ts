/**
 * A declared unit's own text can make the agent's actions on that unit act on oscar's units
 * (api/oscar-owned.ts) without ever naming them as a declaration:
 * - `[Install] Alias=oscar-agent.service`: `systemctl enable` links the unit under oscar's name;
 * - `[Install] Also=oscar-agent.service`: enabling or disabling it (the agent disables a unit that
 *   leaves the config) enables or disables oscar's unit with it;
 * - `[Install] RequiredBy=oscar-agent.service`: oscar's unit then requires it, so stopping or
 *   restarting it (`command: stop`, `onChange: restart`, a removal) stops or restarts the agent;
 * - `[Unit] Conflicts=oscar-agent.service`: starting it stops the agent;
 * - `[Unit] PropagatesStopTo=oscar-agent.service`: stopping it stops the agent.
 * Read in the unit's content and its drop-ins, with the specifiers of the unit's own name
 * expanded (`Alias=%p-agent.service` on `oscar.service` is `oscar-agent.service`). Ordering
 * (After=, Before=) and dependencies the other way (WantedBy=, PartOf=, BindsTo=) leave oscar's
 * unit as it is and stay legal.
 */
import { parseUnitFile } from './systemd/unit-file.js';
import { splitUnitName } from './systemd/unit-name.js';

interface Reach {
  section: string;
  key: string;
  effect: string;
}

const REACHES: readonly Reach[] = [
  { section: 'Install', key: 'Alias', effect: 'enabling it would link it under that name' },
  {
    section: 'Install',
    key: 'Also',
    effect: 'enabling or disabling it (as when it leaves the config) would do the same to',
  },
  {
    section: 'Install',
    key: 'RequiredBy',
    effect: 'stopping or restarting it would stop or restart',
  },
  { section: 'Unit', key: 'Conflicts', effect: 'starting it would stop' },
  { section: 'Unit', key: 'PropagatesStopTo', effect: 'stopping it would stop' },
];

/** `word` with the specifiers of `unitName` systemd expands in these settings replaced. */
function expandSpecifiers(word: string, unitName: string): string {
  const parts = splitUnitName(unitName);
  if (!parts || !word.includes('%')) return word;
  const dot = unitName.lastIndexOf('.');
  const values: Record<string, string> = {
    n: unitName,
    N: unitName.slice(0, dot),
    p: parts.prefix,
    P: parts.prefix,
    i: parts.instance ?? '',
    I: parts.instance ?? '',
    j: parts.prefix.slice(parts.prefix.lastIndexOf('-') + 1),
    J: parts.prefix.slice(parts.prefix.lastIndexOf('-') + 1),
    '%': '%',
  };
  return word.replace(/%(.)/g, (all, c: string) => values[c] ?? all);
}

/**
 * A message when `text` (a unit's content or one of its drop-ins, for unit `unitName`) sets one
 * of REACHES to a unit in `owned`, else undefined.
 */
export function checkReachesOwnedUnit(
  text: string,
  unitName: string,
  owned: ReadonlySet<string>,
): string | undefined {
  if (!text.includes('=')) return undefined;
  const parsed = parseUnitFile(text);
  for (const reach of REACHES) {
    for (const section of parsed.sections) {
      if (section.name !== reach.section) continue;
      for (const entry of section.entries) {
        if (entry.key !== reach.key) continue;
        for (const word of entry.value.split(/\s+/)) {
          const target = expandSpecifiers(word, unitName);
          if (!owned.has(target)) continue;
          return `line ${String(entry.line)}: ${reach.key}=${word} names ${target}, oscar's own unit: ${reach.effect} ${reach.key === 'Alias' ? "in place of oscar's unit" : "oscar's agent"}; remove ${target} from ${reach.key}=`;
        }
      }
    }
  }
  return undefined;
}
