// Process plumbing for the test cluster. Processes are started detached (own
// process group, output to a log file) so that whichever process starts them —
// vitest's main process, a test worker restarting the API server, or the CLI —
// can exit without taking them along; they are identified later by pid plus the
// kernel's start time, so a recycled pid is never mistaken for ours.
import { spawn } from 'node:child_process';
import { open, readdir, readFile } from 'node:fs/promises';
import { createServer } from 'node:net';

/** A process we started: pid plus its start time (clock ticks since boot) from /proc. */
export interface ProcRef {
  pid: number;
  startTime: string;
}

/** Start time from /proc/<pid>/stat, or undefined when the pid is gone or a zombie. */
export async function procStartTime(pid: number): Promise<string | undefined> {
  let stat: string;
  try {
    stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name (field 2) may contain spaces; fields after it are plain.
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const state = rest[0];
  if (state === 'Z' || state === 'X') return undefined;
  return rest[19]; // field 22 (starttime) = index 19 after the state field (field 3)
}

export async function isRunning(ref: ProcRef): Promise<boolean> {
  return (await procStartTime(ref.pid)) === ref.startTime;
}

export async function startDetached(
  command: string,
  args: readonly string[],
  logPath: string,
): Promise<ProcRef> {
  const log = await open(logPath, 'a');
  try {
    const child = spawn(command, args, {
      detached: true,
      stdio: ['ignore', log.fd, log.fd],
    });
    const pid = await new Promise<number>((resolve, reject) => {
      child.once('error', reject);
      child.once('spawn', () => {
        if (child.pid === undefined) reject(new Error(`${command} started without a pid`));
        else resolve(child.pid);
      });
    });
    child.unref();
    const startTime = await procStartTime(pid);
    if (startTime === undefined) {
      throw new Error(`${command} exited immediately; see ${logPath}`);
    }
    return { pid, startTime };
  } finally {
    await log.close();
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Stops a process we started: the signal to its whole process group, then SIGKILL
 * after `graceMs`. Resolves once it is gone. A process that is already gone is fine.
 */
export async function stopProcess(
  ref: ProcRef,
  signal: NodeJS.Signals = 'SIGTERM',
  graceMs = 15_000,
): Promise<void> {
  if (!(await isRunning(ref))) return;
  const send = (sig: NodeJS.Signals): void => {
    try {
      process.kill(-ref.pid, sig);
    } catch {
      try {
        process.kill(ref.pid, sig);
      } catch {
        // already gone
      }
    }
  };
  send(signal);
  const deadline = Date.now() + graceMs;
  while (await isRunning(ref)) {
    if (Date.now() > deadline) {
      send('SIGKILL');
      await sleep(100);
      if (Date.now() > deadline + 5_000) {
        throw new Error(`process ${ref.pid} survived SIGKILL for 5 s`);
      }
    } else {
      await sleep(50);
    }
  }
}

/**
 * Processes running one of the binaries in `binDir` with `marker` (a run
 * directory) in their arguments: a safety net that finds a run's processes even
 * when the state file lost track of one.
 */
export async function findProcesses(binDir: string, marker: string): Promise<ProcRef[]> {
  const found: ProcRef[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^[0-9]+$/.test(entry)) continue;
    let argv: string[];
    try {
      argv = (await readFile(`/proc/${entry}/cmdline`, 'utf8')).split('\0');
    } catch {
      continue;
    }
    const exe = argv[0] ?? '';
    if (!exe.startsWith(`${binDir}/`) || !argv.slice(1).some((a) => a.includes(marker))) continue;
    const pid = Number(entry);
    const startTime = await procStartTime(pid);
    if (startTime !== undefined) found.push({ pid, startTime });
  }
  return found;
}

/** A TCP port on `host` that was free a moment ago (the kernel picks it). */
export function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, host, () => {
      const addr = srv.address();
      srv.close(() => {
        if (addr !== null && typeof addr === 'object') resolve(addr.port);
        else reject(new Error('could not read the port the kernel picked'));
      });
    });
  });
}

/** Last lines of a log file, for error messages that say why a process died. */
export async function tail(path: string, lines = 30): Promise<string> {
  try {
    const text = await readFile(path, 'utf8');
    return text.trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}
