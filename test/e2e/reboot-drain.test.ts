// A Reboot-level rollout on two real Kubernetes nodes (issue 25, item 4): two nspawn machines
// booted from oscar's user data run kubelet and containerd (test/support/kubelet-fleet.ts). A
// change to a file declared onChange: reboot, with maxUnavailable 1: each node in turn is
// cordoned, drained, rebooted by its own agent (systemctl reboot → systemd-nspawn exits 133 → the
// harness boots the same disk again: a new boot id on the Node), Ready, confirmed and uncordoned;
// a watcher sees never both nodes cordoned.
//
// Not yet here: pods. The images are built and imported (test/support/images.ts), but runc cannot
// start a container inside an nspawn machine on this host (docs/testing.md, "Pods on the nodes"),
// so the drain has nothing to evict; the PDB rules are proven against the real API server in
// test/integration/rollout-drain.test.ts. The reboot is a new systemd-nspawn run on the same
// disk, not a new kernel.
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
function rebootable(version: string) {
  return (spec: Record<string, unknown>): void => {
    spec.rollout = {
      maxUnavailable: 1,
      soakSeconds: 10,
      progressDeadlineSeconds: 420,
      drain: { timeoutSeconds: 300 },
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

/** Polls the Nodes every 500 ms: at most maxUnavailable (1) cordoned at once. */
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
        let cordoned = 0;
        for (const n of names) {
          const node = await f.get<NodeWithSpec>(`/api/v1/nodes/${n}`);
          if (node?.spec?.unschedulable === true) {
            cordoned += 1;
            w.cordoned.add(n);
          }
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
      for (const doc of await workerOscs(ns, f.images.pause, rebootable('2'))) {
        if (doc.metadata.name !== OSC) continue;
        await f.apply(
          `/apis/oscar.dev/v1alpha1/namespaces/${ns}/operatingsystemconfigs/${OSC}`,
          doc,
        );
      }
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
    }
  }, 1_800_000);
});
