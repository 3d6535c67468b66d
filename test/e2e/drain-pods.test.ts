// A Reboot-level rollout over two real Kubernetes nodes that run pods (issue 25, item 4): two
// nspawn machines booted from oscar's user data run kubelet and containerd
// (test/support/kubelet-fleet.ts) under a cluster with kube-scheduler and the Deployment,
// ReplicaSet and disruption controllers. A Deployment of 2 (the local busybox image,
// imagePullPolicy Never, hostNetwork: the machines share the host's network) spread over both
// nodes, and a PodDisruptionBudget:
// 1. maxUnavailable 1 → each node in turn is cordoned, its pods are evicted through the Eviction
//    API and scheduled again on the other node, the node reboots, comes back and is uncordoned;
//    a watcher never sees fewer than 1 Ready pod (the budget held) nor both nodes cordoned;
// 2. minAvailable 2 (= replicas): no eviction is allowed → the drain is Blocked, the OSC's status
//    and a DrainBlocked Event name the pod and the budget; relaxing the budget to maxUnavailable 1
//    lets the rollout finish, every node uncordoned.
// The reboot is a new systemd-nspawn run on the same disk, not a new kernel (docs/testing.md).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RolloutStatus } from '../../api/schema.js';
import { startKubeletFleet, workerOscs, type KubeletFleet } from '../support/kubelet-fleet.js';
import { waitFor } from '../support/wait.js';
import { nodeReady, type NodeObject } from '../support/kubelet-support.js';

const id = process.pid.toString(36);
const names = [`dp-${id}-a`, `dp-${id}-b`];
const ns = `e2e-dp-${id}`;
const MARK = '/etc/oscar-e2e/boot.conf';
const OSC = 'kubelet-worker-reconcile';
const OSC_PATH = `/apis/oscar.dev/v1alpha1/namespaces/${ns}/operatingsystemconfigs/${OSC}`;
const APP = 'web';
const REPLICAS = 2;
const PDB_PATH = `/apis/policy/v1/namespaces/${ns}/poddisruptionbudgets/${APP}`;
/** Short, so the second run's blocked drain is reported (Blocked) soon. */
const DRAIN_TIMEOUT_S = 20;
let fleet: KubeletFleet | undefined;
let skipReason: string | undefined;

type NodeWithSpec = NodeObject & { spec?: { unschedulable?: boolean } };

interface Pod {
  metadata: { name: string; uid: string; deletionTimestamp?: string };
  spec?: { nodeName?: string };
  status?: { phase?: string; conditions?: { type: string; status: string }[] };
}

/** The worker's reconcile OSC with the rollout policy and a file whose change needs a reboot. */
function rebootable(version: string) {
  return (spec: Record<string, unknown>): void => {
    spec.rollout = {
      maxUnavailable: 1,
      soakSeconds: 5,
      progressDeadlineSeconds: 900,
      drain: { timeoutSeconds: DRAIN_TIMEOUT_S },
    };
    (spec.files as unknown[]).push({
      path: MARK,
      permissions: '0644',
      content: { inline: { data: `version=${version}\n` } },
      onChange: 'reboot',
    });
  };
}

function deployment(image: string): Record<string, unknown> {
  const labels = { app: APP };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: APP, namespace: ns },
    spec: {
      replicas: REPLICAS,
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          hostNetwork: true,
          terminationGracePeriodSeconds: 2,
          // one pod per node while both are schedulable; a drained node's pod may join the other
          topologySpreadConstraints: [
            {
              maxSkew: 1,
              topologyKey: 'kubernetes.io/hostname',
              whenUnsatisfiable: 'ScheduleAnyway',
              labelSelector: { matchLabels: labels },
            },
          ],
          containers: [
            {
              name: 'sleep',
              image,
              imagePullPolicy: 'Never',
              command: ['/bin/sleep', '100000'],
            },
          ],
        },
      },
    },
  };
}

function budget(spec: { minAvailable: number } | { maxUnavailable: number }) {
  return {
    apiVersion: 'policy/v1',
    kind: 'PodDisruptionBudget',
    metadata: { name: APP, namespace: ns },
    spec: { ...spec, selector: { matchLabels: { app: APP } } },
  };
}

beforeAll(async () => {
  const started = await startKubeletFleet({
    names,
    namespace: ns,
    workloads: true,
    reconcile: rebootable('1'),
  });
  if (typeof started === 'string') skipReason = started;
  else fleet = started;
}, 3_600_000);

afterAll(async () => {
  await fleet?.stop();
}, 300_000);

async function pods(f: KubeletFleet): Promise<Pod[]> {
  const list = await f.api.request<{ items: Pod[] }>('GET', `/api/v1/namespaces/${ns}/pods`, {
    query: { labelSelector: `app=${APP}` },
  });
  return list.items;
}

const ready = (p: Pod): boolean =>
  p.metadata.deletionTimestamp === undefined &&
  p.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';

