// The REAL validators of each rendered format. Every function returns the validator's output;
// the empty string means valid. Any output is a failure, because several of these tools print
// warnings yet exit 0 (ignition-validate, systemd-analyze verify, cloud-init deprecations).
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { run, type RunResult } from './exec.js';

/** The Debian python: a pyenv python earlier on PATH lacks the cloudinit module. */
export const systemPython = '/usr/bin/python3';
const schemaHelper = join(dirname(fileURLToPath(import.meta.url)), 'cloud-init-schema.py');

/** Output of a process as the validators report it: stdout+stderr, plus the exit status if bad. */
function report(r: RunResult, tmpPath?: string, placeholder?: string): string {
  let text = (r.stdout + r.stderr).trim();
  if (r.code !== 0 && text === '') text = `exited ${r.code ?? r.signal ?? '?'} without output`;
  if (tmpPath !== undefined && placeholder !== undefined)
    text = text.split(tmpPath).join(placeholder);
  return text;
}

async function withTempDir<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'oscar-validate-'));
  try {
    return await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

// ---- cloud-config ---------------------------------------------------------------------------

interface Pending {
  resolve: (output: string) => void;
  reject: (err: Error) => void;
}

/**
 * One long-lived python process running cloud-init's validate_cloudconfig_file for many
 * documents (~0.04 s each instead of ~0.7 s per CLI start). It is unref'd while idle so it never
 * keeps a test process alive.
 */
class CloudInitSchemaWorker {
  private child: ChildProcessWithoutNullStreams | undefined;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private stderr = '';

  private start(): ChildProcessWithoutNullStreams {
    const child = spawn(systemPython, [schemaHelper], { stdio: ['pipe', 'pipe', 'pipe'] });
    child.stderr.on('data', (b: Buffer) => {
      this.stderr = (this.stderr + b.toString('utf8')).slice(-4000);
    });
    createInterface({ input: child.stdout }).on('line', (line) => {
      const msg = JSON.parse(line) as { id: number; output: string };
      const p = this.pending.get(msg.id);
      if (p === undefined) return;
      this.pending.delete(msg.id);
      this.refresh();
      p.resolve(msg.output);
    });
    const fail = (why: string): void => {
      if (this.child === child) this.child = undefined;
      const err = new Error(`cloud-init schema helper ${why}: ${this.stderr.trim()}`);
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
    };
    child.on('error', (e) => {
      fail(`failed to start (${e.message})`);
    });
    child.on('exit', (code, signal) => {
      fail(`exited ${code ?? signal ?? '?'}`);
    });
    return child;
  }

  /** Keep the event loop alive only while answers are outstanding. */
  private refresh(): void {
    const c = this.child;
    if (c === undefined) return;
    const streams = [c.stdout, c.stderr, c.stdin] as unknown as { ref(): void; unref(): void }[];
    if (this.pending.size > 0) {
      c.ref();
      for (const s of streams) s.ref();
    } else {
      c.unref();
      for (const s of streams) s.unref();
    }
  }

  validate(text: string): Promise<string> {
    this.child ??= this.start();
    const id = this.nextId++;
    const child = this.child;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.refresh();
      child.stdin.write(JSON.stringify({ id, text }) + '\n');
    });
  }

  stop(): void {
    this.child?.kill();
    this.child = undefined;
  }
}

const schemaWorker = new CloudInitSchemaWorker();

/**
 * Validates a `#cloud-config` document with cloud-init's schema (same checks as
 * `cloud-init schema --config-file`: header, YAML, strict schema, deprecations). Returns '' when
 * valid, else the messages, e.g. "Cloud config schema errors: write_files.0.permissions: 420 is
 * not of type 'string'". Note: unknown top-level keys pass; MIME multipart is refused.
 */
export function cloudInitSchema(yamlText: string): Promise<string> {
  return schemaWorker.validate(yamlText);
}

/** The CLI path (~0.7 s per call); kept to cross-check the in-process helper. */
export async function cloudInitSchemaCli(yamlText: string): Promise<string> {
  return withTempDir(async (dir) => {
    const file = join(dir, 'user-data.yaml');
    await writeFile(file, yamlText);
    const r = await run(systemPython, [
      '-m',
      'cloudinit.cmd.main',
      'schema',
      '--config-file',
      file,
    ]);
    // Success prints "Valid cloud-config: FILE"; that line alone is not a finding.
    const lines = report(r, file, '<cloud-config>')
      .split('\n')
      .filter((l) => !l.startsWith('Valid cloud-config:'));
    return lines.join('\n').trim();
  });
}

/** Stops the schema helper (optional; it never holds a process open while idle). */
export function stopValidators(): void {
  schemaWorker.stop();
}

// ---- Ignition -------------------------------------------------------------------------------

/** `ignition-validate` on the JSON text. Warnings exit 0 there, so any output is returned. */
export async function ignitionValidate(json: string): Promise<string> {
  return withTempDir(async (dir) => {
    const file = join(dir, 'config.ign');
    await writeFile(file, json);
    return report(await run('ignition-validate', [file]), file, '<config.ign>');
  });
}

// ---- shell ----------------------------------------------------------------------------------

/** `shellcheck -S warning` (dialect from the shebang; a script without one is a finding). */
export async function shellcheck(script: string): Promise<string> {
  return report(await run('shellcheck', ['-S', 'warning', '-'], { input: script }));
}

/** `sh -n`: parses the script with the node's /bin/sh without running it. */
export async function shNoexec(script: string): Promise<string> {
  return report(await run('sh', ['-n'], { input: script }));
}

// ---- systemd units --------------------------------------------------------------------------

export interface UnitFile {
  /** Unit name with suffix, e.g. "kubelet.service". */
  name: string;
  content: string;
  /** Drop-ins, written to NAME.d/<dropIn.name> (name must end in ".conf"). */
  dropIns?: readonly { name: string; content: string }[];
}

const unitName =
  /^[A-Za-z0-9:_.@\\-]+\.(service|socket|target|timer|path|mount|automount|swap|slice|scope|device)$/;

/**
 * `systemd-analyze verify --man=no` on the units, with their drop-ins, from a private unit
 * directory searched before the host's (SYSTEMD_UNIT_PATH=DIR:). Unknown keys/sections only
 * print (exit 0), so any output is returned. ExecStart= binaries must exist on this host.
 */
export async function systemdAnalyzeVerify(units: readonly UnitFile[]): Promise<string> {
  if (units.length === 0) throw new Error('systemdAnalyzeVerify: no units given');
  return withTempDir(async (dir) => {
    for (const u of units) {
      if (!unitName.test(u.name))
        throw new Error(`systemdAnalyzeVerify: bad unit name '${u.name}'`);
      await writeFile(join(dir, u.name), u.content);
      for (const d of u.dropIns ?? []) {
        if (!/^[^/]+\.conf$/.test(d.name)) {
          throw new Error(
            `systemdAnalyzeVerify: drop-in '${d.name}' of ${u.name} must be a file name ending in .conf`,
          );
        }
        await mkdir(join(dir, `${u.name}.d`), { recursive: true });
        await writeFile(join(dir, `${u.name}.d`, d.name), d.content);
      }
    }
    const r = await run(
      'systemd-analyze',
      ['verify', '--man=no', ...units.map((u) => u.name)],
      // SYSTEMD_LOG_COLOR=0: plain text even if a test runner allocates a tty
      { env: { ...process.env, SYSTEMD_UNIT_PATH: `${dir}:`, SYSTEMD_LOG_COLOR: '0' }, cwd: dir },
    );
    return report(r, `${dir}/`, '');
  });
}
