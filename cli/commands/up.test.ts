import { mkdtemp, readFile, rm, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { lockStateDir } from '../../agent/lock.js';
import { saveInTwoParts } from '../../agent/testing/editor.js';
import { buildProgram } from '../main.js';

let out: string;
beforeEach(async () => {
  out = await mkdtemp(join(tmpdir(), 'oscar-up-'));
});
afterEach(async () => {
  vi.restoreAllMocks();
  process.exitCode = undefined;
  await rm(out, { recursive: true, force: true });
});

async function oscar(...args: string[]): Promise<string> {
  const chunks: string[] = [];
  vi.spyOn(process.stdout, 'write').mockImplementation((c: string | Uint8Array) => {
    chunks.push(String(c));
    return true;
  });
  vi.spyOn(console, 'error').mockImplementation((...a: unknown[]) => {
    chunks.push(`${a.join(' ')}\n`);
  });
  await buildProgram()
    .exitOverride()
    .parseAsync(['node', 'oscar', ...args]);
  vi.restoreAllMocks();
  return chunks.join('');
}

describe('oscar up --once / oscar plan', () => {
  it('applies every example to its sandbox root, printing the plan; a second run has nothing to do', async () => {
    const first = await oscar('up', 'examples', '--once', '--out', out);
    expect(process.exitCode).toBe(0);
    expect(first).toMatch(/oscar up: \d+ file\(s\) in examples\//);
    expect(first).toMatch(/generic-edge \(reconcile, [0-9a-f]{12}\)/);
    expect(first).toMatch(/write \/etc\/edge-proxy\/proxy\.conf \(0640 root:root, \d+ B\) — new/);
    expect(
      await readFile(join(out, 'root/generic-edge/etc/edge-proxy/proxy.conf'), 'utf8'),
    ).toMatch(/listen 127\.0\.0\.1:8080/);
    // the OS profile's expansion is applied too (containerd config for the kubeadm worker)
    expect(
      await readFile(join(out, 'root/worker-reconcile/etc/containerd/config.toml'), 'utf8'),
    ).toMatch(/SystemdCgroup/);
    const second = await oscar('up', 'examples', '--once', '--out', out);
    expect(second).not.toMatch(/ — new/);
    expect(second.match(/nothing to do/g)?.length).toBe(first.match(/^● /gm)?.length);
  });

  it('an invalid file is reported with its field and the others still apply', async () => {
    const dir = join(out, 'oscs');
    await mkdir(dir);
    const good = await readFile('examples/generic.yaml', 'utf8');
    await writeFile(join(dir, 'good.yaml'), good);
    await writeFile(
      join(dir, 'bad.yaml'),
      good.replace("permissions: '0640'", 'permissions: 0640').replace('generic-edge', 'bad'),
    );
    const text = await oscar('up', dir, '--once', '--out', join(out, 'sandbox'));
    expect(process.exitCode).toBe(1);
    expect(text).toMatch(/✗ .*bad\.yaml: not applied[\s\S]*spec\.files\[0\]\.permissions/);
    expect(text).toMatch(/good\.yaml → .*generic-edge/);
  });

  it('oscar plan shows what applying would do, without doing it', async () => {
    const root = join(out, 'root');
    await mkdir(root); // a plan creates nothing, not even its root
    const text = await oscar('plan', '--file', 'examples/generic.yaml', '--root', root);
    expect(text).toMatch(/plan for examples\/generic\.yaml \([0-9a-f]{12}\) on /);
    expect(text).toMatch(/enable edge-proxy\.service — new/);
    expect(text).toMatch(/5 action\(s\)/);
    await expect(readFile(join(root, 'etc/edge-proxy/proxy.conf'))).rejects.toThrow(/ENOENT/);
  });
});

describe('oscar up on SIGTERM', () => {
  it('finishes the apply in progress and ends within --shutdown-timeout, exit 0', async () => {
    const { spawn } = await import('node:child_process');
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        'cli/oscar.ts',
        'up',
        'examples',
        '--out',
        out,
        '--shutdown-timeout',
        '3s',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, OSCAR_LOG_LEVEL: 'info' } },
    );
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    while (!output.includes('watching examples/')) await new Promise((r) => setTimeout(r, 50));
    const t0 = Date.now();
    child.kill('SIGTERM');
    expect(await exited, output).toBe(0);
    expect(Date.now() - t0).toBeLessThan(3_000);
    expect(output).toContain('oscar up: stopped');
  });
});

describe('oscar up while files are saved', () => {
  const osc = (units: string[]): string => `apiVersion: oscar.dev/v1alpha1
kind: OperatingSystemConfig
metadata:
  name: half
spec:
  type: generic
  purpose: reconcile
  units:
${units.map((u) => `    - name: ${u}\n      content: |\n        [Service]\n        ExecStart=/bin/sleep infinity\n`).join('')}`;

  it('a file saved in two writes is applied whole: the first half (valid, with a unit missing) never is', async () => {
    const dir = join(out, 'oscs');
    await mkdir(dir);
    const path = join(dir, 'half.yaml');
    const whole = osc(['a.service', 'b.service']);
    await writeFile(path, whole);
    // a process of its own: oscar up ends its process on the signal that stops it
    const { spawn } = await import('node:child_process');
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', 'cli/oscar.ts', 'up', dir, '--out', join(out, 'sandbox')],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const chunks: string[] = [];
    child.stdout.on('data', (d: Buffer) => chunks.push(d.toString()));
    child.stderr.on('data', (d: Buffer) => chunks.push(d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    try {
      await vi.waitFor(() => {
        expect(chunks.join('')).toMatch(/watching/);
      }, 20_000);
      // the first part alone is a valid OSC without b.service; the editor pauses 250 ms
      const changed = whole.replace('ExecStart=/bin/sleep infinity', 'ExecStart=/bin/sleep 1d');
      const cut = changed.indexOf('    - name: b.service');
      await saveInTwoParts(path, changed.slice(0, cut), changed.slice(cut), 250);
      await vi.waitFor(() => {
        expect(chunks.join('').match(/^● /gm)).toHaveLength(2);
      }, 10_000);
      await new Promise((r) => setTimeout(r, 1000)); // nothing else comes
    } finally {
      child.kill('SIGTERM');
      await exited;
    }
    const text = chunks.join('');
    expect(text.match(/^● /gm)).toHaveLength(2); // the start, and the whole save: not its half
    expect(text).not.toMatch(/stop b\.service|remove \/etc\/systemd\/system\/b\.service/);
    expect(
      await readFile(join(out, 'sandbox/root/half/etc/systemd/system/b.service'), 'utf8'),
    ).toMatch(/ExecStart/);
  }, 30_000);

  it('takes the sandbox lock: a sandbox an agent holds is reported, not applied', async () => {
    const dir = join(out, 'oscs');
    await mkdir(dir);
    await writeFile(join(dir, 'a.yaml'), osc(['a.service']));
    const stateDir = join(out, 'sandbox/root/half/var/lib/oscar');
    await mkdir(stateDir, { recursive: true, mode: 0o700 });
    const unlock = await lockStateDir(stateDir);
    try {
      const text = await oscar('up', dir, '--once', '--out', join(out, 'sandbox'));
      expect(process.exitCode).toBe(1);
      expect(text).toMatch(
        /✗ .*a\.yaml \(half\): another oscar agent \(pid \d+\) holds .*agent\.lock/,
      );
    } finally {
      await unlock();
    }
  });
});
