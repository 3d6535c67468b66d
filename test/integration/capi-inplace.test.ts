// Cluster API in-place updates through oscar, against the real API server and Cluster API's real
// core manager (RuntimeSDK, InPlaceUpdates): the oscar controller, oscar's Runtime Extension over
// HTTPS (registered by an ExtensionConfig with its caBundle, running as its deploy/extension RBAC
// identity) and one real grant-mode agent per Machine (`oscar agent --osc` as its own process, a
// directory root, its own least-privilege identity, named as its Machine). There is no kubelet, so a small infrastructure
// loop plays the provider: it gives each TestMachine a providerID and marks it provisioned, and
// registers a Ready Node of the Machine's name, which Cluster API's Machine controller finds (the
// Cluster's kubeconfig Secret points its cluster cache at this same API server) and sets as
// status.nodeRef.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger } from '../../log/logger.js';
import type { OperatingSystemConfigSpec } from '../../api/schema.js';
import {
  runExtension,
  type ExtensionConfig,
  type ExtensionHandle,
} from '../../controller/extension/main.js';
import { CONTENT_MERGE_PATCH } from '../../kube/client.js';
import type { KubeObject } from '../../controller/kube/types.js';
import type { OscNodeObject } from '../../controller/osc/node-index.js';
import {
  agentIdentity,
  Api,
  grantAgent,
  spawnOscar,
  startController,
  waitFor,
} from './controller-support.js';
import {
  clusterUnavailable,
  kubeconfigPathFor,
  kubectl,
  testEnvInfo,
  uniqueName,
} from './support/cluster.js';
import { INFRA_GROUP, startCapiManager, type CapiManager } from '../support/capi.js';
import { kubeOps } from '../support/cluster.js';
import { extensionKubeconfig } from './support/extension.js';
import { loopbackServingCert } from '../support/serving-cert.js';

const CAPI = 'cluster.x-k8s.io/v1beta2';
const AGENT_SHA = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
const NODES = '/apis/oscar.dev/v1alpha1/operatingsystemconfignodes';
const IN_PROGRESS = 'in-place-updates.internal.cluster.x-k8s.io/update-in-progress';

let capi: CapiManager | undefined;
let skipReason: string | undefined;
let ns = '';
let ext: ExtensionHandle | undefined;
let extensionConfig: ExtensionConfig | undefined;

/** Stops the extension and starts a new one on the same address: nothing kept in between. */
async function restartExtension(): Promise<void> {
  if (!ext || !extensionConfig) throw new Error('no extension');
  const port = ext.server.port;
  await ext.stop();
  ext = await runExtension({ ...extensionConfig, port });
}
const api = clusterUnavailable === null ? new Api() : undefined;
const cleanups: (() => Promise<unknown>)[] = [];
let infraLoop: Promise<void> | undefined;
let stopping = false;
/** A function, not the flag: it flips while the loop awaits. */
const stopped = (): boolean => stopping;

interface Agent {
  root: string;
  stop: () => Promise<void>;
}
const agents = new Map<string, Agent>();
const agentOutputs = new Map<string, () => string>();

function http() {
  if (!api) throw new Error('no cluster');
  return api.http;
}

const ops = kubeOps(http, 'test');
const apply = (obj: Record<string, unknown>): Promise<KubeObject> => ops.applyObject(obj);
const get = <T extends KubeObject>(path: string): Promise<T | undefined> => ops.get<T>(path);

/** A reconcile OSC: one config file and the unit that uses it; `version` changes both. */
function reconcileSpec(
  version: string,
  over: Partial<OperatingSystemConfigSpec> = {},
): OperatingSystemConfigSpec {
  return {
    type: 'debian',
    purpose: 'reconcile',
    files: [{ path: '/etc/app/app.conf', content: { inline: { data: `version ${version}\n` } } }],
    units: [
      {
        name: 'app.service',
        filePaths: ['/etc/app/app.conf'],
        content: `[Unit]\nDescription=app ${version}\n\n[Service]\nExecStart=/bin/sleep infinity\n\n[Install]\nWantedBy=multi-user.target\n`,
      },
    ],
    rollout: { soakSeconds: 1, progressDeadlineSeconds: 30 },
    ...over,
  };
}

