// A Reboot-level rollout, timed per node (issue 25 item 5): drain + reboot + Ready, and the
// rollout's total against the ideal (waves × the per-node time). Against the real test API server
// (hack/testenv, with kube-controller-manager's disruption controller keeping the
// PodDisruptionBudget) and the real controller (in this process: its drains through the Eviction
// API, its waves); each node is the real grant-mode agent (followGrants, a directory root, its own
// connections) whose reboot is simulated: the agent journals its intent and asks for the reboot as
// on a node, then this script stops it, marks the Node NotReady, waits --boot-ms, empties the root's
// /run (a new boot token), marks the Node Ready and starts a new agent, which tells its own reboot
// from a crash and verifies the try on. Pods are API-held (no kubelet; no grace period, so an
// accepted eviction removes them at once) and a small loop plays ReplicaSet, scheduler and kubelet:
// an evicted pod is replaced on a schedulable node, Running and Ready — so the budget
// (maxUnavailable 1 over all of them) is met again only once the replacement is up.
// What it does not measure: a real kernel's boot, kubelet's pod start, image pulls — the e2e on
// nspawn machines (test/e2e) does those, one node at a time.
//
//   npx node --import tsx hack/bench/reboot-drain.ts [--nodes 4] [--pods-per-node 2]
//     [--max-unavailable 1] [--boot-ms 3000] [--soak 2]
// Env: OSCAR_TESTENV_STATE attaches to a running test cluster instead of starting one.
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { KubeConfig } from '@kubernetes/client-node';
import { followGrants, type GrantWiring } from '../../agent/wiring/follow-grants.js';
import { LocalSystemd } from '../../agent/systemd.js';
import type { OperatingSystemConfigSpec } from '../../api/schema.js';
import { runController } from '../../controller/main.js';
import type { OscNodeObject } from '../../controller/osc/node-index.js';
import { CONTENT_MERGE_PATCH, HttpKubeClient } from '../../kube/client.js';
import { createLogger } from '../../log/logger.js';
import { createReadyPod, createWebBudget } from '../../test/integration/support/workloads.js';
import { waitFor } from '../../test/support/wait.js';
import { attachCluster } from '../../test/support/cluster.js';
import { applyBenchOsc } from './support/osc.js';

const { values: opts } = parseArgs({
  options: {
    nodes: { type: 'string', default: '4' },
    'pods-per-node': { type: 'string', default: '2' },
    'max-unavailable': { type: 'string', default: '1' },
    'boot-ms': { type: 'string', default: '3000' },
    soak: { type: 'string', default: '2' },
  },
});
const N = Number(opts.nodes);
const PODS = N * Number(opts['pods-per-node']);
const MAX_UNAVAILABLE = Number(opts['max-unavailable']);
const BOOT_MS = Number(opts['boot-ms']);
const SOAK_S = Number(opts.soak);
const OSC = 'rb';
const NODES = '/apis/oscar.dev/v1alpha1/operatingsystemconfignodes';
const log = (m: string): void => {
  process.stderr.write(`[bench] ${new Date().toISOString().slice(11, 19)} ${m}\n`);
};
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function spec(version: number): OperatingSystemConfigSpec {
  return {
    type: 'debian',
    purpose: 'reconcile',
    files: [
      {
        path: '/etc/modprobe.d/oscar.conf',
        onChange: 'reboot',
        content: { inline: { data: `options loop max_loop=${String(8 * version)}\n` } },
      },
    ],
    rollout: {
      maxUnavailable: MAX_UNAVAILABLE,
      soakSeconds: SOAK_S,
      progressDeadlineSeconds: 300,
    },
  };
}

/** What one node went through, in ms since the epoch. */
interface Times {
  cordoned?: number;
  granted?: number;
  rebootAsked?: number;
  ready?: number;
  confirmed?: number;
  uncordoned?: number;
}

async function setReady(http: HttpKubeClient, node: string, ready: boolean): Promise<void> {
  const now = new Date().toISOString();
  await http.request('PATCH', `/api/v1/nodes/${node}/status`, {
    contentType: CONTENT_MERGE_PATCH,
    body: {
      status: {
        conditions: [
          {
            type: 'Ready',
            status: ready ? 'True' : 'False',
            reason: 'Bench',
            lastTransitionTime: now,
            // kubelet's heartbeat: without it kube-controller-manager's node lifecycle
            // controller marks the Node Unknown, and the agent's post-reboot check waits for Ready
            lastHeartbeatTime: now,
          },
        ],
      },
    },
  });
}

/** One node: its agent, and the reboot the agent asks for, simulated. */
class SimNode {
  readonly times: Times = {};
  private wiring: GrantWiring | undefined;
  private cycle: Promise<void> = Promise.resolve();

  constructor(
    readonly name: string,
    private readonly root: string,
    private readonly kc: KubeConfig,
    private readonly http: HttpKubeClient,
    private readonly ns: string,
  ) {}

