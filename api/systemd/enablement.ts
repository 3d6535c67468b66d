/**
 * Whether a unit gets enabled: one decision, shared by the renderers (the user data enables what
 * it says), `oscar render --explain` (which says why not) and the agent's plan (`oscar plan`), so
 * the three never disagree about the same unit.
 *
 * `systemctl enable` does something only with a unit that has an [Install] section naming what
 * wants it (a "static" unit only earns a hint, and ignition-validate warns); a template only
 * through DefaultInstance= (without it systemctl refuses); a unit that ships with the OS (no
 * content here) is enabled as declared, since oscar cannot see its [Install] section.
 */
import { hasKey, parseUnitFile } from './unit-file.js';
import { isTemplateUnit } from './unit-name.js';

/**
 * What enablement reads of a unit (api/resolved.ts ResolvedUnit has these fields): said here so
 * the systemd floor imports nothing of the API above it.
 */
export interface EnablementUnit {
  name: string;
  enable: boolean;
  mask: boolean;
  content?: string;
  dropIns: readonly { content: string }[];
}

/** Keys of [Install] that give `systemctl enable` something to do. */
export const ENABLING_KEYS = ['WantedBy', 'RequiredBy', 'UpheldBy', 'Alias', 'Also'] as const;

/** Whether a unit text's [Install] section sets `key` (the renderers pass a memoized reader). */
export type InstallKeyOf = (text: string, key: string) => boolean;

const parsedInstallKey: InstallKeyOf = (text, key) => hasKey(parseUnitFile(text), 'Install', key);

export type Enablement = { enable: true } | { enable: false; why: string };

/** What `systemctl enable` can do with the unit's content, whatever the config asks. */
export function enablability(
  unit: Pick<EnablementUnit, 'name' | 'content' | 'dropIns'>,
  installKey: InstallKeyOf = parsedInstallKey,
): Enablement {
  const template = unit.name.includes('@') && isTemplateUnit(unit.name);
  if (unit.content === undefined) {
    return template
      ? { enable: false, why: 'a template ships with the OS: enable an instance' }
      : { enable: true };
  }
  const texts = [unit.content, ...unit.dropIns.map((d) => d.content)];
  if (template && !texts.some((t) => installKey(t, 'DefaultInstance'))) {
    return { enable: false, why: 'a template without DefaultInstance= in [Install]' };
  }
  if (!texts.some((t) => ENABLING_KEYS.some((k) => installKey(t, k)))) {
    return { enable: false, why: 'no [Install] section with WantedBy= or the like: a static unit' };
  }
  return { enable: true };
}

/** The decision for a declared unit: masked and `enable: false` units are not enabled either. */
export function enablement(unit: EnablementUnit, installKey?: InstallKeyOf): Enablement {
  if (unit.mask) return { enable: false, why: 'masked' };
  if (!unit.enable) return { enable: false, why: 'enable: false' };
  return enablability(unit, installKey);
}
