/**
 * The agent's narrow view of systemd. Two implementations:
 * - SystemctlSystemd: the node's own systemd through `systemctl`, every call with a timeout;
 * - LocalSystemd: a directory root (local mode, `oscar up`): enable / disable / mask / unmask run
 *   as `systemctl --root=DIR` (they only create symlinks), while daemon-reload, start, restart and
 *   reload cannot run against a directory, so they are appended to a log file ("would run"),
 *   which is also how tests see what a real node would have done.
 */
import { spawn } from 'node:child_process';
import { access, appendFile, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { UnitActionKind } from './model/actions.js';

export type UnitFileOp = Extract<UnitActionKind, 'enable' | 'disable' | 'mask' | 'unmask'>;
export type UnitJob = Exclude<UnitActionKind, UnitFileOp>;

export interface Systemd {
  daemonReload(): Promise<void>;
  unitFile(op: UnitFileOp, unit: string): Promise<void>;
  job(job: UnitJob, unit: string): Promise<void>;
  /**
   * A token that changes every time the unit is started or restarted (systemd's InvocationID).
   * The executor records it before a restart, so after a crash it can tell whether the restart
   * already happened instead of restarting the unit a second time.
   */
  invocation(unit: string): Promise<string>;
  /** The unit's last journal lines, for error reports. */
  journal(unit: string, lines: number): Promise<string[]>;
}

/** A systemd call that failed, with what systemctl said. */
export class SystemdError extends Error {
  constructor(
    message: string,
    readonly unit: string | undefined,
  ) {
    super(message);
    this.name = 'SystemdError';
  }
}

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command with a timeout (SIGKILL when it expires); never rejects for a non-zero exit. */
export function runCommand(
  cmd: string,
  args: readonly string[],
  timeoutMs: number,
  env: Readonly<Record<string, string>> = {},
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, SYSTEMD_PAGER: '', SYSTEMD_COLORS: '0', LC_ALL: 'C.UTF-8', ...env },
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      const stderr = Buffer.concat(err).toString('utf8');
      resolve({
        code: timedOut ? null : code,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: timedOut ? `${stderr}\n(timed out after ${timeoutMs} ms)` : stderr,
      });
    });
  });
}

const JOB_ARGS: Record<UnitJob, string[]> = {
  start: ['start'],
  stop: ['stop'],
  restart: ['restart'],
  tryRestart: ['try-restart'],
  // reload-or-restart: a unit that is not running is started, the way "reload" was meant
  reload: ['reload-or-restart'],
  stopStart: ['stop'], // followed by start, below
};

/** Stopping or disabling a unit that no longer exists is what we wanted anyway. */
function isGone(r: RunResult): boolean {
  return /not loaded|does not exist|No such file/i.test(r.stderr);
}

export interface SystemctlOptions {
  /** Timeout for jobs (start, restart, …); systemd's own default start timeout is 90 s. */
  jobTimeoutMs?: number;
  /** Timeout for quick calls (show, enable, daemon-reload). */
  callTimeoutMs?: number;
  systemctl?: string;
  journalctl?: string;
}

export class SystemctlSystemd implements Systemd {
  private readonly jobTimeoutMs: number;
  private readonly callTimeoutMs: number;
  private readonly systemctl: string;
  private readonly journalctl: string;

  constructor(opts: SystemctlOptions = {}) {
    this.jobTimeoutMs = opts.jobTimeoutMs ?? 120_000;
    this.callTimeoutMs = opts.callTimeoutMs ?? 60_000;
    this.systemctl = opts.systemctl ?? 'systemctl';
    this.journalctl = opts.journalctl ?? 'journalctl';
  }

