// Cluster API end to end on real nodes (issue 29, items 4 and 5; docs/testing.md, "Cluster API on
// real nodes"): Cluster API's real core manager, oscar's controller and Runtime Extension, and the
// test-only nspawn infrastructure provider (test/e2e/nspawn-provider/). A MachineDeployment of 2
// with an OscarConfigTemplate made from examples/kubelet-worker/ → two nspawn machines boot from
// Cluster API's bootstrap data Secrets → kubelet TLS-bootstraps through oscar's approver → two
// Nodes Ready, Machines Running → the template moves to a reconcile OSC with another maxPods →
// both updated in place through oscar's extension (same Machines, same nspawn machines) → a hand
// edit of kubelet's configuration on one node reverted (driftPolicy: Revert) → scale to 1: the
// removed Machine's Node, nspawn machine, OscarConfig and token gone, the other untouched.
//
// The workload cluster is the test cluster itself: the Cluster's kubeconfig Secret points Cluster
// API's cluster cache at this API server, so the manager sets each Machine's nodeRef from the
// real Node kubelet registered (matched by spec.providerID).
import { readFile, writeFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KubeHttp } from '../../kube/client.js';
import { buildCapi } from '../support/capi.js';
import { clusterOrSkip, type Cluster } from '../support/cluster.js';
import { nodeSuiteGate } from '../support/tools.js';
import { waitFor } from '../support/wait.js';
import { nodeBinaries, nodeReady, type NodeObject } from '../support/kubelet-support.js';
import { applyObject, getObject, machineDeployment } from './nspawn-provider/cluster.js';
import { providerIdOf } from './nspawn-provider/decide.js';
import {
  applyTemplate,
  applyWorkerOscs,
  startCapiStack,
  type CapiStack,
} from './nspawn-provider/stack.js';

const KUBELET_CONFIG = '/etc/kubernetes/kubelet/config.yaml';
const V2 = 'kubelet-worker-reconcile-v2';
const IN_PROGRESS = 'in-place-updates.internal.cluster.x-k8s.io/update-in-progress';

let skipReason: string | undefined;
let testCluster: Cluster | undefined;
let stack: CapiStack | undefined;
const suffix = process.pid.toString(36);
const ns = `e2e-md-${suffix}`;
const cluster = 'c1';
const md = `w${suffix}`; // Machine names start with it; their Nodes are cluster-wide
/** The two Machines as the first step left them. */
let first: { name: string; uid: string }[] = [];

function api(): KubeHttp {
  if (!testCluster) throw new Error('no API server');
  return testCluster.api;
}

const get = <T>(path: string): Promise<T | undefined> => getObject<T>(api(), path);
const apply = (obj: Record<string, unknown>): Promise<void> => applyObject(api(), obj);

interface Machine {
  metadata: { name: string; uid: string; annotations?: Record<string, string> };
  status?: { phase?: string; nodeRef?: { name: string } };
}

async function machines(): Promise<Machine[]> {
  const list = await api().request<{ items: Machine[] }>(
    'GET',
    `/apis/cluster.x-k8s.io/v1beta2/namespaces/${ns}/machines`,
    { query: { labelSelector: `cluster.x-k8s.io/deployment-name=${md}` } },
  );
  return list.items.sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
}

const nodeOf = (name: string): Promise<NodeObject | undefined> =>
  get<NodeObject>(`/api/v1/nodes/${name}`);

/** What to print when a wait times out: the provider's, Cluster API's and the nodes' last words. */
async function diagnostics(): Promise<string> {
  const parts = [`--- provider\n${stack?.provider.logs() ?? ''}`];
  const capiLines = (stack?.capi.logs() ?? '')
    .split('\n')
    .filter((l) => /error|Error|E\d{4}/.test(l));
  parts.push(`--- Cluster API (errors)\n${capiLines.slice(-20).join('\n')}`);
  for (const m of await machines().catch(() => [])) {
    const node = stack?.provider.running(m.metadata.name)?.node;
    if (!node) continue;
    for (const unit of ['kubelet.service', 'oscar-agent.service']) {
      const j = await node.journal(unit).catch(() => '');
      parts.push(`--- ${m.metadata.name} ${unit}\n${j.split('\n').slice(-15).join('\n')}`);
    }
  }
  return parts.join('\n');
}