  async start(): Promise<void> {
    const stateDir = join(this.root, 'var/lib/oscar');
    await mkdir(stateDir, { recursive: true });
    this.wiring = followGrants(this.kc, {
      namespace: this.ns,
      osc: OSC,
      node: this.name,
      deps: {
        root: this.root,
        stateDir,
        systemd: new LocalSystemd(this.root, join(stateDir, 'would-run.log')),
        owners: false,
      },
      pollIntervalMs: 120_000,
      log: createLogger({ component: `agent-${this.name}`, level: 'error' }),
      rebooter: {
        reboot: () => {
          this.times.rebootAsked = Date.now();
          this.cycle = this.reboot();
          return Promise.resolve();
        },
      },
    });
    await this.wiring.agent.start();
  }

  /** systemd stops the agent, the machine is down for the boot, /run is empty after it. */
  private async reboot(): Promise<void> {
    await sleep(0); // let the agent's step return first, as systemd's stop comes after the call
    await this.wiring?.agent.stop();
    await setReady(this.http, this.name, false);
    await sleep(BOOT_MS);
    await rm(join(this.root, 'run'), { recursive: true, force: true });
    await setReady(this.http, this.name, true);
    this.times.ready = Date.now();
    await this.start();
  }

  async stop(): Promise<void> {
    await this.cycle;
    await this.wiring?.agent.stop();
  }
}

/** ReplicaSet, scheduler and kubelet in one: PODS pods, Running and Ready, on schedulable nodes. */
async function keepPods(http: HttpKubeClient, ns: string, stop: () => boolean): Promise<void> {
  let next = 0;
  while (!stop()) {
    const pods = await http.request<{ items: { spec: { nodeName: string } }[] }>(
      'GET',
      `/api/v1/namespaces/${ns}/pods`,
    );
    const nodes = await http.request<{
      items: { metadata: { name: string }; spec?: { unschedulable?: boolean } }[];
    }>('GET', '/api/v1/nodes', { query: { labelSelector: `bench=${ns}` } });
    const load = new Map<string, number>();
    for (const n of nodes.items) if (n.spec?.unschedulable !== true) load.set(n.metadata.name, 0);
    for (const p of pods.items) {
      if (load.has(p.spec.nodeName))
        load.set(p.spec.nodeName, (load.get(p.spec.nodeName) ?? 0) + 1);
    }
    for (let missing = PODS - pods.items.length; missing > 0 && load.size > 0; missing--) {
      const [target] = [...load].sort((a, b) => a[1] - b[1])[0] ?? [];
      if (!target) break;
      await createReadyPod(http, ns, `web-r${String(next++)}`, target);
      load.set(target, (load.get(target) ?? 0) + 1);
    }
    await sleep(200);
  }
}

/** Watches Nodes and node objects (polling) and notes when each node passed each step. */
async function sample(http: HttpKubeClient, sims: SimNode[], target: string): Promise<void> {
  const nodes = await http.request<{
    items: { metadata: { name: string }; spec?: { unschedulable?: boolean } }[];
  }>('GET', '/api/v1/nodes');
  const now = Date.now();
  for (const s of sims) {
    const t = s.times;
    const n = nodes.items.find((x) => x.metadata.name === s.name);
    const cordoned = n?.spec?.unschedulable === true;
    if (cordoned && t.cordoned === undefined) t.cordoned = now;
    const o = await http.request<OscNodeObject>('GET', `${NODES}/${s.name}`);
    if (o.spec?.revision?.checksum === target) t.granted ??= now;
    const r = o.status?.revision;
    if (r?.checksum === target && r.phase === 'Confirmed') t.confirmed ??= now;
    if (t.confirmed !== undefined && !cordoned) t.uncordoned ??= now;
  }
}

const sec = (ms: number | undefined): string =>
  ms === undefined ? '   -' : (ms / 1000).toFixed(1).padStart(5);

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[m] ?? 0) : ((s[m - 1] ?? 0) + (s[m] ?? 0)) / 2;
}