const provisionSpec: OperatingSystemConfigSpec = {
  type: 'debian',
  purpose: 'provision',
  files: [
    {
      path: '/etc/oscar/node.env',
      permissions: '0600',
      content: { inline: { data: 'MACHINE={{ machine.name }}\n' } },
    },
  ],
};

function template(name: string, reconcile: string) {
  return {
    apiVersion: 'bootstrap.oscar.dev/v1alpha1',
    kind: 'OscarConfigTemplate',
    metadata: { name, namespace: ns },
    spec: {
      template: { spec: { provisionRef: { name: 'prov' }, reconcileRef: { name: reconcile } } },
    },
  };
}

function machineDeployment(name: string, cluster: string, tpl: string, replicas: number) {
  const labels = {
    'cluster.x-k8s.io/cluster-name': cluster,
    'cluster.x-k8s.io/deployment-name': name,
  };
  return {
    apiVersion: CAPI,
    kind: 'MachineDeployment',
    metadata: { name, namespace: ns },
    spec: {
      clusterName: cluster,
      replicas,
      // What Cluster API's defaulting webhook would set (it is not registered here). No surge:
      // a machine leaves the old MachineSet only by being updated in place or replaced.
      rollout: {
        strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: 1 } },
      },
      deletion: { order: 'Oldest' },
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          clusterName: cluster,
          bootstrap: {
            configRef: { apiGroup: 'bootstrap.oscar.dev', kind: 'OscarConfigTemplate', name: tpl },
          },
          infrastructureRef: { apiGroup: INFRA_GROUP, kind: 'TestMachineTemplate', name: 'tmt' },
        },
      },
    },
  };
}

type Machine = KubeObject & {
  spec: { bootstrap: { configRef?: { name: string } } };
  status?: {
    nodeRef?: { name: string };
    conditions?: { type: string; status: string; reason?: string; message?: string }[];
  };
};

async function machinesOf(md: string): Promise<Machine[]> {
  const list = await http().request<{ items: Machine[] }>(
    'GET',
    `/apis/cluster.x-k8s.io/v1beta2/namespaces/${ns}/machines`,
    { query: { labelSelector: `cluster.x-k8s.io/deployment-name=${md}` } },
  );
  return list.items;
}

type MD = KubeObject & {
  spec: { replicas: number };
  status?: { replicas?: number; upToDateReplicas?: number; availableReplicas?: number };
};

async function mdStatus(name: string): Promise<MD['status']> {
  return (
    await get<MD>(`/apis/cluster.x-k8s.io/v1beta2/namespaces/${ns}/machinedeployments/${name}`)
  )?.status;
}

/** Get (or list) a node's revision Secrets and reconcile Secret of these OSCs, besides its own. */
async function allowOscs(node: string, oscs: string[]): Promise<void> {
  const role = {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: { name: `oscar-agent-${node}-moves`, namespace: ns },
    rules: [
      {
        apiGroups: [''],
        resources: ['secrets'],
        resourceNames: oscs.flatMap((o) => [
          ...[0, 1, 2, 3, 4].map((k) => `oscar-${o}-rev-${String(k)}`),
          `oscar-${o}-reconcile`,
        ]),
        verbs: ['get'],
      },
    ],
  };
  const binding = {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: `oscar-agent-${node}-moves`, namespace: ns },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: role.metadata.name },
    subjects: [{ kind: 'ServiceAccount', name: `oscar-agent-${node}`, namespace: ns }],
  };
  await apply(role);
  await apply(binding);
}

/**
 * The agent of a Machine, as its own process (`oscar agent --osc`, what a node runs): grant mode
 * for the pool's first OSC, its own least-privilege identity, a directory root.
 */
