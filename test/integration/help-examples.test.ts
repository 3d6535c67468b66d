// The names in the `--help` examples exist when the examples are run: an OSC named as the
// examples name it is rendered by the real controller on the real API server, and every Secret,
// OSC and rollout target the examples of `agent`, `plan` and `rollout` name is then there. The
// `kubectl get secret … | oscar plan -f -` example is run for real. (The examples once named
// `oscar-worker-reconcile` for the OSC the docs called `worker-reconcile`.)
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { secretNameFor } from '../../api/secret.js';
import { runPlan } from '../../cli/commands/plan.js';
import { Api, demoSpec, startController, waitFor } from './controller-support.js';
import { createTestNamespace, kubectl, skipWithoutCluster } from './support/cluster.js';
import { repoRoot } from '../support/tools.js';

skipWithoutCluster();

const stops: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const stop of stops) await stop();
});

/** The example lines of `oscar COMMAND --help`, as a reader copies them. */
function examplesOf(...command: string[]): string[] {
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'cli/oscar.ts', ...command, '--help'], {
    cwd: repoRoot,
    encoding: 'utf8',
  });
  expect(r.status).toBe(0);
  const after = r.stdout.split('\nExamples:\n')[1] ?? '';
  return after
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
}

/** The names an example line gives to --osc, --secret, `secret NAME` and `rollout VERB NAME`. */
function namesIn(line: string): { oscs: string[]; secrets: string[] } {
  const all = (re: RegExp): string[] => [...line.matchAll(re)].map((m) => m[1] ?? '');
  return {
    oscs: [...all(/--osc (\S+)/g), ...all(/oscar rollout \w+ ([a-z0-9.-]+)/g)],
    secrets: [...all(/--secret (\S+)/g), ...all(/get secret (\S+)/g)],
  };
}

describe('--help examples (real API server, real controller)', () => {
  it('name an OSC and Secrets that exist once that OSC is applied; the plan example runs', async () => {
    const lines = [
      ...examplesOf('agent'),
      ...examplesOf('plan'),
      ...['status', 'pause', 'resume', 'undo'].flatMap((v) => examplesOf('rollout', v)),
    ];
    const oscs = new Set(lines.flatMap((l) => namesIn(l).oscs));
    const secrets = new Set(lines.flatMap((l) => namesIn(l).secrets));
    // one OSC across all the examples — the one the README and getting-started apply — and its
    // reconcile Secret, by the controller's own naming
    expect([...oscs]).toEqual(['worker-reconcile']);
    expect([...secrets]).toEqual([secretNameFor('worker-reconcile', 'reconcile')]);

    const ns = await createTestNamespace('help');
    const api = new Api();
    await api.applyOsc(ns, 'worker-reconcile', demoSpec('reconcile'));
    const controller = await startController([ns]);
    stops.push(controller.stop);
    for (const secret of secrets) {
      await waitFor(`Secret ${secret}`, async () => api.getSecret(ns, secret));
    }
    expect(await api.getOsc(ns, 'worker-reconcile')).toBeDefined();

    const planLine = lines.find(
      (l) => l.startsWith('kubectl get secret') && l.includes('oscar plan'),
    );
    expect(planLine).toBeDefined();
    const jsonpath = /-o jsonpath="([^"]+)"/.exec(planLine ?? '')?.[1] ?? '';
    const got = await kubectl([
      'get',
      'secret',
      [...secrets][0] ?? '',
      '-n',
      ns,
      '-o',
      `jsonpath=${jsonpath.replace(/\\\\/g, '\\')}`,
    ]);
    expect(got.code).toBe(0);
    const root = await mkdtemp(join(tmpdir(), 'oscar-help-plan-'));
    try {
      let out = '';
      const code = await runPlan(
        { file: '-', root, detailedExitcode: true },
        {
          stdout: (t) => (out += t),
          stderr: () => undefined,
          stdin: Readable.from([Buffer.from(got.stdout, 'base64')]),
        },
      );
      expect(code).toBe(2);
      expect(out).toContain('write /etc/demo/app.conf');
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
