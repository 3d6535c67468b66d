/**
 * Kubernetes nodes through a Cluster API MachineDeployment (docs/performance.md, "Nodes through
 * Cluster API"): the same stack as test/e2e/capi-machinedeployment.test.ts — Cluster API's core
 * manager, oscar's controller and Runtime Extension, the test-only nspawn provider — with an
 * OscarConfigTemplate from examples/kubelet-worker/. Scales the MachineDeployment 0 → N and prints
 * per machine boot → Node registered → Ready (p50 / max) and Machine created → Running; then the
 * template's move to a reconcile OSC with another maxPods → every Node Ready with it, in place
 * (Cluster API updates one machine at a time; each waits out the OSC's soak); then API writes per
 * machine, by every client and by oscar's controller, from the first Machine to the end.
 *
 *   flock /tmp/oscar-e2e.lock timeout 1800 nice -n 10 node --import tsx hack/bench/capi-nodes.ts [--nodes 2]
 */
import { parseArgs } from 'node:util';
import { attachCluster } from '../../test/support/cluster.js';
import type { KubeHttp } from '../../kube/client.js';
import { buildCapi } from '../../test/support/capi.js';
import { nodeRoot } from '../../test/support/tools.js';
import { nodeBinaries, nodeReady, type NodeObject } from '../../test/support/kubelet-support.js';
import {
  applyObject,
  getObject,
  machineDeployment,
} from '../../test/e2e/nspawn-provider/cluster.js';
import {
  applyTemplate,
  applyWorkerOscs,
  startCapiStack,
  type CapiStack,
} from '../../test/e2e/nspawn-provider/stack.js';
import { getRaw, writesByResource } from './apiserver-metrics.js';
import { formatStatusWrites, statusChanges, type StatusWrite } from './status-writes.js';
import { API_VERSION } from '../../api/schema.js';
import { BOOTSTRAP_API_VERSION, OSCAR_CONFIG_RESOURCE } from '../../api/bootstrap/constants.js';
import { dropManagedFields, httpSource, Informer, keyOf } from '../../controller/kube/informer.js';
import type { OscObject } from '../../controller/kube/types.js';

const { values } = parseArgs({ options: { nodes: { type: 'string', default: '2' } } });
const count = Number(values.nodes);
const V2 = 'kubelet-worker-reconcile-v2';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
};
const secs = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

interface Timing {
  name: string;
  created: number;
  boot?: number;
  registered?: number;
  ready?: number;
  running?: number;
}

interface MachineItem {
  metadata: { name: string; creationTimestamp: string };
  status?: { phase?: string };
}

/** Polls until every machine of the deployment is Running with a Ready Node; their timings. */
async function scaleUp(api: KubeHttp, stack: CapiStack, ns: string, md: string): Promise<Timing[]> {
  const timings = new Map<string, Timing>();
  const deadline = Date.now() + 20 * 60_000;
  for (;;) {
    const list = await api.request<{ items: MachineItem[] }>(
      'GET',
      `/apis/cluster.x-k8s.io/v1beta2/namespaces/${ns}/machines`,
      { query: { labelSelector: `cluster.x-k8s.io/deployment-name=${md}` } },
    );
    for (const m of list.items) {
      const name = m.metadata.name;
      const t = timings.get(name) ?? { name, created: Date.parse(m.metadata.creationTimestamp) };
      timings.set(name, t);
      t.boot ??= stack.provider.running(name)?.bootedAt;
      const node = await getObject<NodeObject>(api, `/api/v1/nodes/${name}`);
      if (node && t.registered === undefined) t.registered = Date.now();
      if (nodeReady(node) && t.ready === undefined) t.ready = Date.now();
      if (m.status?.phase === 'Running' && t.running === undefined) t.running = Date.now();
    }
    const all = [...timings.values()];
    if (all.length === count && all.every((t) => t.ready && t.running)) return all;
    if (Date.now() > deadline) throw new Error(`not all Ready: ${JSON.stringify(all)}`);
    await sleep(500);
  }
}

