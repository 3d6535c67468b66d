// A Reboot-level rollout against the real API server (issue 25): the real controller (OSC and
// rollout controllers, with its drainer) and two real grant-mode agents, each its own
// least-privilege identity, on Nodes with pods under a PodDisruptionBudget (minAvailable 1) that
// kube-controller-manager's disruption controller keeps and the Eviction API enforces. The first
// node is cordoned, drained (its pod evicted: the budget allows one), granted the revision with
// disruption Reboot, confirms it and is uncordoned; the second node's last pod is protected by the
// budget, so the rollout waits and names the pod and the PDB. (The agents run on directory roots,
// which never reboot: the reboot itself is the node e2e's and agent/rollout's tests' — except the
// node that never comes back from its reboot back, whose root "reboots" once: a new agent, /run
// emptied.)
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type {
  OperatingSystemConfigSpec,
  RevisionGrant,
  RolloutPolicy,
  RolloutStatus,
} from '../../api/schema.js';
import { ANNOTATION_CORDONED } from '../../controller/drain/drainer.js';
import { Api, startController, waitFor } from './controller-support.js';
import { createTestNamespace, kubectl, skipWithoutCluster, uniqueName } from './support/cluster.js';
import { startGrantAgents } from './support/grant-agents.js';
import {
  createNode,
  createReadyPod,
  createWebBudget,
  podsOn,
  type WorkloadObject,
} from './support/workloads.js';

skipWithoutCluster();

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

const OSC = 'w';

function spec(kernelArgs: string, rollout: RolloutPolicy): OperatingSystemConfigSpec {
  return {
    type: 'debian',
    purpose: 'reconcile',
    files: [
      {
        path: '/etc/default/grub.d/50-oscar.cfg',
        content: { inline: { data: `GRUB_CMDLINE_LINUX="${kernelArgs}"\n` } },
        onChange: 'reboot',
      },
    ],
    rollout,
  };
}

