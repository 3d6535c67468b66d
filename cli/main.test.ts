import { spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reportError } from './main.js';
import { userAgent, VERSION } from './support/version.js';

const repoRoot = join(import.meta.dirname, '..');
let home: string;
beforeAll(async () => {
  home = await mkdtemp(join(tmpdir(), 'oscar-home-'));
});
afterAll(async () => {
  await rm(home, { recursive: true, force: true });
});

/** `oscar ARGS` as its own process, with no kubeconfig anywhere. */
function oscar(...args: string[]): { code: number | null; stderr: string; stdout: string } {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: home };
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'cli/oscar.ts', ...args], {
    cwd: repoRoot,
    env,
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { code: r.status, stderr: r.stderr, stdout: r.stdout };
}

describe('user agents', () => {
  it('name the component, its version and the runtime, as kubectl does', () => {
    expect(userAgent('agent')).toBe(
      `oscar-agent/${VERSION} (${process.platform}/${process.arch}) node/${process.version}`,
    );
    expect(userAgent('controller')).toMatch(/^oscar-controller\/\d+\.\d+\.\d+ \(/);
  });
});

describe('errors', () => {
  it('are one line naming the command; the stack only with --debug', () => {
    const error = new Error('no kubeconfig: pass --kubeconfig');
    const argv = ['node', 'oscar', 'controller', '--leader-elect'];
    expect(reportError(error, argv, false)).toBe(
      'oscar controller: no kubeconfig: pass --kubeconfig',
    );
    const debug = reportError(error, argv, true);
    expect(debug.split('\n')[0]).toBe('oscar controller: no kubeconfig: pass --kubeconfig');
    expect(debug).toMatch(/\n\s+at /);
  });

  it('`oscar controller` without a kubeconfig says so in one line and exits 1', () => {
    const r = oscar('controller', '--metrics-addr', '0');
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toBe(
      'oscar controller: no kubeconfig: pass --kubeconfig, set $KUBECONFIG, or run in a pod with a service account',
    );
    const debug = oscar('--debug', 'controller', '--metrics-addr', '0');
    expect(debug.code).toBe(1);
    expect(debug.stderr).toMatch(/KubeconfigError: no kubeconfig[\s\S]*\n\s+at /);
  });

  it('`oscar agent` without a kubeconfig too', () => {
    const root = join(home, 'root');
    const r = oscar('agent', '--namespace', 'n', '--secret', 's', '--node', 'x', '--root', root);
    expect(r.code).toBe(1);
    expect(r.stderr).not.toMatch(/\n\s+at /);
    expect(r.stderr).toContain('oscar agent: no kubeconfig: pass --kubeconfig');
  });
});
