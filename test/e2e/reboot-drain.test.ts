// A Reboot-level rollout on two real Kubernetes nodes (issue 25, item 4): two nspawn machines
// booted from oscar's user data run kubelet and containerd (test/support/kubelet-fleet.ts). A
// change to a file declared onChange: reboot, with maxUnavailable 1: each node in turn is
// cordoned, drained, rebooted by its own agent (systemctl reboot → systemd-nspawn exits 133 → the
// harness boots the same disk again: a new boot id on the Node), Ready, confirmed and uncordoned;
// a watcher sees never both nodes cordoned. Each agent confirmed only once its Node was Ready in
// the new boot (its journal says so).
//
// Then a Reboot-level change whose health check fails after the reboot: the first node reboots
// into it, finds its Node Ready, fails the check, rolls back and reboots again into the old state
// by itself (two more boots, the old file), reports RollingBack meanwhile and RolledBack/
// HealthCheckFailed only once its Node is Ready in the boot that brought it back; the rollout
// pauses on its failure threshold and the second node is never touched. A watcher sees the first
// node never uncordoned before it was back in the old revision's boot and Ready there (issue 25:
// the controller used to uncordon it the moment it said RolledBack, before the reboot back).
//
// No pods here: the drain of real pods under a PodDisruptionBudget is test/e2e/drain-pods.test.ts's
// (the cluster with kube-scheduler and the workload controllers). The reboot is a new
// systemd-nspawn run on the same disk, not a new kernel.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RolloutStatus } from '../../api/schema.js';
import { startKubeletFleet, workerOscs, type KubeletFleet } from '../support/kubelet-fleet.js';
import { waitFor } from '../support/wait.js';
import { nodeReady, type NodeObject } from '../support/kubelet-support.js';

const id = process.pid.toString(36);
const names = [`rd-${id}-a`, `rd-${id}-b`];
const ns = `e2e-rd-${id}`;
const MARK = '/etc/oscar-e2e/boot.conf';
const OSC = 'kubelet-worker-reconcile';
let fleet: KubeletFleet | undefined;
let skipReason: string | undefined;

type NodeWithSpec = NodeObject & {
  spec?: { unschedulable?: boolean };
  status?: { nodeInfo?: { bootID?: string } };
};

/** The worker's reconcile OSC with the rollout policy and a file whose change needs a reboot. */
function rebootable(version: string, healthChecks: unknown[] = []) {
  return (spec: Record<string, unknown>): void => {
    spec.rollout = {
      maxUnavailable: 1,
      soakSeconds: 10,
      progressDeadlineSeconds: 420,
      drain: { timeoutSeconds: 300 },
      ...(healthChecks.length > 0 ? { healthChecks } : {}),
    };
    (spec.files as unknown[]).push({
      path: MARK,
      permissions: '0644',
      content: { inline: { data: `version=${version}\n` } },
      onChange: 'reboot',
    });
  };
}

beforeAll(async () => {
  const started = await startKubeletFleet({ names, namespace: ns, reconcile: rebootable('1') });
  if (typeof started === 'string') skipReason = started;
  else fleet = started;
}, 3_600_000);

afterAll(async () => {
  await fleet?.stop();
}, 300_000);

/** What the watcher saw while the rollout ran. */
interface Watch {
  bothCordoned: boolean;
  cordoned: Set<string>;
  stop: () => void;
}

