/**
 * The renderers' own guard. A ResolvedConfig normally comes out of validate + resolve, but a
 * renderer is also called with configs built in code (a provider, a webhook request), so before
 * it emits a single byte it re-checks the config with the rules `oscar validate` applies: paths,
 * modes, owners, unit and drop-in names, unit syntax, packages, limits. An invalid config never
 * produces output.
 */
import { ValidationError, type FieldError } from '../api/field-error.js';
import type { ResolvedConfig } from '../api/resolved.js';
import { validateConfig } from '../api/validate-config.js';
import { isValidated } from '../api/validated.js';
import { unitFacts } from './unit-facts.js';

/**
 * The problems that keep `config` from being rendered (none: an empty list). A config from
 * validateAndResolve has passed the full validator already and is not looked at again.
 */
export function checkResolved(config: ResolvedConfig): FieldError[] {
  return isValidated(config) ? [] : checkEveryField(config);
}

/**
 * The guard's checks, whatever the config's origin: the checks of a resolved config that the
 * agent runs too (api/validate-config.ts), with unit texts parsed through the renderers' memo.
 */
export function checkEveryField(config: ResolvedConfig): FieldError[] {
  return validateConfig(config, { facts: unitFacts });
}

/** Configs renderOsc has just checked, so the renderer it calls does not check them again. */
const checked = new WeakSet<ResolvedConfig>();

/** Runs `render` with `config` marked as checked (renderOsc, after its own check). */
export async function withChecked<T>(config: ResolvedConfig, render: () => Promise<T>): Promise<T> {
  checked.add(config);
  try {
    return await render();
  } finally {
    checked.delete(config);
  }
}

/** Throws a ValidationError listing every problem; renderers call it before they emit anything. */
export function assertRenderable(config: ResolvedConfig): void {
  if (checked.has(config)) return;
  const errors = checkResolved(config);
  if (errors.length > 0) throw new ValidationError(errors);
}
