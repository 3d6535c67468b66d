/**
 * The agent's single executable, built for real into a fresh directory (the cold path a fresh
 * machine takes), then again (the warm path: the same input reuses it): it runs without Node.js
 * or node_modules around it, its .sha256 is its digest, and what it left out says so.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARTIFACT_NAME, buildAgent, type BuiltAgent } from './build.js';

const execFileP = promisify(execFile);
let out: string;
let first: BuiltAgent;

beforeAll(async () => {
  out = await mkdtemp(join(tmpdir(), 'oscar-agent-artifact-'));
  first = await buildAgent({ outDir: out, log: () => undefined });
}, 120_000);
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
        /needs an exec plugin.*not part of the agent's single executable.*client certificate or a token/,
      );
    } finally {
      await rm(empty, { recursive: true, force: true });
    }
  });

  it('reuses the executable for the same input, and builds the same bytes again', async () => {
    const again = await buildAgent({ outDir: out, log: () => undefined });
    expect(again).toMatchObject({ built: false, sha256: first.sha256 });
    const forced = await buildAgent({ outDir: out, force: true, log: () => undefined });
    expect(forced).toMatchObject({ built: true, sha256: first.sha256 });
  }, 120_000);
});
