// Rollouts against the real API server: the real controller (OSC and rollout controllers) and 20
// real grant-mode agents (followGrants: the grant source, the node reporter, try mode with real
// health checks) — each as its own least-privilege identity (deploy/agent-rbac.yaml), each
// applying into its own directory root. A watch on every OperatingSystemConfigNode records each
// status change and checks maxUnavailable at every one of them.
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type {
  OperatingSystemConfigNode,
  OperatingSystemConfigSpec,
  RolloutPolicy,
  RolloutStatus,
} from '../../api/schema.js';
import { rolloutResume, rolloutUndo } from '../../cli/commands/rollout.js';
import { CONTENT_MERGE_PATCH, HttpKubeClient } from '../../kube/client.js';
import { Api, startController, waitFor } from './controller-support.js';
import {
  createTestNamespace,
  kubeconfigPathFor,
  kubectl,
  skipWithoutCluster,
  testEnvInfo,
  uniqueName,
} from './support/cluster.js';
import { startGrantAgents, type GrantAgent } from './support/grant-agents.js';

skipWithoutCluster();

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

const NODES = '/apis/oscar.dev/v1alpha1/operatingsystemconfignodes';
const OSC = 'w';

function spec(version: string, rollout: RolloutPolicy): OperatingSystemConfigSpec {
  return {
    type: 'debian',
    purpose: 'reconcile',
    files: [{ path: '/etc/app/app.conf', content: { inline: { data: `version ${version}\n` } } }],
    units: [
      {
        name: 'app.service',
        filePaths: ['/etc/app/app.conf'],
        content:
          '[Unit]\nDescription=app\n\n[Service]\nExecStart=/bin/sleep infinity\n\n[Install]\nWantedBy=multi-user.target\n',
      },
    ],
    rollout,
  };
}

/** n grant-mode agents for ns/OSC, each with its own identity and root. */
function fleet(ns: string, n: number, prefix: string): Promise<GrantAgent[]> {
  const names = Array.from({ length: n }, (_, i) => `${prefix}-${String(i).padStart(2, '0')}`);
  return startGrantAgents({
    namespace: ns,
    osc: OSC,
    names,
    cleanups,
    rootPrefix: 'oscar-rollout-it-',
  });
}

/** Every status change of every node, with the unavailable count right after it. */
class NodeWatch {
  nodes = new Map<string, OperatingSystemConfigNode>();
  maxInFlight = 0;
  events = 0;
  private abort = new AbortController();
  private running: Promise<void>;

  constructor(
    private readonly http: HttpKubeClient,
    private readonly names: Set<string>,
    private readonly checksumOf: () => string | undefined,
  ) {
    this.running = this.run();
  }

  private async run(): Promise<void> {
    const list = await this.http.request<{ metadata: { resourceVersion: string } }>('GET', NODES);
    await this.http
      .stream(
        NODES,
        {
          query: { watch: 'true', resourceVersion: list.metadata.resourceVersion },
          signal: this.abort.signal,
        },
        (line) => {
          const e = JSON.parse(line) as { type: string; object: OperatingSystemConfigNode };
          if (!this.names.has(e.object.metadata.name)) return;
          this.nodes.set(e.object.metadata.name, e.object);
          this.events++;
          this.maxInFlight = Math.max(this.maxInFlight, this.inFlight());
        },
      )
      .catch(() => undefined);
  }

  /** Nodes granted the target that have not confirmed, rolled back or failed it. */
  inFlight(): number {
    const target = this.checksumOf();
    let n = 0;
    for (const node of this.nodes.values()) {
      const g = (node as { spec?: { revision?: { checksum: string } } }).spec?.revision;
      const r = node.status?.revision;
      const answered =
        r !== undefined &&
        r.observedGeneration === (node.metadata as { generation?: number }).generation &&
        r.checksum === g?.checksum &&
        ['Confirmed', 'RolledBack', 'Failed'].includes(r.phase);
      if (g && g.checksum === target && !answered) n++;
    }
    return n;
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.running;
  }
}

async function rolloutOf(api: Api, ns: string): Promise<RolloutStatus | undefined> {
  return (await api.getOsc(ns, OSC))?.status?.rollout;
}

function until(api: Api, ns: string, what: string, ok: (r: RolloutStatus) => boolean, ms = 90_000) {
  return waitFor(
    what,
    async () => {
      const r = await rolloutOf(api, ns);
      return r && ok(r) ? r : undefined;
    },
    ms,
  );
}