/** Lists the Nodes every 500 ms: at most maxUnavailable (1) cordoned at once. */
function watchCordons(f: KubeletFleet): Watch {
  const state = { running: true };
  const w: Watch = {
    bothCordoned: false,
    cordoned: new Set(),
    stop: () => {
      state.running = false;
    },
  };
  void (async () => {
    while (state.running) {
      try {
        // one list: both Nodes as of one resourceVersion (two GETs could straddle an uncordon
        // and the next cordon and see both cordoned although they never were at once)
        const list = await f.get<{ items?: (NodeWithSpec & { metadata: { name: string } })[] }>(
          '/api/v1/nodes',
        );
        let cordoned = 0;
        for (const node of list?.items ?? []) {
          if (!names.includes(node.metadata.name) || node.spec?.unschedulable !== true) continue;
          cordoned += 1;
          w.cordoned.add(node.metadata.name);
        }
        if (cordoned > 1) w.bothCordoned = true;
      } catch {
        // the API server under load; the next poll sees it
      }
      await new Promise((r) => setTimeout(r, 500));
    }
  })();
  return w;
}

async function bootIds(f: KubeletFleet): Promise<Map<string, string>> {
  const ids = new Map<string, string>();
  for (const n of names) {
    const node = await f.get<NodeWithSpec>(`/api/v1/nodes/${n}`);
    ids.set(n, node?.status?.nodeInfo?.bootID ?? '');
  }
  return ids;
}

interface OscNodeStatus {
  status?: { revision?: { phase?: string; reason?: string; message?: string; checksum?: string } };
}

/** One look at a node during its rollback: its Node and its agent's answer. */
interface Sample {
  at: number;
  cordoned: boolean;
  bootID: string;
  ready: boolean;
  phase: string;
}

/** Looks at `name`'s Node and OperatingSystemConfigNode every 500 ms until stopped. */
function watchRollback(f: KubeletFleet, name: string): { samples: Sample[]; stop: () => void } {
  const state = { running: true };
  const samples: Sample[] = [];
  void (async () => {
    while (state.running) {
      try {
        const node = await f.get<NodeWithSpec>(`/api/v1/nodes/${name}`);
        const osc = await f.get<OscNodeStatus>(
          `/apis/oscar.dev/v1alpha1/operatingsystemconfignodes/${name}`,
        );
        samples.push({
          at: Date.now(),
          cordoned: node?.spec?.unschedulable === true,
          bootID: node?.status?.nodeInfo?.bootID ?? '',
          ready: nodeReady(node),
          phase: osc?.status?.revision?.phase ?? '',
        });
      } catch {
        // the API server under load; the next poll sees it
      }
      await new Promise((r) => setTimeout(r, 500));
    }
  })();
  return {
    samples,
    stop: () => {
      state.running = false;
    },
  };
}

/** The OSC's worker OSC edited by `edit`, applied (a new rendering, a new rollout). */
async function applyWorker(
  f: KubeletFleet,
  edit: (spec: Record<string, unknown>) => void,
): Promise<void> {
  for (const doc of await workerOscs(ns, f.images.pause, edit)) {
    if (doc.metadata.name !== OSC) continue;
    await f.apply(`/apis/oscar.dev/v1alpha1/namespaces/${ns}/operatingsystemconfigs/${OSC}`, doc);
  }
}

async function rollout(f: KubeletFleet): Promise<RolloutStatus | undefined> {
  const osc = await f.get<{ status?: { rollout?: RolloutStatus } }>(
    `/apis/oscar.dev/v1alpha1/namespaces/${ns}/operatingsystemconfigs/${OSC}`,
  );
  return osc?.status?.rollout;
}