function report(timings: Timing[]): void {
  const since = (t: Timing, k: 'registered' | 'ready'): number => (t[k] ?? NaN) - (t.boot ?? NaN);
  console.log(`${String(count)} machines, MachineDeployment 0 → ${String(count)} (2 shared cores)`);
  for (const t of timings) {
    console.log(
      `  ${t.name}: boot → registered ${secs(since(t, 'registered'))}, → Ready ${secs(since(t, 'ready'))}; Machine created → Running ${secs((t.running ?? NaN) - t.created)}`,
    );
  }
  const regs = timings.map((t) => since(t, 'registered'));
  const readys = timings.map((t) => since(t, 'ready'));
  const runs = timings.map((t) => (t.running ?? NaN) - t.created);
  console.log(`  boot → registered     p50 ${secs(pct(regs, 50))}, max ${secs(Math.max(...regs))}`);
  console.log(
    `  boot → Ready          p50 ${secs(pct(readys, 50))}, max ${secs(Math.max(...readys))}`,
  );
  console.log(`  created → Running     p50 ${secs(pct(runs, 50))}, max ${secs(Math.max(...runs))}`);
}

/**
 * The API server counts requests by resource, not by client; whose they are follows from the
 * resource: Cluster API and its test provider write their own kinds, kubelet its Node and Lease,
 * oscar's agents their node reports; oscar's controller counts its own (its metric), which are
 * taken out of the resources it shares with others (Secrets, Events, CSR approvals, RBAC).
 */
function writesByClient(
  byResource: readonly (readonly [string, number])[],
  oscarOwn: readonly { labels: Record<string, string | number>; value: number }[],
): [string, number][] {
  const capi =
    /^(machines|machinesets|machinedeployments|clusters|nspawnmachines|nspawnclusters|machinehealthchecks)(\/|$)/;
  const kubelet = /^(nodes|leases)(\/|$)/;
  const agents = /^operatingsystemconfignodes(\/|$)/;
  const sum = (re: RegExp): number => byResource.reduce((n, [k, v]) => n + (re.test(k) ? v : 0), 0);
  const all = byResource.reduce((n, [, v]) => n + v, 0);
  const c = sum(capi);
  const k = sum(kubelet);
  const own = oscarOwn.reduce((n, v) => n + v.value, 0);
  // the controller's grants are node-object writes too: the agents' are the rest
  const grants = oscarOwn.reduce(
    (n, v) => n + (agents.test(String(v.labels.resource)) ? v.value : 0),
    0,
  );
  const a = sum(agents) - grants;
  return [
    ['Cluster API (core manager, test provider): its kinds', c],
    ['kubelet: Node, Node status, Lease', k],
    ['oscar agents: node reports', a],
    ['oscar controller (its own count)', own],
    ['the rest (Events, CSRs, Secrets, RBAC, … of other clients)', all - c - k - a - own],
  ];
}

async function inPlace(api: KubeHttp, names: string[]): Promise<number> {
  const t0 = Date.now();
  for (;;) {
    const nodes = await Promise.all(
      names.map((n) => getObject<NodeObject>(api, `/api/v1/nodes/${n}`)),
    );
    if (nodes.every((n) => nodeReady(n) && n?.status?.capacity?.pods === '42'))
      return Date.now() - t0;
    if (Date.now() - t0 > 20 * 60_000)
      throw new Error('the in-place change did not reach every node');
    await sleep(500);
  }
}

/** Every stored status version of one kind's objects in the namespace, with what it changed. */
function watchStatusWrites(
  api: KubeHttp,
  path: string,
): { writes: StatusWrite[]; stop(): Promise<void> } {
  const writes: StatusWrite[] = [];
  const seen = (before: OscObject | undefined, after: OscObject): void => {
    const changed = statusChanges(before?.status, after.status);
    if (changed.length === 0) return;
    // the counts and the rollout's phase, to tell a node's arrival from its update
    const s = after.status as { nodes?: unknown; rollout?: { phase?: string; nodes?: unknown } };
    const detail = JSON.stringify({
      nodes: s.nodes,
      rollout: s.rollout?.nodes,
      phase: s.rollout?.phase,
    });
    writes.push({ osc: keyOf(after), at: Date.now(), changed, detail });
  };
  const informer = new Informer<OscObject>(
    httpSource(api, { path }),
    {
      onAdd: (o) => {
        seen(undefined, o);
      },
      onUpdate: seen,
    },
    { name: `bench-status(${path})`, transform: dropManagedFields },
  );
  informer.start();
  return { writes, stop: () => informer.stop() };
}