  private async call(
    args: string[],
    unit: string | undefined,
    timeoutMs: number,
    tolerateGone = false,
  ): Promise<string> {
    const r = await runCommand(this.systemctl, ['--no-ask-password', ...args], timeoutMs);
    if (r.code === 0 || (tolerateGone && isGone(r))) return r.stdout;
    throw new SystemdError(
      `systemctl ${args.join(' ')} failed (exit ${r.code ?? 'timeout'}): ${r.stderr.trim() || r.stdout.trim()}`,
      unit,
    );
  }

  async daemonReload(): Promise<void> {
    await this.call(['daemon-reload'], undefined, this.callTimeoutMs);
  }

  async unitFile(op: UnitFileOp, unit: string): Promise<void> {
    await this.call([op, unit], unit, this.callTimeoutMs, op === 'disable');
  }

  async job(job: UnitJob, unit: string): Promise<void> {
    await this.call(
      [...JOB_ARGS[job], unit],
      unit,
      this.jobTimeoutMs,
      job === 'stop' || job === 'stopStart',
    );
    if (job === 'stopStart') await this.call(['start', unit], unit, this.jobTimeoutMs);
  }

  async invocation(unit: string): Promise<string> {
    const out = await this.call(
      ['show', '--property=InvocationID', '--value', unit],
      unit,
      this.callTimeoutMs,
    );
    return out.trim();
  }

  async journal(unit: string, lines: number): Promise<string[]> {
    const r = await runCommand(
      this.journalctl,
      ['-u', unit, '-n', String(lines), '--no-pager', '-o', 'short-iso'],
      this.callTimeoutMs,
    );
    return r.stdout.split('\n').filter((l) => l !== '' && !l.startsWith('-- '));
  }
}

export class LocalSystemd implements Systemd {
  constructor(
    private readonly root: string,
    /** "would run" log: one line per job a real node would run. */
    private readonly logPath: string,
    private readonly systemctl = 'systemctl',
  ) {}

  private async log(line: string): Promise<void> {
    // one write() per line: a crash never leaves half a line
    await appendFile(this.logPath, `${new Date().toISOString()} ${line}\n`);
  }

  async daemonReload(): Promise<void> {
    await this.log('daemon-reload');
  }

  async unitFile(op: UnitFileOp, unit: string): Promise<void> {
    if ((op === 'enable' || op === 'disable') && !(await this.hasUnitFile(unit))) {
      // a unit the OS ships (containerd.service) is not in a sandbox root: say what a node would do
      await this.log(`${op} ${unit}`);
      return;
    }
    const r = await runCommand(this.systemctl, [`--root=${this.root}`, op, unit], 60_000);
    if (r.code !== 0 && !(op === 'disable' && isGone(r))) {
      throw new SystemdError(
        `systemctl --root=${this.root} ${op} ${unit} failed (exit ${r.code ?? 'timeout'}): ${r.stderr.trim()}`,
        unit,
      );
    }
  }

  async job(job: UnitJob, unit: string): Promise<void> {
    await this.log(`${job} ${unit}`);
  }

  private async hasUnitFile(unit: string): Promise<boolean> {
    const template = unit.replace(/@[^.]*\./, '@.');
    for (const dir of ['/etc/systemd/system', '/usr/lib/systemd/system', '/lib/systemd/system']) {
      for (const name of new Set([unit, template])) {
        try {
          await access(join(this.root, dir, name));
          return true;
        } catch {
          // not here
        }
      }
    }
    return false;
  }

  /** The number of jobs logged for the unit: changes exactly when a job ran. */
  async invocation(unit: string): Promise<string> {
    return String((await this.loggedJobs()).filter((j) => j.unit === unit).length);
  }

  async journal(): Promise<string[]> {
    return Promise.resolve([]);
  }

  async loggedJobs(): Promise<{ job: string; unit: string }[]> {
    let text: string;
    try {
      text = await readFile(this.logPath, 'utf8');
    } catch {
      return [];
    }
    return text
      .split('\n')
      .map((l) => l.split(' '))
      .filter((parts) => parts.length >= 2)
      .map(([, job = '', unit = '']) => ({ job, unit }));
  }
}