const deployment = (tpl: string, replicas: number) =>
  machineDeployment({ ns, name: md, cluster, tpl, replicas });

async function setUp(bin: string, lower: string): Promise<void> {
  const capiBuilt = await buildCapi();
  if ('missing' in capiBuilt) {
    skipReason = `no Cluster API manager: ${capiBuilt.missing}`;
    return;
  }
  const attached = await clusterOrSkip();
  if ('skip' in attached) {
    skipReason = attached.skip;
    return;
  }
  testCluster = attached.cluster;
  stack = await startCapiStack({
    env: testCluster.env,
    api: testCluster.api,
    namespace: ns,
    cluster,
    capiDir: capiBuilt.dir,
    lower,
    bin,
    suffix,
    log: (m) => process.stderr.write(`${m}\n`),
  });
  await applyWorkerOscs(testCluster.api, ns, V2);
}

beforeAll(async () => {
  const gate = nodeSuiteGate(['systemd-nspawn', 'nsenter', 'pgrep', 'mount', 'openssl']);
  if (gate.skip !== undefined) {
    skipReason = gate.skip;
    return;
  }
  const bin = nodeBinaries();
  if (bin === undefined) {
    skipReason = 'no kubelet (see the printed reason)';
    return;
  }
  await setUp(bin, gate.root);
}, 3_600_000);

afterAll(async () => {
  await stack?.stop();
  for (const n of first) {
    await testCluster?.kubectl(['delete', 'node', n.name, '--ignore-not-found']);
  }
  await testCluster?.kubectl(['delete', 'namespace', ns, '--wait=false']);
  await testCluster?.stop();
}, 180_000);

describe('Cluster API end to end on nspawn machines', () => {
  it('a MachineDeployment of 2 with an OscarConfigTemplate: two Ready Nodes, Machines Running', async (ctx) => {
    if (skipReason) return ctx.skip(skipReason);
    await applyTemplate(api(), ns, 'worker-v1');
    const t0 = Date.now();
    await apply(deployment('worker-v1', 2));
    const running = await waitFor(
      '2 Machines Running with Ready Nodes',
      async () => {
        const ms = await machines();
        if (ms.length !== 2) return undefined;
        for (const m of ms) {
          if (m.status?.phase !== 'Running' || m.status.nodeRef?.name !== m.metadata.name)
            return undefined;
          if (!nodeReady(await nodeOf(m.metadata.name))) return undefined;
        }
        return ms;
      },
      { timeoutMs: 900_000, intervalMs: 1000, onTimeout: diagnostics },
    );
    process.stderr.write(`[e2e] MachineDeployment 0 → 2 Ready: ${String(Date.now() - t0)} ms\n`);
    first = running.map((m) => ({ name: m.metadata.name, uid: m.metadata.uid }));
    for (const m of first) {
      const node = await nodeOf(m.name);
      expect(node?.spec?.providerID).toBe(providerIdOf(m.name));
      expect(node?.status?.capacity?.pods).toBe('110');
      expect(node?.status?.nodeInfo?.kubeletVersion).toBe('v1.37.2');
      expect(stack?.provider.running(m.name)).toBeDefined();
      // booted from Cluster API's bootstrap data: the machine's own OscarConfig, from the template
      const cfg = await get<{ spec: { reconcileRef: { name: string } } }>(
        `/apis/bootstrap.oscar.dev/v1alpha1/namespaces/${ns}/oscarconfigs/${m.name}`,
      );
      expect(cfg?.spec.reconcileRef.name).toBe('kubelet-worker-reconcile');
    }
  }, 1_000_000);
});