async function main(): Promise<void> {
  const lower = nodeRoot();
  const bin = nodeBinaries();
  const built = await buildCapi();
  if (!lower || !bin || 'missing' in built) throw new Error('no node root, kubelet or Cluster API');
  const cluster = await attachCluster({});
  const { env, api, kubeConfig: kc } = cluster;
  const suffix = process.pid.toString(36);
  const ns = `bench-md-${suffix}`;
  const md = `b${suffix}`;
  const stack = await startCapiStack({
    env,
    api,
    namespace: ns,
    cluster: 'c1',
    capiDir: built.dir,
    lower,
    bin,
    suffix,
  });
  let names: string[] = [];
  const statusWrites = watchStatusWrites(
    api,
    `/apis/${API_VERSION}/namespaces/${ns}/operatingsystemconfigs`,
  );
  const configWrites = watchStatusWrites(
    api,
    `/apis/${BOOTSTRAP_API_VERSION}/namespaces/${ns}/${OSCAR_CONFIG_RESOURCE}`,
  );
  const t0 = Date.now();
  try {
    await applyWorkerOscs(api, ns, V2);
    await applyTemplate(api, ns, 'worker-v1');
    await applyTemplate(api, ns, 'worker-v2', V2);
    const deployment = (tpl: string, replicas: number) =>
      machineDeployment({ ns, name: md, cluster: 'c1', tpl, replicas });
    const writes0 = writesByResource(await getRaw(kc, '/metrics'));
    await applyObject(api, deployment('worker-v1', count));
    const timings = await scaleUp(api, stack, ns, md);
    names = timings.map((t) => t.name);
    report(timings);
    await applyObject(api, deployment('worker-v2', count));
    const took = await inPlace(api, names);
    console.log(`  template → maxPods 42 in place → every Node Ready with it: ${secs(took)}`);
    const byResource = [...writesByResource(await getRaw(kc, '/metrics'))]
      .map(([k, v]) => [k, v - (writes0.get(k) ?? 0)] as const)
      .filter(([, v]) => v > 0)
      .sort((a, b) => b[1] - a[1]);
    const writes = byResource.reduce((n, [, v]) => n + v, 0);
    const own = (await stack.controller.metrics.writes.get()).values;
    const ownTotal = own.reduce((n, v) => n + v.value, 0);
    console.log(
      `  API writes (all clients: Cluster API, oscar, kubelets, agents, kube-controller-manager) from the first Machine to the end: ${String(writes)}, ${(writes / count).toFixed(1)} per machine`,
    );
    console.log(`    by resource: ${byResource.map(([k, v]) => `${k} ${String(v)}`).join(', ')}`);
    for (const [who, n] of writesByClient(byResource, own)) {
      console.log(
        `    ${who.padEnd(56)} ${String(n).padStart(5)}  ${(n / count).toFixed(1)} per machine`,
      );
    }
    console.log(
      `  oscar controller's own writes (whole run): ${String(ownTotal)}, ${(ownTotal / count).toFixed(1)} per machine`,
    );
    console.log(
      `    by resource: ${own
        .filter((v) => v.value > 0)
        .sort((a, b) => b.value - a.value)
        .map((v) => `${String(v.labels.verb)} ${String(v.labels.resource)} ${String(v.value)}`)
        .join(', ')}`,
    );
    console.log(
      `  OSC status versions (a watch of the namespace's OSCs; what each changed, time from the OSCs' apply):`,
    );
    for (const l of formatStatusWrites(statusWrites.writes, t0)) console.log(l);
    console.log(`  OscarConfig status versions (the per-machine bootstrap controller's):`);
    for (const l of formatStatusWrites(configWrites.writes, t0, false)) console.log(l);
  } finally {
    await statusWrites.stop();
    await configWrites.stop();
    await stack.stop();
    for (const n of names) await api.request('DELETE', `/api/v1/nodes/${n}`).catch(() => undefined);
    await api.request('DELETE', `/api/v1/namespaces/${ns}`).catch(() => undefined);
    await cluster.stop();
  }
}

await main();
