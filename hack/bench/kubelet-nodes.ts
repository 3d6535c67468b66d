/**
 * Kubernetes nodes from oscar's user data, N at once (docs/testing.md, "Kubernetes nodes"): N
 * OscarConfigs from examples/kubelet-worker/ (spec.kubeletBootstrap), N nspawn machines booted
 * together from their user data, each kubelet TLS-bootstrapping through oscar's approver (the
 * controller in this process). Prints per machine boot → Node registered → Ready, p50 / max; then
 * the in-place kubelet change (maxPods) → every Node Ready with the new capacity; and the API
 * writes (every client: controller, agents, kubelets, kube-controller-manager) per machine over
 * the whole run, from the API server's apiserver_request_total.
 *
 *   flock /tmp/oscar-heavy.lock flock /tmp/oscar-e2e.lock timeout 1800 nice -n 10 \
 *     node --import tsx hack/bench/kubelet-nodes.ts [--nodes 2]
 *
 * The machines share the host's network (they reach the API server on loopback), so each kubelet
 * gets its own port through a per-machine drop-in; like the e2e, the host's sysctls kubelet
 * changes are put back at the end.
 */
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { buildAgent } from '../agent/build.js';
import { runBootstrapController, serveAgent } from '../../test/support/agent-server.js';
import { attachCluster, kubeOps } from '../../test/support/cluster.js';
import type { Node } from '../../test/support/nspawn.js';
import { nodeRoot, repoRoot } from '../../test/support/tools.js';
import {
  exampleDocs,
  hostSysctls,
  bootKubeletMachine,
  nodeBinaries,
  nodeReady,
  type NodeObject,
} from '../../test/support/kubelet-support.js';
import { getRaw } from './apiserver-metrics.js';

const { values } = parseArgs({ options: { nodes: { type: 'string', default: '2' } } });
const count = Number(values.nodes);

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
};
const secs = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

/** Mutating requests the API server served, by everyone. */
function writesIn(metrics: string): number {
  let n = 0;
  for (const line of metrics.split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    if (!/verb="(POST|PUT|PATCH|DELETE|APPLY)"/.test(line)) continue;
    n += Number(line.split(' ').pop());
  }
  return n;
}

interface Machine {
  name: string;
  node?: Node;
  boot: number;
  registered?: number;
  ready?: number;
}

