/**
 * One agent per state directory: two agents applying into one root would undo each other.
 *
 * The lock is flock(2) on STATE/agent.lock, which the kernel ties to the agent's open file and
 * drops when the agent's process ends, however it ends — no PID to go stale or be reused (PID 1
 * after a reboot), no takeover two agents could both win. Node has no flock(2); util-linux's
 * flock(1), which every systemd node has, takes it on a descriptor the agent passes down: a lock
 * belongs to the open file description, not to the process that asked, so it stays with the
 * agent's descriptor after flock(1) exits. The PID in the file is only for the message another
 * agent prints.
 */
import { spawn } from 'node:child_process';
import { constants } from 'node:fs';
import { access } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { StateDir, StateError } from './state-dir.js';

export const LOCK_FILE = 'agent.lock';

const FLOCK_PATHS = ['/usr/bin/flock', '/bin/flock'];

async function flockBinary(): Promise<string> {
  for (const path of FLOCK_PATHS) {
    try {
      await access(path, constants.X_OK);
      return path;
    } catch {
      // not here
    }
  }
  throw new StateError(
    `cannot lock the state directory: flock(1) (util-linux) is not at ${FLOCK_PATHS.join(' or ')}`,
  );
}

/** Runs flock(1) on `handle`'s descriptor: true when the lock was taken, false when it is held. */
function tryFlock(flock: string, handle: FileHandle): Promise<boolean> {
  return new Promise((done, fail) => {
    // the descriptor becomes the child's fd 3; "-n": fail at once (exit 1) when it is held
    const child = spawn(flock, ['--exclusive', '--nonblock', '3'], {
      stdio: ['ignore', 'ignore', 'pipe', handle.fd],
    });
    let stderr = '';
    child.stderr?.on('data', (b: Buffer) => (stderr += b.toString()));
    child.on('error', fail);
    child.on('close', (code) => {
      if (code === 0) done(true);
      else if (code === 1) done(false);
      else fail(new StateError(`flock(1) failed (exit ${String(code)}): ${stderr.trim()}`));
    });
  });
}

/**
 * Takes the state directory for this process; the returned function releases it. Throws, naming
 * the other agent's PID, when another process holds it.
 */
export async function lockStateDir(path: string): Promise<() => Promise<void>> {
  const state = await StateDir.open(path);
  let handle: FileHandle | undefined;
  try {
    handle = await state.openFile(LOCK_FILE, constants.O_RDWR | constants.O_CREAT);
    if (!(await tryFlock(await flockBinary(), handle))) {
      const holder = (await state.read(LOCK_FILE))?.toString('utf8').trim();
      throw new StateError(
        `another oscar agent${holder ? ` (pid ${holder})` : ''} holds ${state.file(LOCK_FILE)}; stop it first (the lock ends with its process)`,
      );
    }
    await handle.truncate(0);
    await handle.write(`${String(process.pid)}\n`, 0);
  } catch (error) {
    await handle?.close();
    await state.close();
    throw error;
  }
  const held = handle;
  return async () => {
    // closing the last descriptor of the open file releases the lock; the file stays (removing
    // it would let a second agent lock a new file while a first still holds the old one)
    await held.close();
    await state.close();
  };
}
