/**
 * Validate, then resolve, in one step whose result says so. The renderers' guard re-checks every
 * config it is given (a provider or a webhook request may build one in code), but a config that
 * came out of here has already passed the full validator, whose rules are a superset of the
 * guard's (a test holds them to it), so the guard need not look again: the controller validates
 * every OSC it renders, and checking twice was a tenth of a large render.
 *
 * The mark is kept honest by freezing what it marks: the config, its units, files, drop-ins and
 * packages, and their arrays. File contents stay Buffers (which cannot be frozen); no check reads
 * their bytes.
 */
import type { FieldError } from './field-error.js';
import { resolve, type References } from './resolve.js';
import { freezeConfig, type ResolvedConfig } from './resolved.js';
import type { OperatingSystemConfig, OperatingSystemConfigSpec } from './schema.js';
import { validateOperatingSystemConfig } from './validate.js';

export type ValidateAndResolveResult =
  | { ok: true; osc: OperatingSystemConfig; config: ResolvedConfig }
  /** `stage` tells a document that is wrong from references that could not be resolved. */
  | { ok: false; stage: 'validate' | 'resolve'; errors: FieldError[] };

const validated = new WeakSet<ResolvedConfig>();

/**
 * Validates `doc` as an OperatingSystemConfig, then resolves its spec with the references
 * `refs` gives (a function of the validated spec, so the caller can look up only what it names).
 * The config returned is frozen and marked as validated.
 */
export function validateAndResolve(
  doc: unknown,
  refs: References | ((spec: OperatingSystemConfigSpec) => References),
): ValidateAndResolveResult {
  const errors = validateOperatingSystemConfig(doc);
  if (errors.length > 0) return { ok: false, stage: 'validate', errors };
  const osc = doc as OperatingSystemConfig;
  const resolved = resolve(osc.spec, typeof refs === 'function' ? refs(osc.spec) : refs);
  if (!resolved.ok) return { ok: false, stage: 'resolve', errors: resolved.errors };
  const config = freezeConfig(resolved.config);
  validated.add(config);
  return { ok: true, osc, config };
}

/** True for a config validateAndResolve returned (frozen, so still as it was validated). */
export function isValidated(config: ResolvedConfig): boolean {
  return validated.has(config);
}