async function startAgent(node: string): Promise<void> {
  if (agents.has(node) || !api) return;
  agents.set(node, { root: '', stop: () => Promise.resolve() });
  const revoke = await grantAgent(api, ns, node, 'v1');
  await allowOscs(node, ['v2', 'v3']);
  const root = await mkdtemp(join(tmpdir(), 'oscar-inplace-'));
  const agent = spawnOscar('agent', [
    '--kubeconfig',
    await kubeconfigPathFor(agentIdentity(ns, node)),
    '--namespace',
    ns,
    '--osc',
    'v1',
    '--node',
    node,
    '--root',
    root,
  ]);
  agentOutputs.set(node, agent.output);
  agents.set(node, {
    root,
    stop: async () => {
      agent.child.kill('SIGTERM');
      await agent.exited;
      await revoke();
      await rm(root, { recursive: true, force: true });
    },
  });
}

/**
 * The test's infrastructure provider and kubelet: every TestMachine gets a providerID and is
 * provisioned; every Machine of MachineDeployment "a" gets a Ready Node of its name and an agent.
 */
async function infrastructure(agentsFor: string): Promise<void> {
  while (!stopped()) {
    try {
      const list = await http().request<{ items: KubeObject[] }>(
        'GET',
        `/apis/${INFRA_GROUP}/v1alpha1/namespaces/${ns}/testmachines`,
      );
      for (const tm of list.items) {
        const name = tm.metadata.name;
        const base = `/apis/${INFRA_GROUP}/v1alpha1/namespaces/${ns}/testmachines/${name}`;
        const t = tm as KubeObject & {
          spec?: { providerID?: string };
          status?: { initialization?: { provisioned?: boolean } };
        };
        const providerID = `test:///${name}`;
        if (t.spec?.providerID !== providerID) {
          await http().request('PATCH', base, {
            contentType: CONTENT_MERGE_PATCH,
            body: { spec: { providerID } },
          });
        }
        if (t.status?.initialization?.provisioned !== true) {
          await http().request('PATCH', `${base}/status`, {
            contentType: CONTENT_MERGE_PATCH,
            body: { status: { initialization: { provisioned: true } } },
          });
        }
        const machine = tm.metadata.ownerReferences?.find((r) => r.kind === 'Machine')?.name;
        if (!machine) continue;
        if (!(await get(`/api/v1/nodes/${machine}`))) {
          await http().request('POST', '/api/v1/nodes', {
            body: {
              apiVersion: 'v1',
              kind: 'Node',
              metadata: { name: machine },
              spec: { providerID },
            },
          });
          const now = new Date().toISOString();
          await http().request('PATCH', `/api/v1/nodes/${machine}/status`, {
            contentType: CONTENT_MERGE_PATCH,
            body: {
              status: {
                // what Cluster API's NodeHealthy reads (no kubelet here to report them)
                conditions: [
                  ['Ready', 'True'],
                  ['MemoryPressure', 'False'],
                  ['DiskPressure', 'False'],
                  ['PIDPressure', 'False'],
                ].map(([type, status]) => ({
                  type,
                  status,
                  reason: 'TestInfrastructure',
                  message: 'set by the test infrastructure loop',
                  lastHeartbeatTime: now,
                  lastTransitionTime: now,
                })),
              },
            },
          });
          cleanups.push(() => kubectl(['delete', 'node', machine, '--ignore-not-found']));
        }
        if (machine.startsWith(agentsFor)) await startAgent(machine);
      }
    } catch (error) {
      if (!stopped()) console.error('infrastructure loop:', (error as Error).message);
    }
    await new Promise((r) => setTimeout(r, 500));
  }
}

async function withCapiLogs<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    const lines = (capi?.logs() ?? '')
      .split('\n')
      .filter((l) => /error|Error|in-place|InPlace|UpdateMachine|CanUpdate/.test(l))
      .slice(-30)
      .join('\n');
    const nodes = [...agentOutputs]
      .map(([node, out]) => `agent ${node}:\n${out().split('\n').slice(-8).join('\n')}`)
      .join('\n');
    throw new Error(`${(error as Error).message}\nCluster API manager:\n${lines}\n${nodes}`, {
      cause: error,
    });
  }
}

async function nodeObj(name: string): Promise<OscNodeObject | undefined> {
  return get<OscNodeObject>(`${NODES}/${name}`);
}