describe('a Reboot-level rollout drains each node first', () => {
  it('cordons, evicts within the PDB, grants with disruption Reboot, uncordons on confirm; a PDB that cannot allow the last pod blocks the next node and is named', async () => {
    const ns = await createTestNamespace('rodrain');
    const api = new Api();
    const admin = api.http;
    const prefix = uniqueName('rd').slice(0, 7);
    const names = [`${prefix}-0`, `${prefix}-1`];
    for (const n of names) cleanups.push(await createNode(admin, n));
    await createReadyPod(admin, ns, 'web-0', names[0]!);
    await createReadyPod(admin, ns, 'web-1', names[1]!);
    await createWebBudget(admin, ns, 1, 1);

    const controller = await startController([ns]);
    cleanups.push(controller.stop);
    const agents = await startGrantAgents({
      namespace: ns,
      osc: OSC,
      names,
      cleanups,
      rootPrefix: 'oscar-rollout-drain-',
    });
    const roots = agents.map((x) => x.root);
    const policy: RolloutPolicy = {
      maxUnavailable: 1,
      soakSeconds: 1,
      progressDeadlineSeconds: 30,
      drain: { timeoutSeconds: 4 },
    };
    const rollout = async (): Promise<RolloutStatus | undefined> =>
      (await api.getOsc(ns, OSC))?.status?.rollout;

    // revision 1: the first, granted at once, no drain
    await api.applyOsc(ns, OSC, spec('quiet', policy));
    await waitFor(
      'revision 1 complete',
      async () => {
        const r = await rollout();
        return r?.phase === 'Complete' && r.nodes.total === 2 ? r : undefined;
      },
      90_000,
    );
    expect(await podsOn(admin, names[0]!)).toEqual(['web-0']);

    // revision 2 changes a file declared onChange: reboot
    await api.applyOsc(ns, OSC, spec('quiet mitigations=auto', policy));
    const oscnode = (n: string) =>
      admin.request<{ spec?: { revision?: RevisionGrant } }>(
        'GET',
        `/apis/oscar.dev/v1alpha1/operatingsystemconfignodes/${n}`,
      );
    const node = (n: string) => admin.request<WorkloadObject>('GET', `/api/v1/nodes/${n}`);
    const diagnose = async (): Promise<string> =>
      JSON.stringify({
        rollout: await rollout(),
        nodes: await Promise.all(names.map(oscnode)),
        logs: controller.logs.filter((l) => /drain|rollout|error/i.test(l)).slice(-20),
      });
    // node 0: drained (the budget allows one), granted with the level, confirmed, uncordoned
    await waitFor(
      'node 0 confirmed revision 2 and uncordoned',
      async () => {
        const r = await rollout();
        const n0 = await node(names[0]!);
        return r?.nodes.updated === 1 && n0.spec?.unschedulable !== true ? r : undefined;
      },
      { timeoutMs: 90_000, onTimeout: diagnose },
    );
    expect((await oscnode(names[0]!)).spec?.revision).toMatchObject({
      number: 2,
      disruption: 'Reboot',
    });
    expect(await podsOn(admin, names[0]!)).toEqual([]); // evicted
    expect((await node(names[0]!)).metadata.annotations?.[ANNOTATION_CORDONED]).toBeUndefined();
    expect(await readFile(join(roots[0]!, 'etc/default/grub.d/50-oscar.cfg'), 'utf8')).toContain(
      'mitigations=auto',
    );

    // node 1: web-1 is the budget's last healthy pod — the eviction is refused, the drain blocks
    const blocked = await waitFor(
      'node 1 blocked by the PDB',
      async () => {
        const r = await rollout();
        const d = r?.drains?.find((x) => x.node === names[1]);
        return d?.phase === 'Blocked' ? { r, d } : undefined;
      },
      60_000,
    );
    expect(blocked.d).toMatchObject({
      revision: 2,
      pod: `${ns}/web-1`,
      podDisruptionBudget: `${ns}/web`,
    });
    expect(blocked.r?.disruption).toBe('Reboot');
    expect(blocked.r?.phase).toBe('Progressing');
    expect(await podsOn(admin, names[1]!)).toEqual(['web-1']); // the PDB was never violated
    expect((await node(names[1]!)).spec?.unschedulable).toBe(true);
    expect((await oscnode(names[1]!)).spec?.revision?.number).toBe(1); // not granted
    const events = await kubectl(['get', 'events', '-n', ns, '-o', 'json']);
    expect(events.stdout).toContain('DrainBlocked');
    expect(events.stdout).toContain(`PodDisruptionBudget ${ns}/web`);
  });

  it('a node that never comes back from its reboot: counted failed after its deadline, the rollout paused, the next node not granted', async () => {
    const ns = await createTestNamespace('rolost');
    const api = new Api();
    const admin = api.http;
    const prefix = uniqueName('rl').slice(0, 7);
    const names = [`${prefix}-0`, `${prefix}-1`];
    for (const n of names) cleanups.push(await createNode(admin, n));
    const controller = await startController([ns]);
    cleanups.push(controller.stop);
    await startGrantAgents({
      namespace: ns,
      osc: OSC,
      names,
      cleanups,
      rootPrefix: 'oscar-rollout-drain-',
      lost: [names[0]!],
    });
    const policy: RolloutPolicy = {
      maxUnavailable: 1,
      soakSeconds: 1,
      progressDeadlineSeconds: 5,
      drain: { timeoutSeconds: 30 },
    };
    const rollout = async (): Promise<RolloutStatus | undefined> =>
      (await api.getOsc(ns, OSC))?.status?.rollout;
    await api.applyOsc(ns, OSC, spec('quiet', policy));
    await waitFor(
      'revision 1 complete',
      async () => {
        const r = await rollout();
        return r?.phase === 'Complete' && r.nodes.total === 2 ? r : undefined;
      },
      90_000,
    );

    await api.applyOsc(ns, OSC, spec('quiet mitigations=auto', policy));
    const oscnode = (n: string) =>
      admin.request<{
        spec?: { revision?: RevisionGrant };
        status?: { revision?: { phase?: string; reason?: string; number?: number } };
      }>('GET', `/apis/oscar.dev/v1alpha1/operatingsystemconfignodes/${n}`);
    // node 0 is granted the Reboot-level revision, asks for its reboot and is gone
    await waitFor(
      'node 0 rebooting',
      async () => {
        const r = (await oscnode(names[0]!)).status?.revision;
        return r?.number === 2 && r.reason === 'Rebooting' ? r : undefined;
      },
      60_000,
    );
    const gone = Date.now();
    const paused = await waitFor(
      'the rollout paused on the lost node',
      async () => {
        const r = await rollout();
        return r?.phase === 'Paused' ? r : undefined;
      },
      {
        // grant + (deadline 5 s + soak 1 s) + the controller's 60 s grace, on a loaded machine
        timeoutMs: 180_000,
        onTimeout: async () => JSON.stringify(await rollout()),
      },
    );
    // not before the deadline and grace: the controller waited for an answer
    expect(Date.now() - gone).toBeGreaterThan(60_000);
    expect(paused).toMatchObject({
      pauseReason: 'FailureThreshold',
      disruption: 'Reboot',
      nodes: { failed: 1, rolledBack: 0, updated: 0 },
    });
    const events = await kubectl(['get', 'events', '-n', ns, '-o', 'json']);
    expect(events.stdout).toContain('NodeFailed');
    expect(events.stdout).toContain(`Node ${names[0]!} did not confirm revision 2 by its deadline`);
    // the lost node stays what it was: Verifying its reboot, cordoned for a person to look at
    expect((await oscnode(names[0]!)).status?.revision).toMatchObject({
      phase: 'Verifying',
      reason: 'Rebooting',
    });
    const node = (n: string) => admin.request<WorkloadObject>('GET', `/api/v1/nodes/${n}`);
    expect((await node(names[0]!)).spec?.unschedulable).toBe(true);
    // the next node was neither drained nor granted: the lost one held the only place
    expect((await oscnode(names[1]!)).spec?.revision?.number).toBe(1);
    expect((await node(names[1]!)).spec?.unschedulable).not.toBe(true);
  }, 300_000);

  it('a node that never comes back from its reboot back: RollingBack, then after deadline, soak and grace counted failed with NodeRollbackTimedOut; it stays cordoned', async () => {
    const ns = await createTestNamespace('roback');
    const api = new Api();
    const admin = api.http;
    const prefix = uniqueName('rb').slice(0, 7);
    const names = [`${prefix}-0`, `${prefix}-1`];
    // Nodes without a Ready condition: after its reboot node 0 is never Ready, its try rolls back
    for (const n of names) cleanups.push(await createNode(admin, n));
    const controller = await startController([ns]);
    cleanups.push(controller.stop);
    await startGrantAgents({
      namespace: ns,
      osc: OSC,
      names,
      cleanups,
      rootPrefix: 'oscar-rollout-back-',
      lostOnTheWayBack: [names[0]!],
    });
    const policy: RolloutPolicy = {
      maxUnavailable: 1,
      soakSeconds: 1,
      progressDeadlineSeconds: 5,
      drain: { timeoutSeconds: 30 },
    };
    const rollout = async (): Promise<RolloutStatus | undefined> =>
      (await api.getOsc(ns, OSC))?.status?.rollout;
    await api.applyOsc(ns, OSC, spec('quiet', policy));
    await waitFor(
      'revision 1 complete',
      async () => {
        const r = await rollout();
        return r?.phase === 'Complete' && r.nodes.total === 2 ? r : undefined;
      },
      90_000,
    );
    await api.applyOsc(ns, OSC, spec('quiet mitigations=auto', policy));
    const report = async (n: string) =>
      (
        await admin.request<{ status?: { revision?: { phase?: string; reason?: string } } }>(
          'GET',
          `/apis/oscar.dev/v1alpha1/operatingsystemconfignodes/${n}`,
        )
      ).status?.revision;
    // rebooted into the try, never Ready there: rolled back, rebooting back — and gone
    await waitFor(
      'node 0 rebooting back',
      async () => ((await report(names[0]!))?.phase === 'RollingBack' ? true : undefined),
      90_000,
    );
    const gone = Date.now();
    const seen = await waitFor(
      'the controller sees it rebooting back',
      async () => {
        const r = await rollout();
        return r?.nodes.rollingBack === 1 && r.drains?.[0]?.rollingBackSince ? r : undefined;
      },
      60_000,
    );
    expect(seen.nodes).toMatchObject({ rolledBack: 1, rollingBack: 1 });
    const timedOut = await waitFor(
      'the rollback counted failed by its deadline',
      async () => {
        const r = await rollout();
        return r?.nodes.rolledBack === 0 && r.nodes.failed === 1 ? r : undefined;
      },
      {
        // seen + (deadline 5 s + soak 1 s) + the controller's 60 s grace, on a loaded machine
        timeoutMs: 240_000,
        onTimeout: async () => JSON.stringify(await rollout()),
      },
    );
    expect(Date.now() - gone).toBeGreaterThan(60_000); // not before deadline and grace
    expect(timedOut).toMatchObject({ phase: 'Paused', nodes: { rollingBack: 1, updated: 0 } });
    expect(timedOut.drains?.map((d) => d.node)).toEqual([names[0]]);
    const events = await waitFor('the NodeRollbackTimedOut Event', async () => {
      const out = (await kubectl(['get', 'events', '-n', ns, '-o', 'json'])).stdout;
      return out.includes('NodeRollbackTimedOut') ? out : undefined;
    });
    expect(events).toContain(
      `Node ${names[0]!} rolled back revision 2 and has not come back from its reboot into its previous revision by its deadline`,
    );
    const node = (n: string) => admin.request<WorkloadObject>('GET', `/api/v1/nodes/${n}`);
    expect((await node(names[0]!)).spec?.unschedulable).toBe(true); // for a person to look at
    expect((await report(names[0]!))?.phase).toBe('RollingBack');
    expect((await node(names[1]!)).spec?.unschedulable).not.toBe(true);
  }, 400_000);
});