async function rollout(f: KubeletFleet): Promise<RolloutStatus | undefined> {
  const osc = await f.get<{ status?: { rollout?: RolloutStatus } }>(OSC_PATH);
  return osc?.status?.rollout;
}

/** What the watcher saw while a rollout ran. */
interface Watch {
  minReady: number;
  bothCordoned: boolean;
  cordoned: Set<string>;
  /** Every pod UID seen, with the node it ran on. */
  seen: Map<string, string>;
  /** Per node, when (Date.now()) it was first seen cordoned, empty of the app's pods, uncordoned. */
  times: Map<string, { cordoned: number; empty?: number; uncordoned?: number }>;
  stop: () => Promise<void>;
}

/** A node's drain as the watcher saw it: cordon → no pod of the app left → uncordon. */
function track(w: Watch, node: string, cordoned: boolean, podsOnNode: number): void {
  const t = w.times.get(node);
  const now = Date.now();
  if (t === undefined) {
    if (cordoned) w.times.set(node, { cordoned: now, ...(podsOnNode === 0 ? { empty: now } : {}) });
    return;
  }
  if (t.empty === undefined && podsOnNode === 0) t.empty = now;
  if (t.uncordoned === undefined && !cordoned) t.uncordoned = now;
}

/** "node: drain X s, cordon → uncordon Y s" per node, for the log. */
function timings(w: Watch): string {
  const s = (ms: number | undefined): string => (ms === undefined ? '?' : (ms / 1000).toFixed(1));
  return [...w.times]
    .map(
      ([n, t]) =>
        `${n}: drain ${s(t.empty === undefined ? undefined : t.empty - t.cordoned)} s, cordon → uncordon ${s(t.uncordoned === undefined ? undefined : t.uncordoned - t.cordoned)} s`,
    )
    .join('; ');
}

/** Polls pods and Nodes every 300 ms until stopped. */
function watch(f: KubeletFleet): Watch {
  const state = { running: true };
  const w: Watch = {
    minReady: Number.POSITIVE_INFINITY,
    bothCordoned: false,
    cordoned: new Set(),
    seen: new Map(),
    times: new Map(),
    stop: async () => {
      state.running = false;
      await loop;
    },
  };
  const poll = async (): Promise<void> => {
    const all = await pods(f);
    w.minReady = Math.min(w.minReady, all.filter(ready).length);
    for (const p of all) if (p.spec?.nodeName) w.seen.set(p.metadata.uid, p.spec.nodeName);
    let cordoned = 0;
    for (const n of names) {
      const isCordoned =
        (await f.get<NodeWithSpec>(`/api/v1/nodes/${n}`))?.spec?.unschedulable === true;
      if (isCordoned) {
        cordoned += 1;
        w.cordoned.add(n);
      }
      track(w, n, isCordoned, all.filter((p) => p.spec?.nodeName === n).length);
    }
    if (cordoned > 1) w.bothCordoned = true;
  };
  const loop = (async () => {
    while (state.running) {
      await poll().catch(() => undefined); // the API server under load: the next poll sees it
      await new Promise((r) => setTimeout(r, 300));
    }
  })();
  return w;
}

async function applyRevision(f: KubeletFleet, version: string): Promise<void> {
  for (const doc of await workerOscs(ns, f.images.pause, rebootable(version))) {
    if (doc.metadata.name === OSC) await f.apply(OSC_PATH, doc);
  }
}

/** Both nodes Ready and schedulable, the rollout Complete at Reboot level, 2 pods Ready. */
async function settled(f: KubeletFleet): Promise<boolean> {
  for (const n of names) {
    const node = await f.get<NodeWithSpec>(`/api/v1/nodes/${n}`);
    if (!nodeReady(node) || node?.spec?.unschedulable === true) return false;
  }
  const r = await rollout(f);
  if (r?.phase !== 'Complete' || r.disruption !== 'Reboot') return false;
  return (await pods(f)).filter(ready).length === REPLICAS;
}

function diagnose(f: KubeletFleet) {
  return async (): Promise<string> => {
    const parts = [JSON.stringify((await rollout(f)) ?? {})];
    parts.push(
      (await pods(f))
        .map((p) => `${p.metadata.name} ${p.spec?.nodeName ?? '-'} ${p.status?.phase ?? '?'}`)
        .join('\n'),
    );
    for (const n of f.nodes) parts.push(await f.journals(n).catch((e: unknown) => String(e)));
    return parts.join('\n');
  };
}