describe('rollouts with the real API server', () => {
  it('20 agents at maxUnavailable 25%: never more than 5 in flight; pauses at the failure threshold; resume; undo brings every node back', async () => {
    const ns = await createTestNamespace('ro');
    const api = new Api();
    const controller = await startController([ns]);
    cleanups.push(controller.stop);
    const nodes = await fleet(ns, 20, uniqueName('n').slice(0, 6));
    const policy: RolloutPolicy = {
      maxUnavailable: '25%',
      soakSeconds: 1,
      progressDeadlineSeconds: 20,
      failureThreshold: 2,
      healthChecks: [
        // relative to the root: in a directory root each node has its own marker
        {
          name: 'marker',
          exec: { command: ['/bin/sh', '-c', 'test ! -e ./unhealthy'] },
          periodSeconds: 1,
        },
      ],
    };

    // revision 1: the first, granted to every node at once
    await api.applyOsc(ns, OSC, spec('1', policy));
    const r1 = await until(
      api,
      ns,
      'revision 1 complete',
      (r) => r.phase === 'Complete' && r.nodes.total === 20,
    );
    expect(r1.revision).toBe(1);

    // revision 2 in waves of 5, watched at every status change
    let target: string | undefined;
    const watch = new NodeWatch(api.http, new Set(nodes.map((x) => x.name)), () => target);
    cleanups.push(() => watch.stop());
    await api.applyOsc(ns, OSC, spec('2', policy));
    const r2 = await until(api, ns, 'revision 2 starts', (r) => r.revision === 2);
    target = r2.checksum;
    const done2 = await until(
      api,
      ns,
      'revision 2 complete',
      (r) => r.revision === 2 && r.phase === 'Complete',
    );
    expect(done2).toMatchObject({
      stableRevision: 2,
      maxUnavailable: 5,
      waves: 4,
      nodes: { updated: 20, total: 20 },
    });
    expect(watch.maxInFlight).toBe(5); // the budget was used, and never exceeded
    expect(watch.events).toBeGreaterThanOrEqual(60); // grant, Verifying, Confirmed per node
    for (const x of nodes) {
      expect(await readFile(join(x.root, 'etc/app/app.conf'), 'utf8')).toBe('version 2\n');
    }

    // revision 3 fails its health check on the first nodes: two roll back, the rollout pauses
    const sick = nodes.slice(0, 3);
    for (const x of sick) await writeFile(join(x.root, 'unhealthy'), '');
    await api.applyOsc(ns, OSC, spec('3', policy));
    const r3 = await until(api, ns, 'revision 3 starts', (r) => r.revision === 3);
    target = r3.checksum;
    const paused = await until(
      api,
      ns,
      'paused at the failure threshold',
      (r) => r.pauseReason === 'FailureThreshold',
    );
    expect(paused.nodes.rolledBack).toBeGreaterThanOrEqual(2);
    expect(paused.phase).toBe('Paused');
    // which sick nodes were granted first is the rollout's choice: the third may still be verifying
    const sickStatus = await Promise.all(
      sick.map(async (x) => ({
        x,
        st: (await api.http.request<OperatingSystemConfigNode>('GET', `${NODES}/${x.name}`)).status,
      })),
    );
    const rolledBack = sickStatus.filter(({ st }) => st?.revision?.phase === 'RolledBack');
    expect(rolledBack.length).toBeGreaterThanOrEqual(2);
    for (const { x, st } of rolledBack) {
      expect(st?.revision).toMatchObject({
        phase: 'RolledBack',
        reason: 'HealthCheckFailed',
        number: 3,
      });
      expect(st?.revision?.message).toMatch(/health check marker: exit 1/);
      expect(await readFile(join(x.root, 'etc/app/app.conf'), 'utf8')).toBe('version 2\n');
    }
    // paused: no grant of revision 3 follows the pause
    const granted3 = (): number =>
      [...watch.nodes.values()].filter(
        (x) => (x as { spec?: { revision?: { number: number } } }).spec?.revision?.number === 3,
      ).length;
    const atPause = granted3();
    await new Promise((r) => setTimeout(r, 3000));
    expect(granted3()).toBe(atPause);
    expect(atPause).toBeLessThan(20);
    expect((await rolloutOf(api, ns))?.pauseReason).toBe('FailureThreshold');
    // what OscarRolloutPausedOnFailures reads: the controller counts it from its caches
    const pausedSeries = async (): Promise<string | undefined> => {
      const text = await (
        await fetch(`http://${controller.handle.metricsAddress ?? ''}/metrics`)
      ).text();
      return /^oscar_controller_rollouts_paused\{reason="FailureThreshold"\} (\d+)$/m.exec(
        text,
      )?.[1];
    };
    await waitFor('the paused rollout in /metrics', async () =>
      (await pausedSeries()) === '1' ? true : undefined,
    );

    // fixed, then resumed: failed nodes are retried, the rollout completes
    for (const x of sick) await rm(join(x.root, 'unhealthy'), { force: true });
    const admin = await kubeconfigPathFor({ user: 'admin', groups: ['system:masters'] });
    expect(await rolloutResume(OSC, { namespace: ns, kubeconfig: admin })).toBe(0);
    const done3 = await until(
      api,
      ns,
      'revision 3 complete after resume',
      (r) => r.revision === 3 && r.phase === 'Complete',
    );
    expect(done3.nodes).toMatchObject({ updated: 20, failed: 0 });
    await waitFor('no paused rollout in /metrics', async () =>
      (await pausedSeries()) === undefined ? true : undefined,
    );
    expect(watch.maxInFlight).toBeLessThanOrEqual(5);

    // undo: every node back to revision 2, files and all
    expect(await rolloutUndo(OSC, { namespace: ns, kubeconfig: admin })).toBe(0);
    const osc = await api.getOsc(ns, OSC);
    expect(osc?.spec.rollout?.rollback).toEqual({ fromRevision: 3, toRevision: 2 });
    const undone = await until(
      api,
      ns,
      'undo complete',
      (r) => r.revision === 2 && r.phase === 'Complete',
    );
    expect(undone).toMatchObject({ stableRevision: 2, nodes: { updated: 20, total: 20 } });
    for (const x of nodes) {
      expect(await readFile(join(x.root, 'etc/app/app.conf'), 'utf8')).toBe('version 2\n');
    }
    expect(watch.maxInFlight).toBeLessThanOrEqual(5);

    const reasons = new Set((await api.listEvents(ns)).map((e) => e.reason));
    for (const r of [
      'RevisionCreated',
      'RolloutStarted',
      'Wave',
      'NodeRolledBack',
      'RolloutPaused',
      'Resumed',
      'RolloutComplete',
      'RolloutUndo',
    ]) {
      expect(reasons, r).toContain(r);
    }
    // the printer columns read the rollout at a glance
    // after the undo, the 20 nodes carry revision 2 while the OSC still renders revision 3: all 20
    // are UPDATED to the rollout's target (none DEGRADED nor DRIFTED), as the rollout (back to 2)
    // is Complete — not UPDATED 0 beside Complete, as the counts against the newest rendering said
    await waitFor('UPDATED 20 after the undo', async () =>
      (await api.getOsc(ns, OSC))?.status?.nodes?.updated === 20 ? true : undefined,
    );
    const table = await kubectl(['get', 'osc', OSC, '-n', ns]);
    expect(table.stdout).toMatch(/NODES\s+UPDATED\s+DEGRADED\s+DRIFTED\s+ROLLOUT/);
    expect(table.stdout).toMatch(/\s20\s+20\s+0\s+0\s+Complete\s/);
    const wide = await kubectl(['get', 'osc', OSC, '-n', ns, '-o', 'wide']);
    expect(wide.stdout).toMatch(/REVISION\s+FAILED/);
    expect(wide.stdout).toMatch(/\s2\s+0\s*$/m);
  }, 300_000);

  it('a canary wave first, then a pause until resumed; spec.rollout.paused stops new grants', async () => {
    const ns = await createTestNamespace('rc');
    const api = new Api();
    const controller = await startController([ns]);
    cleanups.push(controller.stop);
    const nodes = await fleet(ns, 4, uniqueName('c').slice(0, 6));
    const policy: RolloutPolicy = { maxUnavailable: 2, soakSeconds: 0, canary: { nodes: 1 } };
    await api.applyOsc(ns, OSC, spec('1', policy));
    await until(
      api,
      ns,
      'revision 1 complete',
      (r) => r.phase === 'Complete' && r.nodes.total === 4,
    );
    await api.applyOsc(ns, OSC, spec('2', policy));
    const canary = await until(
      api,
      ns,
      'the canary pause',
      (r) => r.revision === 2 && r.pauseReason === 'Canary',
    );
    expect(canary.nodes).toMatchObject({ updated: 1, pending: 3 });
    expect(canary.canaryCompleteTime).toBeDefined();
    const first = await readFile(join(nodes[0]?.root ?? '', 'etc/app/app.conf'), 'utf8');
    expect(first).toBe('version 2\n');
    expect(await readFile(join(nodes[1]?.root ?? '', 'etc/app/app.conf'), 'utf8')).toBe(
      'version 1\n',
    );
    // a manual pause holds it even after the canary is resumed
    await api.http.request(
      'PATCH',
      `/apis/oscar.dev/v1alpha1/namespaces/${ns}/operatingsystemconfigs/${OSC}`,
      {
        body: { spec: { rollout: { paused: true } } },
        contentType: CONTENT_MERGE_PATCH,
      },
    );
    await api.http.request(
      'PATCH',
      `/apis/oscar.dev/v1alpha1/namespaces/${ns}/operatingsystemconfigs/${OSC}`,
      {
        body: { metadata: { annotations: { 'oscar.dev/resume': 'once' } } },
        contentType: CONTENT_MERGE_PATCH,
      },
    );
    await until(
      api,
      ns,
      'manual pause',
      (r) => r.pauseReason === 'Manual' && r.canaryPromoted === true,
    );
    await new Promise((r) => setTimeout(r, 2000));
    expect((await rolloutOf(api, ns))?.nodes.updated).toBe(1);
    const admin = await kubeconfigPathFor({ user: 'admin', groups: ['system:masters'] });
    expect(await rolloutResume(OSC, { namespace: ns, kubeconfig: admin })).toBe(0);
    await until(api, ns, 'complete', (r) => r.revision === 2 && r.phase === 'Complete');
  }, 180_000);

  it('grant mode needs exactly this: its OSC revision Secrets, its own node object to read, its status to write, its own Node to read', async () => {
    const ns = await createTestNamespace('rr');
    const [node] = await fleet(ns, 1, uniqueName('r').slice(0, 6));
    const name = node?.name ?? '';
    const kc = await kubeconfigPathFor({
      user: `system:serviceaccount:${ns}:oscar-agent-${name}`,
      groups: ['system:serviceaccounts'],
    });
    const can = async (...args: string[]) =>
      (await kubectl(['auth', 'can-i', ...args], { kubeconfig: kc })).stdout.trim();
    for (let k = 0; k < 5; k++)
      expect(await can('get', `secret/oscar-${OSC}-rev-${String(k)}`, '-n', ns)).toBe('yes');
    expect(await can('get', `secret/oscar-${OSC}-rev-5`, '-n', ns)).toBe('no');
    expect(await can('get', `secret/oscar-other-rev-0`, '-n', ns)).toBe('no');
    expect(await can('list', 'secrets', '-n', ns)).toBe('no');
    expect(await can('watch', `secret/oscar-${OSC}-rev-0`, '-n', ns)).toBe('no');
    expect(await can('get', `operatingsystemconfignodes.oscar.dev/${name}`)).toBe('yes');
    expect(await can('watch', `operatingsystemconfignodes.oscar.dev/${name}`)).toBe('yes');
    expect(await can('list', 'operatingsystemconfignodes.oscar.dev')).toBe('no');
    expect(
      await can('patch', `operatingsystemconfignodes.oscar.dev/${name}`, '--subresource=status'),
    ).toBe('yes');
    expect(await can('patch', `operatingsystemconfignodes.oscar.dev/${name}`)).toBe('no');
    expect(
      await can('patch', 'operatingsystemconfignodes.oscar.dev/other', '--subresource=status'),
    ).toBe('no');
    expect(await can('get', 'operatingsystemconfigs.oscar.dev', '-n', ns)).toBe('no');
    // its own Kubernetes Node, read after a reboot (Ready in the new boot): get it, nothing more
    expect(await can('get', `node/${name}`)).toBe('yes');
    expect(await can('get', 'node/other')).toBe('no');
    expect(await can('list', 'nodes')).toBe('no');
    expect(await can('patch', `node/${name}`)).toBe('no');
    // and the agent, as that identity, did create its node object and announce itself
    const obj = await new Api().http.request<OperatingSystemConfigNode>('GET', `${NODES}/${name}`);
    expect(obj.status).toMatchObject({ source: 'Grant', oscRef: { namespace: ns, name: OSC } });
    expect(testEnvInfo().server).toMatch(/^https:/);
  }, 120_000);
});