describe('a Reboot-level rollout on two Kubernetes nodes', () => {
  it('cordons, drains, reboots, and uncordons each node in turn', async (ctx) => {
    if (skipReason || !fleet) {
      ctx.skip(skipReason ?? 'no fleet');
      return;
    }
    const f = fleet;
    const diagnose = async (): Promise<string> => {
      const parts = [JSON.stringify((await rollout(f)) ?? {})];
      for (const n of f.nodes) parts.push(await f.journals(n).catch((e: unknown) => String(e)));
      return parts.join('\n');
    };
    await waitFor(
      'the first revision Complete on both nodes',
      async () => {
        const r = await rollout(f);
        return r?.phase === 'Complete' && r.nodes.total === 2;
      },
      { timeoutMs: 300_000, intervalMs: 1000, onTimeout: diagnose },
    );
    const before = await bootIds(f);
    const boots = f.nodes.map((n) => n.boots);
    const watch = watchCordons(f);
    const t0 = Date.now();
    try {
      await applyWorker(f, rebootable('2'));
      await waitFor(
        'both nodes rebooted, Ready, uncordoned, and the rollout Complete',
        async () => {
          const after = await bootIds(f);
          for (const n of names) {
            if (!after.get(n) || after.get(n) === before.get(n)) return false;
            const node = await f.get<NodeWithSpec>(`/api/v1/nodes/${n}`);
            if (!nodeReady(node) || node?.spec?.unschedulable === true) return false;
          }
          const r = await rollout(f);
          return r?.phase === 'Complete' && r.disruption === 'Reboot' ? r : false;
        },
        { timeoutMs: 1_500_000, intervalMs: 2000, onTimeout: diagnose },
      );
    } finally {
      watch.stop();
    }
    process.stderr.write(
      `[e2e] reboot-level rollout over 2 nodes: ${String(Date.now() - t0)} ms\n`,
    );
    expect(watch.bothCordoned).toBe(false); // maxUnavailable 1
    expect([...watch.cordoned].sort()).toEqual([...names].sort()); // each was cordoned
    expect(f.nodes.map((n) => n.boots)).toEqual(boots.map((b) => b + 1)); // one reboot each
    for (const n of f.nodes) {
      expect((await n.execOk(['cat', MARK])).stdout).toBe('version=2\n');
      // the try after the reboot waited for the Node: Ready, reported by kubelet of the new boot
      const journal = await n.execOk(['journalctl', '-u', 'oscar-agent.service', '--no-pager']);
      expect(journal.stdout).toMatch(/Node \S+ Ready in this boot/);
    }
  }, 1_800_000);

  it('a health check failing after the reboot: the node rolls back and reboots into the old state itself; the rollout pauses', async (ctx) => {
    if (skipReason || !fleet) {
      ctx.skip(skipReason ?? 'no fleet');
      return;
    }
    const f = fleet;
    // the rollout grants pending nodes by name: names[0] first
    const [firstName, secondName] = names as [string, string];
    const first = f.nodes.find((n) => n.name === firstName);
    const second = f.nodes.find((n) => n.name === secondName);
    if (!first || !second) throw new Error(`the fleet has no node ${firstName} or ${secondName}`);
    const at = f.nodes.indexOf(first);
    const bt = f.nodes.indexOf(second);
    const diagnose = async (): Promise<string> => {
      const parts = [JSON.stringify((await rollout(f)) ?? {})];
      for (const n of f.nodes) parts.push(await f.journals(n).catch((e: unknown) => String(e)));
      return parts.join('\n');
    };
    await waitFor(
      'the previous rollout Complete',
      async () => (await rollout(f))?.phase === 'Complete',
      {
        timeoutMs: 300_000,
        intervalMs: 1000,
        onTimeout: diagnose,
      },
    );
    const boots = f.nodes.map((n) => n.boots);
    // a file that is never there: the check fails on the node after its reboot, 2 times in a row
    const failing = {
      name: 'after-boot',
      exec: { command: ['/usr/bin/test', '-e', '/etc/oscar-e2e/never-there'] },
      periodSeconds: 2,
      failureThreshold: 2,
    };
    const oldBoot = (await bootIds(f)).get(firstName) ?? '';
    const watch = watchRollback(f, firstName);
    await applyWorker(f, rebootable('3', [failing]));
    const oscNode = (n: string) =>
      f.get<OscNodeStatus>(`/apis/oscar.dev/v1alpha1/operatingsystemconfignodes/${n}`);
    let paused;
    try {
      paused = await waitFor(
        'the first node rolled back (rebooted twice), uncordoned, and the rollout paused',
        async () => {
          if (first.boots < (boots[at] ?? 0) + 2) return false;
          const node = await f.get<NodeWithSpec>(`/api/v1/nodes/${firstName}`);
          if (!nodeReady(node) || node?.spec?.unschedulable === true) return false;
          const report = (await oscNode(firstName))?.status?.revision;
          if (report?.phase !== 'RolledBack') return false;
          const r = await rollout(f);
          return r?.phase === 'Paused' && r.pauseReason === 'FailureThreshold'
            ? { r, report, bootID: node?.status?.nodeInfo?.bootID ?? '' }
            : false;
        },
        { timeoutMs: 1_500_000, intervalMs: 2000, onTimeout: diagnose },
      );
      const taken = watch.samples.length; // and the watcher's own look after that
      await waitFor('the watcher sees the node once more', () => watch.samples.length > taken, {
        timeoutMs: 120_000,
        intervalMs: 200,
      });
    } finally {
      watch.stop();
    }
    expect(paused.report).toMatchObject({ phase: 'RolledBack', reason: 'HealthCheckFailed' });
    expect(paused.report.message).toContain('after-boot');
    expect(paused.report.message).toContain('back in the previous revision after a reboot');
    // the watcher: cordoned from the drain until the node was back in a boot of its own (neither
    // the one before the rollout nor the try's) and Ready there; RollingBack all the while
    const seen = watch.samples;
    const cordonedAt = seen.findIndex((x) => x.cordoned);
    expect(cordonedAt).toBeGreaterThanOrEqual(0);
    const after = seen.slice(cordonedAt);
    const uncordonedAt = after.findIndex((x) => !x.cordoned);
    const uncordoned = after.slice(Math.max(0, uncordonedAt));
    expect(uncordonedAt).toBeGreaterThan(0);
    expect(paused.bootID).not.toBe(oldBoot);
    for (const x of uncordoned) {
      expect(x).toMatchObject({ cordoned: false, bootID: paused.bootID, ready: true });
      expect(x.phase).toBe('RolledBack');
    }
    const rollingBack = after.filter((x) => x.phase === 'RollingBack');
    expect(rollingBack.length).toBeGreaterThan(0); // the reboot back takes seconds; polled 500 ms
    expect(rollingBack.every((x) => x.cordoned)).toBe(true);
    const tryBoots = new Set(after.map((x) => x.bootID).filter((b) => b !== oldBoot));
    expect(tryBoots.size).toBeGreaterThanOrEqual(2); // the try's boot, then the old state's
    const backFor = (uncordoned[0]?.at ?? 0) - (rollingBack[0]?.at ?? 0);
    process.stderr.write(
      `[e2e] rollback watcher: ${String(seen.length)} samples, ${String(rollingBack.length)} RollingBack, boots ${[...tryBoots].map((b) => b.slice(0, 8)).join(' → ')}; first RollingBack → uncordoned ${String(backFor)} ms (the old rule uncordoned at the first)\n`,
    );
    // its agent waited for the Node in the old state's boot before saying RolledBack
    const journal = await first.execOk(['journalctl', '-u', 'oscar-agent.service', '--no-pager']);
    expect(journal.stdout).toMatch(/after the reboot back/);
    expect(paused.r.nodes).toMatchObject({ rolledBack: 1, updated: 0 });
    expect(paused.r.disruption).toBe('Reboot');
    // into the revision and back: two boots; the old file, by the node itself
    expect(first.boots).toBe((boots[at] ?? 0) + 2);
    expect((await first.execOk(['cat', MARK])).stdout).toBe('version=2\n');
    // the second node was never granted the failing revision
    expect(second.boots).toBe(boots[bt]);
    expect((await second.execOk(['cat', MARK])).stdout).toBe('version=2\n');
    const node = await f.get<NodeWithSpec>(`/api/v1/nodes/${secondName}`);
    expect(node?.spec?.unschedulable).not.toBe(true);
  }, 1_800_000);
});