function report(sims: SimNode[], started: number): void {
  const lines = ['node        drain  apply  boot+Ready  verify  uncordon  total (s)'];
  const totals: number[] = [];
  for (const s of sims) {
    const t = s.times;
    const d = (a?: number, b?: number): number | undefined =>
      a !== undefined && b !== undefined ? b - a : undefined;
    const total = d(t.cordoned, t.uncordoned);
    if (total !== undefined) totals.push(total);
    lines.push(
      `${s.name.padEnd(10)} ${sec(d(t.cordoned, t.granted))}  ${sec(d(t.granted, t.rebootAsked))}  ${sec(d(t.rebootAsked, t.ready)).padStart(10)}  ${sec(d(t.ready, t.confirmed)).padStart(6)}  ${sec(d(t.confirmed, t.uncordoned)).padStart(8)}  ${sec(total)}`,
    );
  }
  const last = Math.max(...sims.map((s) => s.times.uncordoned ?? 0));
  const waves = Math.ceil(N / MAX_UNAVAILABLE);
  const perNode = median(totals);
  const ideal = waves * perNode;
  const actual = last - started;
  const serial = totals.reduce((a, b) => a + b, 0);
  lines.push(
    `sum of the per-node times: ${sec(serial).trim()} s; the rest of the rollout (the change rendered and granted, the hand-over between waves): ${sec(last - started - serial / MAX_UNAVAILABLE).trim()} s`,
    `per node (cordon → uncordon), median: ${sec(perNode).trim()} s (of which the simulated boot ${(BOOT_MS / 1000).toFixed(1)} s, the soak ${String(SOAK_S)} s)`,
    `rollout total: ${sec(actual).trim()} s; ideal ${String(waves)} waves × ${sec(perNode).trim()} s = ${sec(ideal).trim()} s; overhead ${(((actual - ideal) / ideal) * 100).toFixed(0)}% (${sec(actual - ideal).trim()} s)`,
  );
  process.stdout.write(`${lines.join('\n')}\n`);
}

async function setUp(http: HttpKubeClient, ns: string): Promise<void> {
  await http.request('POST', '/api/v1/namespaces', {
    body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } },
  });
  for (let i = 0; i < N; i++) {
    const name = `${ns}-n${String(i)}`;
    await http.request('POST', '/api/v1/nodes', {
      body: { apiVersion: 'v1', kind: 'Node', metadata: { name, labels: { bench: ns } } },
    });
    await setReady(http, name, true);
    for (let p = 0; p < PODS / N; p++) {
      await createReadyPod(http, ns, `web-${String(i)}-${String(p)}`, name);
    }
  }
  await createWebBudget(http, ns, PODS - 1, 1);
}

async function checksumOf(http: HttpKubeClient, ns: string, version: number): Promise<string> {
  return waitFor(`revision ${String(version)} rendered`, async () => {
    const o = await http.request<{
      status?: { checksum?: string; observedGeneration?: number };
      metadata: { generation?: number };
    }>('GET', `/apis/oscar.dev/v1alpha1/namespaces/${ns}/operatingsystemconfigs/${OSC}`);
    return o.status?.observedGeneration === o.metadata.generation ? o.status?.checksum : undefined;
  });
}

async function main(): Promise<void> {
  const cluster = await attachCluster({ log });
  const { env, api: http, kubeConfig: kc } = cluster;
  const ns = `rb-${Math.random().toString(36).slice(2, 8)}`;
  const work = await mkdtemp(join(tmpdir(), 'oscar-bench-reboot-'));
  let stopping = false;
  const sims: SimNode[] = [];
  const controller = await runController({
    kubeconfig: env.kubeconfigPath,
    namespaces: [ns],
    metricsAddr: '127.0.0.1:0',
    leaderElect: false,
    leaseDurationMs: 15_000,
    log: createLogger({ component: 'controller', level: 'error' }),
  });
  try {
    await setUp(http, ns);
    const pods = keepPods(http, ns, () => stopping);
    await applyBenchOsc(http, ns, OSC, spec(1));
    for (let i = 0; i < N; i++) {
      const s = new SimNode(`${ns}-n${String(i)}`, join(work, String(i)), kc, http, ns);
      sims.push(s);
      await s.start();
    }
    const v1 = await checksumOf(http, ns, 1);
    await waitFor(
      'every node confirmed revision 1',
      async () => {
        for (const s of sims) {
          const o = await http.request<OscNodeObject>('GET', `${NODES}/${s.name}`);
          if (o.status?.revision?.checksum !== v1 || o.status.revision.phase !== 'Confirmed')
            return false;
        }
        return true;
      },
      120_000,
    );
    log(
      `${String(N)} nodes on revision 1, ${String(PODS)} pods; rolling out a Reboot-level change`,
    );
    const started = Date.now();
    await applyBenchOsc(http, ns, OSC, spec(2));
    const v2 = await checksumOf(http, ns, 2);
    await waitFor(
      'every node drained, rebooted, confirmed and uncordoned',
      async () => {
        await sample(http, sims, v2);
        return sims.every((s) => s.times.uncordoned !== undefined);
      },
      { timeoutMs: 600_000, intervalMs: 100 },
    );
    report(sims, started);
    stopping = true;
    await pods;
  } finally {
    stopping = true;
    for (const s of sims) await s.stop().catch(() => undefined);
    await controller.stop();
    await http.request('DELETE', `/api/v1/namespaces/${ns}`).catch(() => undefined);
    for (const s of sims)
      await http.request('DELETE', `/api/v1/nodes/${s.name}`).catch(() => undefined);
    await rm(work, { recursive: true, force: true });
    await cluster.stop();
  }
}

await main();