/** The reconcile checksum of an OSC as its Secret carries it. */
async function checksumOf(osc: string): Promise<string> {
  const o = await waitFor(`${osc} rendered`, async () => {
    const got = await api?.getOsc(ns, osc);
    return got?.status?.checksum ? got : undefined;
  });
  return o.status?.checksum ?? '';
}

/** The OSCs the MachineDeployments use: the provision one, v1 → v2 (in place) → v3, flatcar. */
async function applyOscs(): Promise<void> {
  await api?.applyOsc(ns, 'prov', provisionSpec);
  await api?.applyOsc(ns, 'v1', reconcileSpec('1'));
  // v2: the unit and its file changed — what the agent applies in place
  await api?.applyOsc(ns, 'v2', reconcileSpec('2'));
  // v3: also a new file, which the test makes impossible to write on the nodes
  await api?.applyOsc(
    ns,
    'v3',
    reconcileSpec('3', {
      files: [
        { path: '/etc/app/app.conf', content: { inline: { data: 'version 3\n' } } },
        { path: '/etc/app/extra.conf', content: { inline: { data: 'extra\n' } } },
      ],
    }),
  );
  // flatcar: another OS — never in place
  await api?.applyOsc(ns, 'flatcar', { ...reconcileSpec('1'), type: 'flatcar' });
}

/**
 * The extension: its deploy/ RBAC identity, a serving certificate for 127.0.0.1, its
 * ExtensionConfig; returns once Cluster API has discovered its three handlers.
 */
async function registerExtension(): Promise<void> {
  const kubeconfig = await extensionKubeconfig();
  const dir = await mkdtemp(join(tmpdir(), 'oscar-ext-it-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  const serving = await loopbackServingCert(dir);
  extensionConfig = {
    kubeconfig,
    cert: serving.cert,
    key: serving.key,
    host: '127.0.0.1',
    port: 0,
    log: createLogger({ component: 'extension', level: 'warn' }),
  };
  const started = await runExtension(extensionConfig);
  ext = started;
  cleanups.push(() => ext?.stop() ?? Promise.resolve());
  const extName = uniqueName('oscar');
  await apply({
    apiVersion: 'runtime.cluster.x-k8s.io/v1beta2',
    kind: 'ExtensionConfig',
    metadata: { name: extName },
    spec: {
      clientConfig: {
        url: `https://127.0.0.1:${String(started.server.port)}`,
        caBundle: serving.ca.toString('base64'),
      },
      namespaceSelector: {},
    },
  });
  cleanups.push(() => kubectl(['delete', 'extensionconfig', extName, '--ignore-not-found']));
  await withCapiLogs(() =>
    waitFor(
      'the ExtensionConfig discovered three handlers',
      async () => {
        const got = await get<KubeObject & { status?: { handlers?: unknown[] } }>(
          `/apis/runtime.cluster.x-k8s.io/v1beta2/extensionconfigs/${extName}`,
        );
        return (got?.status?.handlers?.length ?? 0) === 3 ? got : undefined;
      },
      60_000,
    ),
  );
}

/**
 * The workload cluster is this API server (Cluster API finds the Nodes here), with a
 * control-plane Machine and its node, and the TestMachineTemplate the workers use.
 */
async function workloadCluster(kubeconfigPath: string): Promise<void> {
  await apply({
    apiVersion: CAPI,
    kind: 'Cluster',
    metadata: { name: 'c1', namespace: ns },
    spec: { paused: false },
  });
  await apply({
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'cluster.x-k8s.io/secret',
    metadata: {
      name: 'c1-kubeconfig',
      namespace: ns,
      labels: { 'cluster.x-k8s.io/cluster-name': 'c1' },
    },
    data: { value: (await readFile(kubeconfigPath)).toString('base64') },
  });
  // A control-plane Machine with a node: Cluster API waits for one (the Cluster's
  // ControlPlaneInitialized) before it looks at any worker's node.
  await apply({
    apiVersion: `${INFRA_GROUP}/v1alpha1`,
    kind: 'TestMachine',
    metadata: { name: `cp-${ns}`, namespace: ns },
    spec: {},
  });
  await apply({
    apiVersion: CAPI,
    kind: 'Machine',
    metadata: {
      name: `cp-${ns}`, // its Node is cluster-scoped: a name no other suite uses
      namespace: ns,
      labels: { 'cluster.x-k8s.io/cluster-name': 'c1', 'cluster.x-k8s.io/control-plane': '' },
    },
    spec: {
      clusterName: 'c1',
      bootstrap: { dataSecretName: 'cp-user-data' },
      infrastructureRef: { apiGroup: INFRA_GROUP, kind: 'TestMachine', name: `cp-${ns}` },
    },
  });
  await apply({
    apiVersion: `${INFRA_GROUP}/v1alpha1`,
    kind: 'TestMachineTemplate',
    metadata: { name: 'tmt', namespace: ns },
    spec: { template: { spec: {} } },
  });
}

beforeAll(async () => {
  if (clusterUnavailable !== null) return;
  const info = testEnvInfo();
  const manager = await startCapiManager(info);
  if ('skip' in manager) {
    skipReason = manager.skip;
    return;
  }
  capi = manager.manager;
  ns = uniqueName('ip'); // short: an agent's certificate CN carries it and the Machine's name
  await apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  await apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'oscar-system' } });
  await applyOscs();
  const controller = await startController([ns], {
    bootstrap: {
      enabled: true,
      agentUrl: 'http://127.0.0.1:9/oscar-agent',
      agentSha256: AGENT_SHA,
      clusterName: 'demo',
      tokenTtlMs: 20 * 60_000,
    },
  });
  cleanups.push(controller.stop);
  await registerExtension();
  await workloadCluster(info.kubeconfigPath);
  infraLoop = infrastructure('a-');
}, 600_000);

