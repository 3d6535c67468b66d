// `oscar capi preview` against the real API server: two reconcile OSCs rendered by the real
// controller, read back from their Secrets as the Runtime Extension reads them, and decided by the
// extension's own function; and per Machine of a MachineDeployment, with Cluster API's real CRDs.
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { secretNameFor } from '../../api/secret.js';
import {
  EXIT_IN_PLACE,
  EXIT_REPLACE,
  runCapiPreview,
  runMachineDeploymentPreview,
} from '../../cli/commands/capi.js';
import type { MachineDeploymentPreview } from '../../cli/commands/capi-machines.js';
import { CONTENT_APPLY_PATCH, CONTENT_MERGE_PATCH } from '../../kube/client.js';
import { adminClient, Api, demoSpec, startController, waitFor } from './controller-support.js';
import {
  clusterUnavailable,
  createTestNamespace,
  kubectl,
  skipWithoutCluster,
  testEnvInfo,
} from './support/cluster.js';
import { buildCapi } from './support/capi.js';
import { docSample, normalize } from '../support/docs-samples.js';

skipWithoutCluster();

const stops: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const stop of stops) await stop();
});

describe('oscar capi preview (real API server, real controller)', () => {
  it('says in place for a change on the same OS, replace for another OS, missing for an unrendered OSC', async () => {
    const ns = await createTestNamespace('preview');
    const api = new Api();
    await api.applyOsc(ns, 'v1', demoSpec('reconcile', 'one\n'));
    await api.applyOsc(ns, 'v2', demoSpec('reconcile', 'two\n'));
    await api.applyOsc(ns, 'fc', { ...demoSpec('reconcile'), type: 'flatcar' });
    const controller = await startController([ns]);
    stops.push(controller.stop);
    for (const osc of ['v1', 'v2', 'fc']) {
      await waitFor(`${osc} rendered`, () => api.getSecret(ns, secretNameFor(osc, 'reconcile')));
    }
    const flags = {
      namespace: ns,
      kubeconfig: testEnvInfo().kubeconfigPath,
      detailedExitcode: true,
      output: 'json',
    };
    const run = async (from: string, to: string) => {
      let out = '';
      const code = await runCapiPreview(from, to, flags, { stdout: (t) => (out += t) });
      return { code, result: JSON.parse(out) as { decision: string; reason: string } };
    };
    expect(await run('v1', 'v2')).toMatchObject({
      code: EXIT_IN_PLACE,
      result: { decision: 'in-place' },
    });
    const os = await run('v1', 'fc');
    expect(os).toMatchObject({ code: EXIT_REPLACE, result: { decision: 'replace' } });
    expect(os.result.reason).toContain('spec.type changed from "ubuntu" to "flatcar"');
    const missing = await run('v1', 'nope');
    expect(missing).toMatchObject({ code: EXIT_REPLACE, result: { decision: 'replace' } });
    expect(missing.result.reason).toContain(
      `has no reconcile Secret ${secretNameFor('nope', 'reconcile')}`,
    );
  });
});

// An infrastructure kind of this file's own (not the one capi-inplace.test.ts applies), so that
// MachineDeployments can name an infrastructure template.
const INFRA = 'infrastructure.preview.test.oscar.dev';
// MachineSets and Machines named as Cluster API names them (and as the docs' sample shows them)
const [A, B] = ['workers-7b9c4', 'workers-c5d8f'];
const [M1, M2, M3] = [`${A}-2xkqp`, `${A}-9fz6d`, `${B}-tq4mn`];

async function applyCapiCrds(capiDir: string): Promise<void> {
  const crds = (await readdir(join(capiDir, 'crds'))).filter((f) => f.endsWith('.yaml'));
  const infra = {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `previewmachinetemplates.${INFRA}` },
    spec: {
      group: INFRA,
      names: {
        kind: 'PreviewMachineTemplate',
        listKind: 'PreviewMachineTemplateList',
        plural: 'previewmachinetemplates',
        singular: 'previewmachinetemplate',
      },
      scope: 'Namespaced',
      versions: [
        {
          name: 'v1alpha1',
          served: true,
          storage: true,
          schema: {
            openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
          },
        },
      ],
    },
  };
  for (const args of [
    [
      'apply',
      '--server-side',
      '--force-conflicts',
      ...crds.flatMap((f) => ['-f', join(capiDir, 'crds', f)]),
    ],
    ['apply', '--server-side', '--force-conflicts', '-f', '-'],
    [
      'wait',
      '--for=condition=Established',
      '--timeout=60s',
      'crd',
      'machinedeployments.cluster.x-k8s.io',
      'machinesets.cluster.x-k8s.io',
      'machines.cluster.x-k8s.io',
      `previewmachinetemplates.${INFRA}`,
    ],
  ]) {
    const r = await kubectl(args, { input: JSON.stringify(infra) });
    if (r.code !== 0) throw new Error(`kubectl ${args[0] ?? ''}: ${r.stderr}`);
  }
}