describe('a Reboot-level rollout over two nodes running a Deployment under a PDB', () => {
  it('evicts and reschedules the pods, never below the budget, then waits on a budget that allows nothing', async (ctx) => {
    if (skipReason || !fleet) {
      ctx.skip(skipReason ?? 'no fleet');
      return;
    }
    const f = fleet;
    await waitFor(
      'the first revision Complete on both nodes',
      async () => {
        const r = await rollout(f);
        return r?.phase === 'Complete' && r.nodes.total === 2;
      },
      { timeoutMs: 300_000, intervalMs: 1000, onTimeout: diagnose(f) },
    );
    await f.apply(
      `/apis/apps/v1/namespaces/${ns}/deployments/${APP}`,
      deployment(f.images.busybox),
    );
    await f.apply(PDB_PATH, budget({ maxUnavailable: 1 }));
    const t0 = Date.now();
    const first = await waitFor(
      `${String(REPLICAS)} pods Ready, one on each node`,
      async () => {
        const all = (await pods(f)).filter(ready);
        const on = new Set(all.map((p) => p.spec?.nodeName));
        return all.length === REPLICAS && on.size === 2 ? all : false;
      },
      { timeoutMs: 180_000, intervalMs: 500, onTimeout: diagnose(f) },
    );
    process.stderr.write(`[e2e] Deployment of 2 Ready in ${String(Date.now() - t0)} ms\n`);

    // 1. the budget allows one pod down at a time
    const boots = f.nodes.map((n) => n.boots);
    const w1 = watch(f);
    const t1 = Date.now();
    try {
      await applyRevision(f, '2');
      await waitFor(
        'the rollout Complete, both nodes back and uncordoned, 2 pods Ready',
        () => settled(f),
        { timeoutMs: 1_500_000, intervalMs: 2000, onTimeout: diagnose(f) },
      );
    } finally {
      await w1.stop();
    }
    process.stderr.write(
      `[e2e] reboot-level rollout with evictions over 2 nodes: ${String(Date.now() - t1)} ms (${timings(w1)})\n`,
    );
    expect(w1.minReady).toBeGreaterThanOrEqual(REPLICAS - 1); // the PDB was never violated
    expect(w1.bothCordoned).toBe(false); // maxUnavailable 1
    expect([...w1.cordoned].sort()).toEqual([...names].sort());
    expect(f.nodes.map((n) => n.boots)).toEqual(boots.map((b) => b + 1));
    const now = await pods(f);
    for (const p of first) {
      // every pod of before was evicted (a drained node keeps none), replaced by new ones
      expect(now.map((q) => q.metadata.uid)).not.toContain(p.metadata.uid);
    }
    expect(w1.seen.size).toBeGreaterThanOrEqual(REPLICAS + 2);

    // 2. the budget allows no pod down: the drain waits and says why
    await f.apply(PDB_PATH, budget({ minAvailable: REPLICAS }));
    await waitFor(
      'the budget to allow no disruption',
      async () =>
        (await f.get<{ status?: { disruptionsAllowed?: number } }>(PDB_PATH))?.status
          ?.disruptionsAllowed === 0,
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    const w2 = watch(f);
    try {
      await applyRevision(f, '3');
      const blocked = await waitFor(
        'a drain Blocked by the budget',
        async () =>
          (await rollout(f))?.drains?.find(
            (d) => d.phase === 'Blocked' && d.podDisruptionBudget === `${ns}/${APP}`,
          ),
        { timeoutMs: 600_000, intervalMs: 1000, onTimeout: diagnose(f) },
      );
      expect(blocked.pod).toMatch(new RegExp(`^${ns}/${APP}-`));
      expect(blocked.message).toContain(`PodDisruptionBudget ${ns}/${APP}`);
      const event = await waitFor(
        'a DrainBlocked Event',
        async () =>
          (
            await f.api.request<{ items: { message?: string }[] }>(
              'GET',
              `/api/v1/namespaces/${ns}/events`,
              { query: { fieldSelector: 'reason=DrainBlocked' } },
            )
          ).items[0],
        { timeoutMs: 60_000, intervalMs: 1000 },
      );
      expect(event.message).toContain(`PodDisruptionBudget ${ns}/${APP}`);
      expect(event.message).toContain(blocked.pod ?? '');
      expect(w2.minReady).toBe(REPLICAS); // nothing was evicted while it waited
      expect((await rollout(f))?.phase).not.toBe('Complete');

      await f.apply(PDB_PATH, budget({ maxUnavailable: 1 }));
      await waitFor('the rollout Complete after the budget is relaxed', () => settled(f), {
        timeoutMs: 1_500_000,
        intervalMs: 2000,
        onTimeout: diagnose(f),
      });
    } finally {
      await w2.stop();
    }
    process.stderr.write(
      `[e2e] second rollout (blocked by the budget, then relaxed): ${timings(w2)}\n`,
    );
    expect(w2.bothCordoned).toBe(false);
    expect(w2.minReady).toBeGreaterThanOrEqual(REPLICAS - 1);
    for (const n of f.nodes) {
      expect((await n.execOk(['cat', MARK])).stdout).toBe('version=3\n');
    }
  }, 3_000_000);
});