afterAll(async () => {
  stopping = true;
  await infraLoop;
  for (const a of agents.values()) await a.stop().catch(() => undefined);
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
  if (ns) await kubectl(['delete', 'namespace', ns, '--wait=false']);
  await capi?.stop();
}, 120_000);

describe('Cluster API in-place updates through oscar', () => {
  let originals: { name: string; uid: string }[] = [];

  it('a unit change in the template: the same 3 Machines updated in place, each node at the new checksum, the MachineDeployment all up to date', async (ctx) => {
    if (clusterUnavailable !== null || skipReason)
      return ctx.skip(clusterUnavailable ?? skipReason);
    const v1 = await checksumOf('v1');
    const v2 = await checksumOf('v2');
    await apply(template('tpl-v1', 'v1'));
    await apply(machineDeployment('a', 'c1', 'tpl-v1', 3));
    const ready = await withCapiLogs(() =>
      waitFor(
        '3 Machines with nodes whose agents confirmed v1',
        async () => {
          const ms = await machinesOf('a');
          if (ms.length !== 3 || ms.some((m) => !m.status?.nodeRef?.name)) return undefined;
          for (const m of ms) {
            const n = await nodeObj(m.metadata.name);
            if (n?.status?.appliedChecksum !== v1 || n.status.revision?.phase !== 'Confirmed')
              return undefined;
          }
          const s = await mdStatus('a');
          return s?.upToDateReplicas === 3 && s.availableReplicas === 3 ? ms : undefined;
        },
        180_000,
      ),
    );
    originals = ready
      .map((m) => ({ name: m.metadata.name, uid: m.metadata.uid ?? '' }))
      .sort((a, b) => a.name.localeCompare(b.name));
    const before = structuredClone(ext?.extension.counts);

    const t0 = Date.now();
    await apply(template('tpl-v2', 'v2'));
    await apply(machineDeployment('a', 'c1', 'tpl-v2', 3));
    await withCapiLogs(() =>
      waitFor(
        'every Machine updated in place to v2 and the MachineDeployment up to date',
        async () => {
          const ms = await machinesOf('a');
          if (ms.length !== 3) return undefined;
          if (ms.some((m) => m.metadata.annotations?.[IN_PROGRESS] !== undefined)) return undefined;
          for (const m of ms) {
            const n = await nodeObj(m.metadata.name);
            if (n?.status?.appliedChecksum !== v2) return undefined;
          }
          const s = await mdStatus('a');
          return s?.upToDateReplicas === 3 && s.availableReplicas === 3 && s.replicas === 3
            ? true
            : undefined;
        },
        300_000,
      ),
    );
    const seconds = (Date.now() - t0) / 1000;
    const after = ext?.extension.counts;
    const calls = Object.fromEntries(
      Object.entries(after?.calls ?? {}).map(([k, v]) => [
        k,
        v - (before?.calls[k as keyof typeof before.calls] ?? 0),
      ]),
    );
    // the figure docs/cluster-api.md quotes
    console.log(
      `in-place rollout of 3 machines: ${seconds.toFixed(1)} s; hook calls ${JSON.stringify(calls)}; grants ${String((after?.grants ?? 0) - (before?.grants ?? 0))}`,
    );

    const now = (await machinesOf('a'))
      .map((m) => ({ name: m.metadata.name, uid: m.metadata.uid ?? '' }))
      .sort((a, b) => a.name.localeCompare(b.name));
    expect(now).toEqual(originals);
    for (const m of originals) {
      const n = await nodeObj(m.name);
      expect(n?.status?.oscRef?.name).toBe('v2');
      expect(n?.status?.revision?.phase).toBe('Confirmed');
      const root = agents.get(m.name)?.root ?? '';
      expect(await readFile(join(root, 'etc/app/app.conf'), 'utf8')).toBe('version 2\n');
      expect(await readFile(join(root, 'etc/systemd/system/app.service'), 'utf8')).toContain(
        'Description=app 2',
      );
      // the machine's config now names v2; its user data was never regenerated
      const cfg = await get<KubeObject & { spec: { reconcileRef: { name: string } } }>(
        `/apis/bootstrap.oscar.dev/v1alpha1/namespaces/${ns}/oscarconfigs/${m.name}`,
      );
      expect(cfg?.spec.reconcileRef.name).toBe('v2');
    }
    expect(calls.UpdateMachine).toBeGreaterThanOrEqual(6); // a grant and a done per machine
    expect(calls.CanUpdateMachineSet).toBeGreaterThanOrEqual(1);
  }, 600_000);

  it('a change whose apply fails on the node: InPlaceUpdateFailed on that Machine, with the node’s error; the extension restarted meanwhile', async (ctx) => {
    if (clusterUnavailable !== null || skipReason)
      return ctx.skip(clusterUnavailable ?? skipReason);
    if (originals.length !== 3) throw new Error('the in-place rollout above did not run');
    // a directory where v3 writes a file: the agent's atomic rename fails, on every node
    for (const m of originals) {
      await mkdir(join(agents.get(m.name)?.root ?? '', 'etc/app/extra.conf/x'), {
        recursive: true,
      });
    }
    const grantsBefore = ext?.extension.counts.grants ?? 0;
    await apply(template('tpl-v3', 'v3'));
    await apply(machineDeployment('a', 'c1', 'tpl-v3', 3));
    // the extension restarts once it has granted v3 (stateless: the new one must not grant again)
    await withCapiLogs(() =>
      waitFor(
        'the grant of v3',
        () =>
          Promise.resolve((ext?.extension.counts.grants ?? 0) > grantsBefore ? true : undefined),
        120_000,
      ),
    );
    await restartExtension();
    const failed = await withCapiLogs(() =>
      waitFor(
        'a Machine with Updating=True, InPlaceUpdateFailed',
        async () => {
          for (const m of await machinesOf('a')) {
            const c = m.status?.conditions?.find((x) => x.type === 'Updating');
            if (c?.reason === 'InPlaceUpdateFailed') return m;
          }
          return undefined;
        },
        180_000,
      ),
    );
    expect(originals.map((o) => o.uid)).toContain(failed.metadata.uid);
    const n = await nodeObj(failed.metadata.name);
    const report = n?.status?.revision;
    expect(['RolledBack', 'Failed']).toContain(report?.phase);
    // the apply failed; undoing its partial writes meets the same directory
    expect(report?.reason).toMatch(/^(ApplyFailed|RollbackFailed)$/);
    expect(report?.message).toMatch(/extra\.conf/);
    // the restarted extension answered from the node's object: Failure, and no second grant
    await waitFor('a Failure from the restarted extension', () =>
      Promise.resolve((ext?.extension.counts.updateAnswers.failure ?? 0) > 0 ? true : undefined),
    );
    expect(ext?.extension.counts.grants).toBe(0);
    // Cluster API logs the extension's Failure answer, which carries the node's own error
    expect(capi?.logs()).toContain(`node ${failed.metadata.name} `);
    expect(capi?.logs()).toMatch(/extra\.conf/);
    // the node still reports the last revision it applied: v2
    expect(n?.status?.appliedChecksum).toBe(await checksumOf('v2'));
  }, 300_000);

  it("the extension's deploy/ identity: what it reads and the grants it writes, nothing more", async (ctx) => {
    if (clusterUnavailable !== null || skipReason)
      return ctx.skip(clusterUnavailable ?? skipReason);
    const as = 'system:serviceaccount:oscar-system:oscar-extension';
    const can = async (...args: string[]): Promise<boolean> =>
      (await kubectl(['auth', 'can-i', ...args, `--as=${as}`])).code === 0;
    expect(await can('get', 'secrets', '-n', ns)).toBe(true);
    expect(await can('list', 'secrets', '-n', ns)).toBe(true);
    expect(await can('get', 'operatingsystemconfigs.oscar.dev', '-n', ns)).toBe(true);
    expect(await can('patch', 'operatingsystemconfignodes.oscar.dev')).toBe(true);
    expect(await can('get', 'machines.cluster.x-k8s.io', '-n', ns)).toBe(true);
    expect(await can('get', 'oscarconfigs.bootstrap.oscar.dev', '-n', ns)).toBe(true);
    for (const denied of [
      ['create', 'secrets', '-n', ns],
      ['update', 'secrets', '-n', ns],
      ['watch', 'secrets', '-n', ns],
      ['patch', 'operatingsystemconfignodes.oscar.dev', '--subresource=status'],
      ['delete', 'operatingsystemconfignodes.oscar.dev'],
      ['create', 'operatingsystemconfignodes.oscar.dev'],
      ['patch', 'operatingsystemconfigs.oscar.dev', '-n', ns],
      ['patch', 'machines.cluster.x-k8s.io', '-n', ns],
      ['patch', 'oscarconfigs.bootstrap.oscar.dev', '-n', ns],
      ['list', 'machines.cluster.x-k8s.io', '-n', ns],
    ]) {
      expect(await can(...denied), denied.join(' ')).toBe(false);
    }
  });

  it('a change of spec.type: no patch from oscar, a normal rollout (a new Machine)', async (ctx) => {
    if (clusterUnavailable !== null || skipReason)
      return ctx.skip(clusterUnavailable ?? skipReason);
    // its own MachineDeployment of one (a is held by the failed update above); no agents
    await apply(template('tpl-b1', 'v1'));
    await apply(machineDeployment('b', 'c1', 'tpl-b1', 1));
    const [first] = await withCapiLogs(() =>
      waitFor(
        'b: a Machine with a node, available',
        async () => {
          const ms = await machinesOf('b');
          const s = await mdStatus('b');
          return ms.length === 1 && ms[0]?.status?.nodeRef && s?.availableReplicas === 1
            ? ms
            : undefined;
        },
        180_000,
      ),
    );
    const uncovered = ext?.extension.counts.calls.CanUpdateMachineSet ?? 0;
    await apply(template('tpl-b2', 'flatcar'));
    await apply(machineDeployment('b', 'c1', 'tpl-b2', 1));
    const replaced = await withCapiLogs(() =>
      waitFor(
        'b: a new Machine instead of the first',
        async () => {
          const ms = await machinesOf('b');
          return ms.find((m) => m.metadata.uid !== first?.metadata.uid);
        },
        180_000,
      ),
    );
    expect(replaced.metadata.name).not.toBe(first?.metadata.name);
    expect(ext?.extension.counts.calls.CanUpdateMachineSet ?? 0).toBeGreaterThan(uncovered);
    expect(capi?.logs()).toMatch(/cannot be updated in-place by extensions/);
  }, 400_000);
});