async function main(): Promise<void> {
  const lower = nodeRoot();
  const bin = nodeBinaries();
  if (!lower || !bin) throw new Error('no node root or kubelet (see the printed reason)');
  const cluster = await attachCluster({});
  const { env, api, kubeConfig: kc } = cluster;
  const { apply, get } = kubeOps(api, 'bench');
  const restore = await hostSysctls();
  const cleanups: (() => Promise<void>)[] = [];
  const machines: Machine[] = [];
  const ns = `bench-kn-${process.pid.toString(36)}`;
  try {
    const { execFileSync } = await import('node:child_process');
    execFileSync(env.info.kubectlPath, [
      '--kubeconfig',
      env.kubeconfigPath,
      'apply',
      '-k',
      join(repoRoot, 'deploy/identity'),
    ]);
    const agent = await buildAgent({});
    const server = await serveAgent(agent.path);
    cleanups.push(() => server.close());
    const agentUrl = server.url;
    await apply(`/api/v1/namespaces/${ns}`, {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: ns },
    });
    const applyOscs = async (maxPods?: number): Promise<void> => {
      for (const f of ['kubelet-worker/provision.yaml', 'kubelet-worker/reconcile.yaml']) {
        for (const doc of await exampleDocs(f, ns)) {
          const text = JSON.stringify(doc).replace(
            'maxPods: 110',
            `maxPods: ${String(maxPods ?? 110)}`,
          );
          await apply(
            `/apis/oscar.dev/v1alpha1/namespaces/${ns}/operatingsystemconfigs/${doc.metadata.name}`,
            JSON.parse(text) as Record<string, unknown>,
          );
        }
      }
    };
    await applyOscs();
    const controller = await runBootstrapController({
      env,
      namespace: ns,
      agentUrl,
      agentSha256: agent.sha256,
    });
    cleanups.push(() => controller.stop());
    const writes0 = writesIn(await getRaw(kc, '/metrics'));
    const [config] = await exampleDocs('kubelet-worker/oscarconfig.yaml', ns);
    // user data for all, then boot all together
    const seeds: string[] = [];
    for (let i = 0; i < count; i++) {
      const name = `bkn${String(i)}-${process.pid.toString(36)}`;
      machines.push({ name, boot: 0 });
      await apply(`/apis/bootstrap.oscar.dev/v1alpha1/namespaces/${ns}/oscarconfigs/${name}`, {
        ...config,
        metadata: { name, namespace: ns },
      });
    }
    for (const m of machines) {
      for (;;) {
        const s = await get<{ data?: { value?: string } }>(
          `/api/v1/namespaces/${ns}/secrets/${m.name}`,
        );
        if (s?.data?.value) {
          seeds.push(Buffer.from(s.data.value, 'base64').toString('utf8'));
          break;
        }
        await sleep(200);
      }
    }
    await Promise.all(
      machines.map(async (m, i) => {
        // one port per kubelet on the shared network; healthz off (it would collide too)
        const booted = await bootKubeletMachine({
          lower,
          bin,
          name: m.name,
          userData: seeds[i] ?? '',
          dropIns: {
            '91-port.conf': `apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nport: ${String(10250 + 10 * i)}\nhealthzPort: 0\n`,
          },
        });
        cleanups.push(booted.stop);
        m.boot = booted.bootedAt;
        m.node = booted.node;
      }),
    );
    const deadline = Date.now() + 15 * 60_000;
    while (machines.some((m) => m.ready === undefined) && Date.now() < deadline) {
      for (const m of machines) {
        if (m.ready !== undefined) continue;
        const n = await get<NodeObject>(`/api/v1/nodes/${m.name}`);
        if (n && m.registered === undefined) m.registered = Date.now();
        if (nodeReady(n)) m.ready = Date.now();
      }
      await sleep(500);
    }
    const regs = machines.map((m) => (m.registered ?? NaN) - m.boot);
    const readys = machines.map((m) => (m.ready ?? NaN) - m.boot);
    console.log(`${String(count)} machines booted together (2 shared cores)`);
    for (const m of machines) {
      console.log(
        `  ${m.name}: boot → registered ${secs((m.registered ?? NaN) - m.boot)}, → Ready ${secs((m.ready ?? NaN) - m.boot)}`,
      );
    }
    console.log(`  boot → registered p50 ${secs(pct(regs, 50))}, max ${secs(Math.max(...regs))}`);
    console.log(
      `  boot → Ready      p50 ${secs(pct(readys, 50))}, max ${secs(Math.max(...readys))}`,
    );
    const t1 = Date.now();
    await applyOscs(42);
    for (;;) {
      const all = await Promise.all(
        machines.map((m) => get<NodeObject>(`/api/v1/nodes/${m.name}`)),
      );
      if (all.every((n) => nodeReady(n) && n?.status?.capacity?.pods === '42')) break;
      if (Date.now() - t1 > 10 * 60_000)
        throw new Error('the kubelet change did not reach every node');
      await sleep(500);
    }
    console.log(`  maxPods 110 → 42 applied → every Node Ready with 42: ${secs(Date.now() - t1)}`);
    const writes = writesIn(await getRaw(kc, '/metrics')) - writes0;
    const own = (await controller.metrics.writes.get()).values;
    const ownTotal = own.reduce((n, v) => n + v.value, 0);
    const byKind = own
      .filter((v) => v.value > 0)
      .map((v) => `${String(v.labels.resource)} ${String(v.labels.verb)} ${String(v.value)}`)
      .join(', ');
    console.log(
      `  oscar controller's writes: ${String(ownTotal)}, ${(ownTotal / count).toFixed(1)} per machine (${byKind})`,
    );
    console.log(
      `  API writes (all clients) from the first OscarConfig to the end: ${String(writes)}, ${(writes / count).toFixed(1)} per machine (kubelet's node status and lease updates included)`,
    );
  } finally {
    for (const m of machines) await m.node?.stop().catch(() => undefined);
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
    await restore();
    for (const m of machines)
      await api.request('DELETE', `/api/v1/nodes/${m.name}`).catch(() => undefined);
    await api.request('DELETE', `/api/v1/namespaces/${ns}`).catch(() => undefined);
    await cluster.stop();
  }
}

await main();
