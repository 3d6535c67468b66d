/**
 * Every desired state the agent acts on passes the rules of `oscar validate` first
 * (api/validate-config.ts), whichever source it came from: the reconcile Secret, a local file
 * (canonical JSON, or YAML after the OS profile's additions), or the agent's own records. The
 * source checks it, so a bad state is refused and reported as InvalidConfig there; the executor
 * checks again whatever it is handed without that mark (a config built in code). A checked config
 * is frozen, so the mark stays true. The file count is a node's (NODE_LIMITS), not one OSC's: the
 * Secret's bytes bound it.
 */
import { freezeConfig, type ResolvedConfig } from '../api/resolved.js';
import { NODE_LIMITS } from '../api/constants.js';
import { assertValidConfig } from '../api/validate-config.js';

const checked = new WeakSet<ResolvedConfig>();

/** Throws InvalidConfigError (naming `origin` and every field) unless `config` passes. */
export function checkDesired(config: ResolvedConfig, origin: string): ResolvedConfig {
  if (checked.has(config)) return config;
  assertValidConfig(config, origin, { maxFiles: NODE_LIMITS.files });
  freezeConfig(config);
  checked.add(config);
  return config;
}