describe('oscar capi preview --machine-deployment (real API server, Cluster API CRDs)', () => {
  it('says per Machine: in place for the old MachineSet, unchanged for the new, replace for another OS or provisionRef', async (ctx) => {
    if (clusterUnavailable !== null) return ctx.skip(clusterUnavailable);
    const built = await buildCapi();
    if ('missing' in built) return ctx.skip(`no Cluster API CRDs: ${built.missing}`);
    await applyCapiCrds(built.dir);
    const ns = await createTestNamespace('mdpreview');
    const api = new Api();
    await api.applyOsc(ns, 'workers-v1', demoSpec('reconcile', 'one\n'));
    await api.applyOsc(ns, 'workers-v2', demoSpec('reconcile', 'two\n'));
    await api.applyOsc(ns, 'fc', { ...demoSpec('reconcile'), type: 'flatcar' });
    const controller = await startController([ns]);
    try {
      for (const osc of ['workers-v1', 'workers-v2', 'fc']) {
        await waitFor(`${osc} rendered`, () => api.getSecret(ns, secretNameFor(osc, 'reconcile')));
      }
    } finally {
      await controller.stop();
    }

    const http = adminClient();
    const apply = async (obj: { apiVersion: string; kind: string; metadata: { name: string } }) => {
      const [group, version] = obj.apiVersion.split('/');
      const plural = `${obj.kind.toLowerCase()}s`;
      return http.request<{ metadata: { uid: string } }>(
        'PATCH',
        `/apis/${group ?? ''}/${version ?? ''}/namespaces/${ns}/${plural}/${obj.metadata.name}`,
        {
          query: { fieldManager: 'test', force: true },
          contentType: CONTENT_APPLY_PATCH,
          body: { ...obj, metadata: { ...obj.metadata, namespace: ns } },
        },
      );
    };
    const capi = 'cluster.x-k8s.io/v1beta2';
    const tplRef = (name: string) => ({
      apiGroup: 'bootstrap.oscar.dev',
      kind: 'OscarConfigTemplate',
      name,
    });
    const infraRef = { apiGroup: INFRA, kind: 'PreviewMachineTemplate', name: 'pmt' };
    const labels = {
      'cluster.x-k8s.io/cluster-name': 'c1',
      'cluster.x-k8s.io/deployment-name': 'workers',
    };
    const machineSpec = (tpl: string) => ({
      clusterName: 'c1',
      version: 'v1.37.2',
      bootstrap: { configRef: tplRef(tpl) },
      infrastructureRef: infraRef,
    });
    for (const [name, reconcile] of [
      ['workers-v1', 'workers-v1'],
      ['workers-v2', 'workers-v2'],
      ['tpl-fc', 'fc'],
    ]) {
      await apply({
        apiVersion: 'bootstrap.oscar.dev/v1alpha1',
        kind: 'OscarConfigTemplate',
        metadata: { name: name ?? '' },
        spec: {
          template: { spec: { provisionRef: { name: 'prov' }, reconcileRef: { name: reconcile } } },
        },
      } as never);
    }
    await apply({
      apiVersion: `${INFRA}/v1alpha1`,
      kind: 'PreviewMachineTemplate',
      metadata: { name: 'pmt' },
      spec: { template: { spec: { size: 'm' } } },
    } as never);
    // A MachineDeployment halfway through a rollout from template workers-v1 to workers-v2, as
    // Cluster API leaves one: MachineSet A (workers-v1) with M1, M2; MachineSet B (workers-v2) with
    // M3 — named as docs/cluster-api.md's sample, which this run produces.
    const md = await apply({
      apiVersion: capi,
      kind: 'MachineDeployment',
      metadata: { name: 'workers' },
      spec: {
        clusterName: 'c1',
        replicas: 3,
        selector: { matchLabels: labels },
        template: { metadata: { labels }, spec: machineSpec('workers-v2') },
      },
    } as never);
    for (const [ms, tpl, machines] of [
      [A, 'workers-v1', [M1, M2]],
      [B, 'workers-v2', [M3]],
    ] as const) {
      const set = await apply({
        apiVersion: capi,
        kind: 'MachineSet',
        metadata: {
          name: ms,
          labels,
          ownerReferences: [
            {
              apiVersion: capi,
              kind: 'MachineDeployment',
              name: 'workers',
              uid: md.metadata.uid,
              controller: true,
            },
          ],
        },
        spec: {
          clusterName: 'c1',
          replicas: machines.length,
          selector: { matchLabels: labels },
          template: { metadata: { labels }, spec: machineSpec(tpl) },
        },
      } as never);
      for (const m of machines) {
        await apply({
          apiVersion: 'bootstrap.oscar.dev/v1alpha1',
          kind: 'OscarConfig',
          metadata: { name: m },
          spec: {
            provisionRef: { name: 'prov' },
            reconcileRef: { name: ms === A ? 'workers-v1' : 'workers-v2' },
          },
        } as never);
        await apply({
          apiVersion: capi,
          kind: 'Machine',
          metadata: {
            name: m,
            labels,
            ownerReferences: [
              {
                apiVersion: capi,
                kind: 'MachineSet',
                name: ms,
                uid: set.metadata.uid,
                controller: true,
              },
            ],
          },
          spec: {
            clusterName: 'c1',
            bootstrap: {
              configRef: { apiGroup: 'bootstrap.oscar.dev', kind: 'OscarConfig', name: m },
            },
            infrastructureRef: { apiGroup: INFRA, kind: 'PreviewMachine', name: m },
          },
        } as never);
        // its Node, as Cluster API records it once the machine joined
        await http.request('PATCH', `/apis/${capi}/namespaces/${ns}/machines/${m}/status`, {
          contentType: CONTENT_MERGE_PATCH,
          body: { status: { nodeRef: { name: m } } },
        });
      }
    }

    const preview = async (template: string, output?: string) => {
      let out = '';
      const code = await runMachineDeploymentPreview(
        template,
        {
          namespace: ns,
          kubeconfig: testEnvInfo().kubeconfigPath,
          detailedExitcode: true,
          machineDeployment: 'workers',
          ...(output === undefined ? {} : { output }),
        },
        { stdout: (t) => (out += t) },
      );
      return { code, out };
    };
    const run = async (template: string) => {
      const { code, out } = await preview(template, 'json');
      return { code, result: JSON.parse(out) as MachineDeploymentPreview };
    };
    const decisions = (r: { result: MachineDeploymentPreview }) =>
      r.result.machines.map((m) => `${m.machine}:${m.decision}`);

    const v2 = await run('workers-v2');
    expect(v2.code).toBe(EXIT_IN_PLACE);
    expect(decisions(v2)).toEqual([`${M1}:in-place`, `${M2}:in-place`, `${M3}:unchanged`]);
    expect(v2.result.machines[0]).toMatchObject({
      machineSet: A,
      reconcileRef: 'workers-v1',
      node: M1,
      reason: 'reconcileRef workers-v1 → workers-v2 in place',
    });

    // the human form is docs/cluster-api.md's sample, from this run
    const human = await preview('workers-v2');
    const sample = docSample('cluster-api-preview-machines');
    expect(normalize(sample.text), `${sample.file}:${String(sample.line)}`).toBe(
      normalize(
        `$ oscar capi preview --machine-deployment workers workers-v2 -n machines --detailed-exitcode; echo "exit $?"\n${human.out}exit ${String(human.code)}\n`,
        [[ns, 'machines']],
      ),
    );

    const fc = await run('tpl-fc');
    expect(fc.code).toBe(EXIT_REPLACE);
    expect(decisions(fc)).toEqual([`${M1}:replace`, `${M2}:replace`, `${M3}:replace`]);
    expect(fc.result.machines[2]?.reason).toContain('spec.type changed from "ubuntu" to "flatcar"');

    // A template file, not in the cluster: the reconcileRef is covered, provisionRef is not.
    const dir = await mkdtemp(join(tmpdir(), 'oscar-mdpreview-'));
    try {
      const file = join(dir, 'tpl-prov2.yaml');
      await writeFile(
        file,
        'apiVersion: bootstrap.oscar.dev/v1alpha1\nkind: OscarConfigTemplate\nmetadata: {name: tpl-prov2}\nspec:\n  template:\n    spec: {provisionRef: {name: prov2}, reconcileRef: {name: workers-v2}}\n',
      );
      const prov = await run(file);
      expect(prov.code).toBe(EXIT_REPLACE);
      expect(decisions(prov)).toEqual([`${M1}:replace`, `${M2}:replace`, `${M3}:replace`]);
      expect(prov.result.machines[0]?.reason).toContain(
        'not covered: spec.template.spec.provisionRef',
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }

    await expect(run('nope')).rejects.toThrow(`OscarConfigTemplate ${ns}/nope not found`);
  });
});
