// The docs' sample outputs that need a cluster, produced by real runs against the test API server:
// the real controller renders the OSC getting-started applies (examples/, verbatim), the real
// kubectl prints it, a real `oscar agent` process reports as node-1, and `oscar capi preview`
// answers for two rendered OSCs. Compared with the docs after normalizing checksums, ages and the
// test's namespace (test/support/docs-samples.ts); the offline samples are in
// test/unit/docs-samples-real.test.ts.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import type { OperatingSystemConfigSpec } from '../../api/schema.js';
import { runCapiPreview } from '../../cli/commands/capi.js';
import { docSample, normalize } from '../support/docs-samples.js';
import { repoRoot } from '../support/tools.js';
import {
  Api,
  demoSpec,
  spawnOscar,
  startController,
  stopProcess,
  waitFor,
} from './controller-support.js';
import {
  createTestNamespace,
  kubectl,
  skipWithoutCluster,
  testEnvInfo,
} from './support/cluster.js';

skipWithoutCluster();

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

function expectSample(id: string, real: string, subs: [string, string][] = []): void {
  const sample = docSample(id);
  expect(normalize(sample.text), `${sample.file}:${String(sample.line)} (${id})`).toBe(
    normalize(real, subs),
  );
}

async function get(args: string[]): Promise<string> {
  const r = await kubectl(['get', ...args]);
  expect(r.code, r.stderr).toBe(0);
  return r.stdout;
}

describe('the docs’ sample outputs (real API server, controller, kubectl, agent)', () => {
  it('getting-started: kubectl get osc and oscnode; controller.md: a missing reference; cluster-api.md: capi preview', async () => {
    const ns = await createTestNamespace('samples');
    const api = new Api();
    const example = parse(
      await readFile(join(repoRoot, 'examples', 'ubuntu-kubeadm-reconcile.yaml'), 'utf8'),
    ) as { metadata: { name: string }; spec: OperatingSystemConfigSpec };
    expect(example.metadata.name).toBe('worker-reconcile');
    await api.applyOsc(ns, 'worker-reconcile', example.spec);
    await api.applyOsc(ns, 'joiner', {
      type: 'ubuntu',
      purpose: 'reconcile',
      files: [{ path: '/etc/join', content: { secretRef: { name: 'join', key: 'token' } } }],
    });
    await api.applyOsc(ns, 'workers-v1', demoSpec('reconcile', 'one\n'));
    await api.applyOsc(ns, 'workers-v2', demoSpec('reconcile', 'two\n'));
    const controller = await startController([ns]);
    cleanups.push(controller.stop);
    const osc = await api.waitReady(ns, 'worker-reconcile');
    await api.waitReady(ns, 'workers-v1');
    await api.waitReady(ns, 'workers-v2');

    expectSample('getting-started-get-osc', await get(['osc', 'worker-reconcile', '-n', ns]));

    const valid = await waitFor('joiner Valid=False', async () =>
      (await api.getOsc(ns, 'joiner'))?.status?.conditions?.find(
        (c) => c.type === 'Valid' && c.status === 'False',
      ),
    );
    expectSample('controller-reference-not-found', `Valid=False ${valid.reason}: ${valid.message}`);

    // node-1's agent, as getting-started runs it (a directory root here, not a machine's /)
    const root = await mkdtemp(join(tmpdir(), 'oscar-samples-node-'));
    const agent = spawnOscar('agent', [
      '--kubeconfig',
      testEnvInfo().kubeconfigPath,
      '--namespace',
      ns,
      '--secret',
      'oscar-worker-reconcile-reconcile',
      '--node',
      'node-1',
      '--root',
      root,
    ]);
    cleanups.push(async () => {
      await stopProcess(agent);
      await rm(root, { recursive: true, force: true });
      await kubectl(['delete', 'oscnode', 'node-1', '--ignore-not-found']);
    });
    await waitFor(
      'node-1 applied worker-reconcile',
      async () => {
        const out = await get(['oscnode', 'node-1', '-o', 'jsonpath={.status.appliedChecksum}']);
        return out.trim() === osc.status?.checksum ? true : undefined;
      },
      { timeoutMs: 60_000 },
    ).catch((error: unknown) => {
      throw new Error(`${String(error)}\n${agent.output()}`);
    });
    expectSample('getting-started-get-oscnode', await get(['oscnode', 'node-1']));

    let out = '';
    const code = await runCapiPreview(
      'workers-v1',
      'workers-v2',
      { namespace: ns, kubeconfig: testEnvInfo().kubeconfigPath, detailedExitcode: true },
      { stdout: (t) => (out += t) },
    );
    expectSample(
      'cluster-api-preview',
      `$ oscar capi preview workers-v1 workers-v2 -n machines --detailed-exitcode; echo "exit $?"\n${out}exit ${String(code)}\n`,
      [[ns, 'machines']],
    );
  });
});
