/**
 * The agent's state directory (default /var/lib/oscar; under the root in local mode), opened and
 * checked by agent/state-dir.ts:
 * - last-applied.json: the canonical text of the config last applied in full (written only after
 *   success, atomically) — the planner's "last applied";
 * - journal.json + journal.log: the apply in progress (agent/journal.ts);
 * - agent.lock: one agent per state directory (agent/lock.ts).
 */
import { parseCanonical, sha256Hex } from '../api/canonical.js';
import { AGENT_STATE_DIR, NODE_LIMITS } from '../api/constants.js';
import type { ResolvedConfig } from '../api/resolved.js';
import { validateConfig } from '../api/validate-config.js';
import { formatFieldError } from '../api/field-error.js';
import { isChecked, noteValidated } from './desired-check.js';
import { StateDir, StateError } from './state-dir.js';

export { lockStateDir } from './lock.js';

export const DEFAULT_STATE_DIR = AGENT_STATE_DIR;

export interface Desired {
  config: ResolvedConfig;
  checksum: string;
  /** The canonical bytes (what the checksum is taken over). */
  bytes: Buffer;
}

const LAST_APPLIED = 'last-applied.json';

/** The config applied last; undefined when none was (reading creates no state directory). */
export async function readLastApplied(stateDir: string): Promise<Desired | undefined> {
  const state = await StateDir.openExisting(stateDir);
  if (!state) return undefined;
  try {
    return await lastAppliedIn(state, stateDir);
  } finally {
    await state.close();
  }
}

async function lastAppliedIn(state: StateDir, stateDir: string): Promise<Desired | undefined> {
  const bytes = await state.read(LAST_APPLIED);
  if (bytes === undefined) return undefined;
  const checksum = sha256Hex(bytes);
  const same = recall(stateDir, checksum);
  if (same) return { config: same, checksum, bytes };
  // Written atomically by the agent, so anything wrong here is outside damage. Planning from
  // nothing rewrites every file (idempotent) and removes nothing, which is the safe direction.
  const fix = `remove it to let the agent re-apply everything (files it wrote that later left the config then stay on the node)`;
  let config: ResolvedConfig;
  try {
    config = parseCanonical(bytes);
  } catch (error) {
    throw new StateError(
      `${state.file(LAST_APPLIED)} is damaged (${(error as Error).message}); ${fix}`,
      { cause: error },
    );
  }
  // it names the files the agent may remove: it must pass the same rules as a desired state
  const errors = validateConfig(config, { maxFiles: NODE_LIMITS.files });
  if (errors.length > 0) {
    throw new StateError(
      `${state.file(LAST_APPLIED)} holds a config oscar would refuse (${errors.slice(0, 3).map(formatFieldError).join('; ')}); ${fix}`,
    );
  }
  noteValidated(config);
  remember(stateDir, checksum, config);
  return { config, checksum, bytes };
}

/**
 * The checked config last read from or written to last-applied, by its bytes' checksum, for as
 * long as the agent holds it anyway (the drift monitor holds the applied config; nothing is
 * kept alive for this): a revert reads last-applied on every drift, and parsing and checking
 * 10,000 files took ~0.3 s each time. The file is still read and hashed on every read; only the
 * same bytes give the same config back. One entry: an agent has one state directory.
 */
let known: { stateDir: string; checksum: string; config: WeakRef<ResolvedConfig> } | undefined;

function remember(stateDir: string, checksum: string, config: ResolvedConfig): void {
  if (isChecked(config)) known = { stateDir, checksum, config: new WeakRef(config) };
}

function recall(stateDir: string, checksum: string): ResolvedConfig | undefined {
  return known?.stateDir === stateDir && known.checksum === checksum
    ? known.config.deref()
    : undefined;
}

/** Writes last-applied; `config`, the checked config of `bytes`, is recalled when it is read. */
export async function writeLastApplied(
  stateDir: string,
  bytes: Buffer,
  config?: ResolvedConfig,
): Promise<void> {
  await StateDir.with(stateDir, (state) => state.write(LAST_APPLIED, bytes));
  if (config) remember(stateDir, sha256Hex(bytes), config);
}
