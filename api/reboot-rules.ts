/**
 * Where a reboot may be declared (onChange: reboot on a unit or a file), said once for the OSC's
 * deep validation (api/deep-validate.ts, raw spec) and the resolved config's check
 * (api/validate-config.ts): only in a reconcile config — a provision config runs once, at a first
 * boot, where nothing is running that a reboot would be for.
 */
import { fieldError, type FieldError } from './field-error.js';

/** What the rule reads of a config, from either form. */
export interface RebootFacts {
  purpose: unknown;
  units: readonly { onChange?: unknown }[];
  files: readonly { onChange?: unknown }[];
}

export function checkRebootDeclarations(c: RebootFacts, out: FieldError[]): void {
  if (c.purpose === 'reconcile') return;
  const fix =
    'a provision config runs once, at first boot; declare reboots in the reconcile config, or remove onChange';
  c.units.forEach((u, i) => {
    if (u.onChange === 'reboot') {
      out.push(fieldError(`spec.units[${i}].onChange`, `"reboot" needs purpose reconcile: ${fix}`));
    }
  });
  c.files.forEach((f, i) => {
    if (f.onChange === 'reboot') {
      out.push(fieldError(`spec.files[${i}].onChange`, `"reboot" needs purpose reconcile: ${fix}`));
    }
  });
}