describe('Cluster API end to end on nspawn machines, after the MachineDeployment is up', () => {
  it('the template moves to a reconcile OSC with maxPods 42: both Machines updated in place through oscar’s extension', async (ctx) => {
    if (skipReason) return ctx.skip(skipReason);
    if (first.length !== 2) throw new Error('the MachineDeployment did not come up above');
    const before = new Map<string, string>();
    const kubelets = new Map<string, string>();
    for (const m of first) {
      const node = stack?.provider.running(m.name)?.node;
      before.set(m.name, String(node?.pid));
      kubelets.set(m.name, (await node?.show('kubelet.service', ['MainPID']))?.MainPID ?? '');
    }
    const grants = stack?.extension.handle.extension.counts.grants ?? 0;
    await applyTemplate(api(), ns, 'worker-v2', V2);
    const t0 = Date.now();
    await apply(deployment('worker-v2', 2));
    await waitFor(
      'both Nodes Ready with maxPods 42, the MachineDeployment up to date',
      async () => {
        const ms = await machines();
        if (ms.length !== 2) return undefined;
        if (ms.some((m) => m.metadata.annotations?.[IN_PROGRESS] !== undefined)) return undefined;
        for (const m of ms) {
          const n = await nodeOf(m.metadata.name);
          if (!nodeReady(n) || n?.status?.capacity?.pods !== '42') return undefined;
        }
        const d = await get<{ status?: { upToDateReplicas?: number } }>(
          `/apis/cluster.x-k8s.io/v1beta2/namespaces/${ns}/machinedeployments/${md}`,
        );
        return d?.status?.upToDateReplicas === 2 ? true : undefined;
      },
      { timeoutMs: 900_000, intervalMs: 1000, onTimeout: diagnostics },
    );
    process.stderr.write(
      `[e2e] in place, 2 machines: template change → both Nodes Ready with maxPods 42 and up to date: ${String(Date.now() - t0)} ms\n`,
    );
    // the same Machines, on the same nspawn machines (never replaced)
    const now = (await machines()).map((m) => ({ name: m.metadata.name, uid: m.metadata.uid }));
    expect(now).toEqual(first);
    for (const m of first) {
      expect(String(stack?.provider.running(m.name)?.node.pid)).toBe(before.get(m.name));
      const node = stack?.provider.running(m.name)?.node;
      // kubelet restarted for its new configuration (filePaths), on the same machine
      const kubelet = (await node?.show('kubelet.service', ['MainPID']))?.MainPID;
      expect(kubelet).not.toBe(kubelets.get(m.name));
      expect(kubelet).not.toBe('0');
      expect(await readFile(node?.hostPath(KUBELET_CONFIG) ?? '', 'utf8')).toContain('maxPods: 42');
      const cfg = await get<{ spec: { reconcileRef: { name: string } } }>(
        `/apis/bootstrap.oscar.dev/v1alpha1/namespaces/${ns}/oscarconfigs/${m.name}`,
      );
      expect(cfg?.spec.reconcileRef.name).toBe(V2);
    }
    // through oscar's extension: a grant per machine
    expect((stack?.extension.handle.extension.counts.grants ?? 0) - grants).toBeGreaterThanOrEqual(
      2,
    );
  }, 1_000_000);

  it('a hand edit of kubelet’s configuration on one node is reverted (driftPolicy: Revert)', async (ctx) => {
    if (skipReason) return ctx.skip(skipReason);
    const target = first[0]?.name ?? '';
    const node = stack?.provider.running(target)?.node;
    if (!node) throw new Error('no machine to edit');
    const path = node.hostPath(KUBELET_CONFIG);
    const applied = await readFile(path, 'utf8');
    expect(applied).toContain('maxPods: 42');
    const t0 = Date.now();
    await writeFile(path, applied.replace('maxPods: 42', 'maxPods: 7'));
    await waitFor(
      'the edit reverted',
      async () => ((await readFile(path, 'utf8')) === applied ? true : undefined),
      { timeoutMs: 180_000, intervalMs: 1000, onTimeout: diagnostics },
    );
    process.stderr.write(`[e2e] hand edit → reverted: ${String(Date.now() - t0)} ms\n`);
    const n = await waitFor(
      'the Node Ready with maxPods 42',
      async () => {
        const got = await nodeOf(target);
        return nodeReady(got) && got?.status?.capacity?.pods === '42' ? got : undefined;
      },
      { timeoutMs: 180_000, intervalMs: 1000, onTimeout: diagnostics },
    );
    expect(n.status?.capacity?.pods).toBe('42');
  }, 400_000);

  it('scale to 1: one Machine, its Node, nspawn machine, OscarConfig and token gone; the other untouched', async (ctx) => {
    if (skipReason) return ctx.skip(skipReason);
    const configs = new Map<string, string>();
    for (const m of first) {
      const cfg = await get<{ status?: { bootstrapTokenID?: string } }>(
        `/apis/bootstrap.oscar.dev/v1alpha1/namespaces/${ns}/oscarconfigs/${m.name}`,
      );
      configs.set(m.name, cfg?.status?.bootstrapTokenID ?? '');
    }
    const kubeletPids = new Map<string, string>();
    for (const m of first) {
      const node = stack?.provider.running(m.name)?.node;
      kubeletPids.set(m.name, (await node?.show('kubelet.service', ['MainPID']))?.MainPID ?? '');
    }
    const t0 = Date.now();
    await apply(deployment('worker-v2', 1));
    const [kept] = await waitFor(
      'one Machine left, the other’s Node and nspawn machine gone',
      async () => {
        const ms = await machines();
        if (ms.length !== 1) return undefined;
        const gone = first.find((m) => m.name !== ms[0]?.metadata.name);
        if (!gone || (await nodeOf(gone.name)) || stack?.provider.running(gone.name))
          return undefined;
        return ms;
      },
      { timeoutMs: 600_000, intervalMs: 1000, onTimeout: diagnostics },
    );
    process.stderr.write(`[e2e] scale 2 → 1: ${String(Date.now() - t0)} ms\n`);
    const keptName = kept?.metadata.name ?? '';
    const gone = first.find((m) => m.name !== keptName);
    if (!gone) throw new Error('no removed Machine');
    expect(first.find((m) => m.name === keptName)?.uid).toBe(kept?.metadata.uid);
    expect(stack?.provider.runningCount()).toBe(1);
    await waitFor(
      'the removed machine’s OscarConfig gone',
      async () =>
        (await get(`/apis/bootstrap.oscar.dev/v1alpha1/namespaces/${ns}/oscarconfigs/${gone.name}`))
          ? undefined
          : true,
      { timeoutMs: 120_000, intervalMs: 1000, onTimeout: diagnostics },
    );
    // its node identity: the Role and RoleBinding that let its agent read its OSC (owned by the
    // OscarConfig, collected with it)
    const rbac = `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}`;
    await waitFor(
      'the removed machine’s Role and RoleBinding gone',
      async () =>
        ((await get(`${rbac}/roles/oscar-node-${gone.name}`)) ??
        (await get(`${rbac}/rolebindings/oscar-node-${gone.name}`)))
          ? undefined
          : true,
      { timeoutMs: 120_000, intervalMs: 1000, onTimeout: diagnostics },
    );
    const oscnode = await get(`/apis/oscar.dev/v1alpha1/operatingsystemconfignodes/${gone.name}`);
    process.stderr.write(
      `[e2e] the removed machine's OperatingSystemConfigNode ${oscnode ? 'remains' : 'is gone'}\n`,
    );
    const tokenId = configs.get(gone.name) ?? '';
    expect(tokenId).not.toBe('');
    expect(await get(`/api/v1/namespaces/kube-system/secrets/bootstrap-token-${tokenId}`)).toBe(
      undefined,
    );
    // the other: the same Machine, Node Ready, kubelet not restarted
    const node = stack?.provider.running(keptName)?.node;
    expect((await node?.show('kubelet.service', ['MainPID']))?.MainPID).toBe(
      kubeletPids.get(keptName),
    );
    expect(nodeReady(await nodeOf(keptName))).toBe(true);
  }, 700_000);
});
