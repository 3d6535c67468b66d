/**
 * Every desired state the agent acts on passes the rules of `oscar validate` first
 * (api/validate-config.ts, and api/oscar-owned.ts: never oscar's own files and units), whichever source it came from: the reconcile Secret, a local file
 * (canonical JSON, or YAML after the OS profile's additions), or the agent's own records. The
 * source checks it, so a bad state is refused and reported as InvalidConfig there; the executor
 * checks again whatever it is handed without that mark (a config built in code). A checked config
 * is frozen, so the mark stays true. The file count is a node's (NODE_LIMITS), not one OSC's: the
 * Secret's bytes bound it.
 */
import { freezeConfig, type ResolvedConfig } from '../api/resolved.js';
import { NODE_LIMITS } from '../api/constants.js';
import { oscarOwnedErrors } from '../api/oscar-owned.js';
import { InvalidConfigError, validateConfig } from '../api/validate-config.js';

const checked = new WeakSet<ResolvedConfig>();

/** Throws InvalidConfigError (naming `origin` and every field) unless `config` passes. */
export function checkDesired(config: ResolvedConfig, origin: string): ResolvedConfig {
  if (checked.has(config)) return config;
  // oscar's own files and units are refused here and in the OSC's checks, not by the renderers'
  // guard, which sees the bootstrap additions that write them (api/oscar-owned.ts)
  const errors = [
    ...validateConfig(config, { maxFiles: NODE_LIMITS.files }),
    ...oscarOwnedErrors(config),
  ];
  if (errors.length > 0) throw new InvalidConfigError(origin, errors);
  freezeConfig(config);
  checked.add(config);
  return config;
}

/** `config` passed checkDesired (it is frozen, and its next check costs nothing). */
export function isChecked(config: ResolvedConfig): boolean {
  return checked.has(config);
}

/**
 * Marks a config that passed validateConfig with the node's limits (agent/state.ts reads
 * last-applied so) as checked when it passes the rest of checkDesired too: the next check of it
 * (a revert's apply) then costs nothing instead of validating 10,000 files again.
 */
export function noteValidated(config: ResolvedConfig): void {
  if (checked.has(config) || oscarOwnedErrors(config).length > 0) return;
  freezeConfig(config);
  checked.add(config);
}
