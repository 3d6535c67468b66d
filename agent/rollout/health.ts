/**
 * The health gate of try mode: the OSC's health checks (a command, or an HTTP GET on the node's
 * loopback) and the state of every unit the apply started or restarted.
 * - A command runs without a shell, as the agent (root), in the root directory, with a fixed
 *   PATH and locale and nothing of the agent's environment (its credentials stay out), killed at
 *   its timeout. Exit status 0 is healthy.
 * - An HTTP GET goes to 127.0.0.1 only, over a fresh connection, and never follows a redirect;
 *   a 2xx or 3xx answer is healthy. HTTPS does not verify the certificate: the request does not
 *   leave the node, and a kubelet's serving certificate is often self-signed.
 * - A unit is healthy when active (or a oneshot that exited successfully) and not restarted by
 *   systemd since the apply; a unit in state "failed" fails the try at once (systemd gave up).
 * Outputs are cut to a few hundred characters for the report: they are the node's, not secrets,
 * but nothing long belongs in a status.
 */
import { spawn } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { runCommand } from '../systemd.js';
import type { Check } from './grant.js';

export interface CheckResult {
  name: string;
  ok: boolean;
  message: string;
}

export interface HealthProbe {
  run(check: Check): Promise<CheckResult>;
}

export interface UnitState {
  active: string;
  sub: string;
  result: string;
  type: string;
  restarts: number;
}

export interface UnitProbe {
  state(unit: string): Promise<UnitState>;
}

const CLEAN_ENV = {
  PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
  LANG: 'C.UTF-8',
};

function clip(text: string): string {
  const t = text.trim().replace(/\s+/g, ' ');
  return t.length > 300 ? `${t.slice(0, 297)}...` : t;
}

export class NodeHealthProbe implements HealthProbe {
  constructor(private readonly root: string) {}

  run(check: Check): Promise<CheckResult> {
    return check.kind === 'exec' ? this.exec(check) : this.http(check);
  }

  private exec(check: Extract<Check, { kind: 'exec' }>): Promise<CheckResult> {
    const [program, ...args] = check.command;
    return new Promise((resolve) => {
      const done = (ok: boolean, message: string): void => {
        resolve({ name: check.name, ok, message });
      };
      if (program === undefined) {
        done(false, 'no command');
        return;
      }
      const child = spawn(program, args, {
        cwd: this.root,
        env: CLEAN_ENV,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const out: Buffer[] = [];
      let size = 0;
      const keep = (b: Buffer): void => {
        if (size < 4096) out.push(b);
        size += b.length;
      };
      child.stdout.on('data', keep);
      child.stderr.on('data', keep);
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
      }, check.timeoutMs);
      child.on('error', (e) => {
        clearTimeout(timer);
        done(false, `${program}: ${e.message}`);
      });
      child.on('close', (code, signal) => {
        clearTimeout(timer);
        const text = clip(Buffer.concat(out).toString('utf8'));
        if (code === 0) done(true, text || 'exit 0');
        else if (signal === 'SIGKILL') {
          done(
            false,
            `timed out after ${String(check.timeoutMs / 1000)} s${text ? `: ${text}` : ''}`,
          );
        } else done(false, `exit ${String(code ?? signal)}${text ? `: ${text}` : ''}`);
      });
    });
  }

  private http(check: Extract<Check, { kind: 'httpGet' }>): Promise<CheckResult> {
    const url = `${check.scheme.toLowerCase()}://127.0.0.1:${String(check.port)}${check.path}`;
    return new Promise((resolve) => {
      const done = (ok: boolean, message: string): void => {
        resolve({ name: check.name, ok, message });
      };
      const options = {
        host: '127.0.0.1',
        port: check.port,
        path: check.path,
        method: 'GET',
        agent: false as const,
        timeout: check.timeoutMs,
        headers: { 'user-agent': 'oscar-agent-health' },
      };
      const onResponse = (res: import('node:http').IncomingMessage): void => {
        const status = res.statusCode ?? 0;
        res.resume();
        done(status >= 200 && status < 400, `GET ${url}: HTTP ${String(status)}`);
      };
      const req =
        check.scheme === 'HTTPS'
          ? httpsRequest({ ...options, rejectUnauthorized: false }, onResponse)
          : httpRequest(options, onResponse);
      req.on('timeout', () => {
        req.destroy(new Error(`timed out after ${String(check.timeoutMs / 1000)} s`));
      });
      req.on('error', (e) => {
        done(false, `GET ${url}: ${e.message}`);
      });
      req.end();
    });
  }
}

const PROPS = ['ActiveState', 'SubState', 'Result', 'NRestarts', 'Type'];

export class SystemctlUnitProbe implements UnitProbe {
  constructor(private readonly systemctl = 'systemctl') {}

  async state(unit: string): Promise<UnitState> {
    const r = await runCommand(
      this.systemctl,
      ['show', unit, ...PROPS.map((p) => `--property=${p}`)],
      30_000,
    );
    if (r.code !== 0) {
      throw new Error(`systemctl show ${unit} failed: ${clip(r.stderr)}`);
    }
    const v = new Map<string, string>();
    for (const line of r.stdout.split('\n')) {
      const i = line.indexOf('=');
      if (i > 0) v.set(line.slice(0, i), line.slice(i + 1));
    }
    return {
      active: v.get('ActiveState') ?? '',
      sub: v.get('SubState') ?? '',
      result: v.get('Result') ?? '',
      type: v.get('Type') ?? '',
      restarts: Number(v.get('NRestarts') ?? 0),
    };
  }
}

/** A directory root has no running units: each one counts as active. */
export const LOCAL_UNIT_PROBE: UnitProbe = {
  state: () =>
    Promise.resolve({
      active: 'active',
      sub: 'running',
      result: 'success',
      type: 'simple',
      restarts: 0,
    }),
};

export interface UnitVerdict {
  ok: boolean;
  /** The unit failed for good: no point waiting for the deadline. */
  fatal: boolean;
  message: string;
}

/** A unit's health after the apply, given its systemd restart count right after the apply. */
export function judgeUnit(unit: string, s: UnitState, baselineRestarts: number): UnitVerdict {
  if (s.active === 'failed') {
    return { ok: false, fatal: true, message: `${unit} failed (${s.sub}, result ${s.result})` };
  }
  if (s.restarts > baselineRestarts) {
    return {
      ok: false,
      fatal: false,
      message: `${unit} was restarted by systemd ${String(s.restarts - baselineRestarts)} time(s) since the apply`,
    };
  }
  if (s.active === 'active' || s.active === 'reloading') {
    return { ok: true, fatal: false, message: `${unit} ${s.active}` };
  }
  if (s.active === 'inactive' && s.type === 'oneshot' && s.result === 'success') {
    return { ok: true, fatal: false, message: `${unit} ran` };
  }
  return { ok: false, fatal: false, message: `${unit} is ${s.active} (${s.sub})` };
}
