/**
 * The agent's state directory (default /var/lib/oscar; under the root in local mode):
 * - last-applied.json: the canonical text of the config last applied in full (written only after
 *   success, atomically) — the planner's "last applied";
 * - journal.json + journal.log: the apply in progress (agent/journal.ts);
 * - agent.pid: one agent per state directory.
 */
import { mkdir, readFile, writeFile, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { parseCanonical, sha256Hex } from '../api/canonical.js';
import type { ResolvedConfig } from '../api/resolved.js';
import { writeFileAtomic } from './fs.js';

export const DEFAULT_STATE_DIR = '/var/lib/oscar';

export interface Desired {
  config: ResolvedConfig;
  checksum: string;
  /** The canonical bytes (what the checksum is taken over). */
  bytes: Buffer;
}

const LAST_APPLIED = 'last-applied.json';

export async function readLastApplied(stateDir: string): Promise<Desired | undefined> {
  let bytes: Buffer;
  try {
    bytes = await readFile(join(stateDir, LAST_APPLIED));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  try {
    return { config: parseCanonical(bytes), checksum: sha256Hex(bytes), bytes };
  } catch (error) {
    // Written atomically, so this is outside damage; planning from nothing rewrites every file
    // (idempotent) and removes nothing, which is the safe direction.
    throw new Error(
      `${join(stateDir, LAST_APPLIED)} is damaged (${(error as Error).message}); remove it to let the agent re-apply everything`,
      { cause: error },
    );
  }
}

export async function writeLastApplied(stateDir: string, bytes: Buffer): Promise<void> {
  await writeFileAtomic(join(stateDir, LAST_APPLIED), bytes, 0o600, undefined);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Takes the state directory for this process: two agents applying into one root would undo each
 * other. A lock left by a killed agent (its pid is gone) is taken over.
 */
export async function lockStateDir(stateDir: string): Promise<() => Promise<void>> {
  await mkdir(stateDir, { recursive: true, mode: 0o700 });
  const path = join(stateDir, 'agent.pid');
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      await writeFile(path, `${process.pid}\n`, { flag: 'wx', mode: 0o600 });
      return async () => {
        await unlink(path).catch(() => undefined);
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const pid = Number((await readFile(path, 'utf8').catch(() => '')).trim());
      if (pid > 0 && pid !== process.pid && alive(pid)) {
        throw new Error(`another oscar agent (pid ${pid}) uses the state directory ${stateDir}`, {
          cause: error,
        });
      }
      await unlink(path).catch(() => undefined);
    }
  }
  throw new Error(`cannot lock the state directory ${stateDir}`);
}
