/**
 * The single executables (`npm run build:bin`), built for real into a fresh directory (the cold
 * path a fresh machine takes), then again (the warm path: the same input reuses it): they run
 * without Node.js or node_modules around them — the arm64 ones under qemu-user-static — their
 * .sha256 and SHA256SUMS are their digests, and what the agent left out says so.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requireTool } from '../../test/support/tools.js';
import {
  ARTIFACT_NAME,
  artifactName,
  buildAgent,
  buildAll,
  buildExecutable,
  type BuiltAgent,
} from './build.js';

const execFileP = promisify(execFile);
let out: string;
let first: BuiltAgent;
let all: BuiltAgent[];

beforeAll(async () => {
  out = await mkdtemp(join(tmpdir(), 'oscar-agent-artifact-'));
  all = await buildAll({ outDir: out });
  first = all.find((b) => b.path === join(out, ARTIFACT_NAME)) ?? all[0]!;
}, 600_000);
afterAll(async () => {
  await rm(out, { recursive: true, force: true });
});

describe('npm run build:agent', () => {
  it('builds one executable whose .sha256 is its digest', async () => {
    expect(first.built).toBe(true);
    expect(first.path).toBe(join(out, ARTIFACT_NAME));
    const digest = createHash('sha256')
      .update(await readFile(first.path))
      .digest('hex');
    expect(first.sha256).toBe(digest);
    expect(await readFile(`${first.path}.sha256`, 'utf8')).toBe(`${digest}  ${ARTIFACT_NAME}\n`);
  });

  it('runs with no Node.js and no node_modules around it: only the node commands', async () => {
    const empty = await mkdtemp(join(tmpdir(), 'oscar-agent-run-'));
    try {
      const opts = { cwd: empty, env: { PATH: '/usr/bin:/bin' } };
      const version = await execFileP(first.path, ['version'], opts);
      expect(version.stdout).toMatch(/^oscar \d+\.\d+\.\d+ \(api oscar\.dev\/v1alpha1, node v24\./);
      const help = (await execFileP(first.path, ['--help'], opts)).stdout;
      expect(help).toMatch(/agent \[options\]/);
      expect(help).toMatch(/plan \[options\]/);
      expect(help).not.toMatch(/^ {2}(controller|render|user-data|up)\b/m);
      // nor their code: the controller, the renderers and express are not in it
      const bytes = await readFile(first.path);
      for (const absent of ['reconcileBootstrap', 'renderCloudConfig', 'express.static']) {
        expect(bytes.includes(absent), absent).toBe(false);
      }
      // what was left out of it fails clearly, not with a stack or a module resolved from the cwd
      const kubeconfig = join(empty, 'kubeconfig');
      await writeFile(
        kubeconfig,
        [
          'apiVersion: v1',
          'kind: Config',
          'clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]',
          'users: [{name: u, user: {exec: {command: x, apiVersion: client.authentication.k8s.io/v1}}}]',
          'contexts: [{name: c, context: {cluster: c, user: u}}]',
          'current-context: c',
        ].join('\n'),
      );
      const failed = await execFileP(
        first.path,
        ['agent', '--kubeconfig', kubeconfig, '--namespace', 'n', '--secret', 's', '--node', 'x'],
        { ...opts, timeout: 20_000 },
      ).catch((e: unknown) => e as { code: number; stderr: string });
      expect(failed).toMatchObject({ code: 1 });
      expect((failed as { stderr: string }).stderr).toMatch(
        /needs an exec plugin.*not part of the oscar-agent single executable.*client certificate or a token/,
      );
    } finally {
      await rm(empty, { recursive: true, force: true });
    }
  });

  it('builds oscar and oscar-agent for linux-amd64 and linux-arm64, with SHA256SUMS', async () => {
    const names = ['oscar', 'oscar-agent'].flatMap((p) =>
      ['linux-amd64', 'linux-arm64'].map((a) => `${p}-${a}`),
    );
    expect(all.map((b) => b.path)).toEqual(names.map((n) => join(out, n)));
    const sums = await readFile(join(out, 'SHA256SUMS'), 'utf8');
    for (const b of all) {
      const digest = createHash('sha256')
        .update(await readFile(b.path))
        .digest('hex');
      expect(sums).toContain(`${digest}  ${b.path.slice(out.length + 1)}\n`);
    }
    // the full command has the controller's commands, the agent has not
    const oscar = await execFileP(join(out, 'oscar-linux-amd64'), ['--help'], { cwd: out });
    expect(oscar.stdout).toMatch(/^ {2}controller \[options\]/m);
    const info = await execFileP(join(out, 'oscar-linux-amd64'), ['version', '-o', 'json']);
    expect(JSON.parse(info.stdout)).toMatchObject({ platform: 'linux/x64' });
  });

  it('the arm64 executables run under qemu-user-static: version, and a plan that writes nothing', async () => {
    if (!requireTool('qemu-aarch64-static')) return;
    const sysroot = '/usr/aarch64-linux-gnu'; // libc6-arm64-cross, libstdc++6-arm64-cross
    const qemu = (name: string, args: string[]) =>
      execFileP('qemu-aarch64-static', ['-L', sysroot, join(out, name), ...args], {
        cwd: out,
        env: { PATH: '/usr/bin:/bin' },
        timeout: 120_000,
      }).catch((e: unknown) => e as { code: number; stdout: string; stderr: string });
    const info = await qemu(artifactName('oscar', 'linux-arm64'), ['version', '-o', 'json']);
    expect(JSON.parse(info.stdout)).toMatchObject({ platform: 'linux/arm64', node: 'v24.22.3' });
    const agent = await qemu(artifactName('agent', 'linux-arm64'), ['version']);
    expect(agent.stdout).toMatch(/^oscar \d+\.\d+\.\d+ \(api oscar\.dev\/v1alpha1, node v24\./);
    const root = join(out, 'arm64-root');
    await mkdir(root);
    const osc = join(out, 'osc.yaml');
    await writeFile(
      osc,
      'apiVersion: oscar.dev/v1alpha1\nkind: OperatingSystemConfig\nmetadata: {name: a}\nspec:\n  type: generic\n  purpose: reconcile\n  files: [{path: /etc/a, content: {inline: {data: a}}}]\n',
    );
    for (const program of ['oscar', 'agent'] as const) {
      const plan = await qemu(artifactName(program, 'linux-arm64'), [
        'plan',
        osc,
        '--root',
        root,
        '--detailed-exitcode',
      ]);
      expect(plan).toMatchObject({ code: 2 });
      expect(plan.stdout).toContain('write /etc/a (0644 root:root, 1 B) — new');
    }
    expect(await readdir(root)).toEqual([]);
  }, 300_000);

  it('reuses the executable for the same input, and builds the same bytes again', async () => {
    const again = await buildAgent({ outDir: out, log: () => undefined });
    expect(again).toMatchObject({ built: false, sha256: first.sha256 });
    const forced = await buildAgent({ outDir: out, force: true, log: () => undefined });
    expect(forced).toMatchObject({ built: true, sha256: first.sha256 });
    const arm = all.find((b) => b.path.endsWith('oscar-linux-arm64'));
    const armAgain = await buildExecutable('oscar', 'linux-arm64', { outDir: out, force: true });
    expect(armAgain).toMatchObject({ built: true, sha256: arm?.sha256 });
  }, 300_000);
});
