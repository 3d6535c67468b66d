// Cluster API's in-place update of a Reboot-level change, drained (issue 25): against the real API
// server, with Cluster API's CRDs (a Machine marked update-in-progress, as its manager marks it),
// the oscar controller, one real grant-mode agent (`oscar agent --osc`, its own least-privilege
// identity, a directory root) and oscar's extension as its deploy/extension RBAC identity, called
// the way Cluster API calls UpdateMachine (again and again until done). Pods are API-held (no
// kubelet): bound to the Node, Running and Ready, removed at once by an accepted eviction; the
// PodDisruptionBudget is kept by kube-controller-manager's disruption controller and enforced by
// the Eviction API. The directory-root agent applies the Reboot-level revision without rebooting
// (docs/rollouts.md#reboot-inside-try-mode); the reboot itself is the e2e's.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import type { OperatingSystemConfigSpec } from '../../api/schema.js';
import { InPlaceExtension } from '../../controller/extension/service.js';
import { ANNOTATION_CORDONED } from '../../controller/drain/drainer.js';
import type { OscNodeObject } from '../../controller/osc/node-index.js';
import { CONTENT_MERGE_PATCH } from '../../kube/client.js';
import {
  adminClient,
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
import { applyCapiCrds, buildCapi, INFRA_GROUP } from '../support/capi.js';
import { kubeOps } from '../support/cluster.js';
import { extensionKubeconfig } from './support/extension.js';
import {
  createReadyPod,
  createWebBudget,
  podsOn,
  type WorkloadObject,
} from './support/workloads.js';

const NODES = '/apis/oscar.dev/v1alpha1/operatingsystemconfignodes';
const IN_PROGRESS = 'in-place-updates.internal.cluster.x-k8s.io/update-in-progress';

const api = clusterUnavailable === null ? new Api() : undefined;
const cleanups: (() => Promise<unknown>)[] = [];
let skipReason: string | undefined;
let ns = '';
let node = '';
let other = '';
let root = '';
let ext: InPlaceExtension | undefined;

function http() {
  if (!api) throw new Error('no cluster');
  return api.http;
}

const { apply, get } = kubeOps(http, 'test');

function reconcileSpec(extra: OperatingSystemConfigSpec['files'] = []): OperatingSystemConfigSpec {
  return {
    type: 'debian',
    purpose: 'reconcile',
    files: [{ path: '/etc/app/app.conf', content: { inline: { data: 'version 1\n' } } }, ...extra],
    rollout: { soakSeconds: 1, progressDeadlineSeconds: 60 },
  };
}

/** A Ready Node, as its kubelet would report it; deleted after the suite. */
async function readyNode(name: string): Promise<void> {
  await http().request('POST', '/api/v1/nodes', {
    body: { apiVersion: 'v1', kind: 'Node', metadata: { name } },
  });
  cleanups.push(() => kubectl(['delete', 'node', name, '--ignore-not-found']));
  const now = new Date().toISOString();
  await http().request('PATCH', `/api/v1/nodes/${name}/status`, {
    contentType: CONTENT_MERGE_PATCH,
    body: {
      status: {
        conditions: [{ type: 'Ready', status: 'True', reason: 'Test', lastTransitionTime: now }],
      },
    },
  });
}

/** The agent of the Machine, as its own process, following v1 and allowed v2's Secrets. */
async function startAgent(): Promise<void> {
  if (!api) return;
  const revoke = await grantAgent(api, ns, node, 'v1');
  const role = `oscar-agent-${node}-moves`;
  await apply(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles/${role}`, {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: { name: role, namespace: ns },
    rules: [
      {
        apiGroups: [''],
        resources: ['secrets'],
        resourceNames: [0, 1, 2, 3]
          .map((k) => `oscar-v2-rev-${String(k)}`)
          .concat('oscar-v2-reconcile'),
        verbs: ['get'],
      },
    ],
  });
  await apply(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings/${role}`, {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: role, namespace: ns },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: role },
    subjects: [{ kind: 'ServiceAccount', name: `oscar-agent-${node}`, namespace: ns }],
  });
  root = await mkdtemp(join(tmpdir(), 'oscar-inplace-drain-'));
  const agent = spawnOscar('agent', [
    ...['--kubeconfig', await kubeconfigPathFor(agentIdentity(ns, node))],
    ...['--namespace', ns, '--osc', 'v1', '--node', node, '--root', root],
  ]);
  cleanups.push(async () => {
    agent.child.kill('SIGTERM');
    await agent.exited;
    await revoke();
    await rm(root, { recursive: true, force: true });
  });
}

/** The Machine as Cluster API leaves it during an in-place update, and its OscarConfig. */
async function machineUpdatingTo(reconcile: string): Promise<void> {
  await apply(`/apis/bootstrap.oscar.dev/v1alpha1/namespaces/${ns}/oscarconfigs/${node}`, {
    apiVersion: 'bootstrap.oscar.dev/v1alpha1',
    kind: 'OscarConfig',
    metadata: { name: node, namespace: ns },
    spec: { provisionRef: { name: 'prov' }, reconcileRef: { name: reconcile } },
  });
  await apply(`/apis/cluster.x-k8s.io/v1beta2/namespaces/${ns}/machines/${node}`, {
    apiVersion: 'cluster.x-k8s.io/v1beta2',
    kind: 'Machine',
    metadata: { name: node, namespace: ns, annotations: { [IN_PROGRESS]: '' } },
    spec: {
      clusterName: 'c1',
      bootstrap: {
        configRef: { apiGroup: 'bootstrap.oscar.dev', kind: 'OscarConfig', name: node },
      },
      infrastructureRef: { apiGroup: INFRA_GROUP, kind: 'TestMachine', name: node },
    },
  });
}

/** One UpdateMachine call, as Cluster API makes it. */
async function updateMachine(): Promise<{
  status: string;
  message?: string;
  retryAfterSeconds?: number;
}> {
  if (!ext) throw new Error('no extension');
  return ext.handle('UpdateMachine', {
    apiVersion: 'hooks.runtime.cluster.x-k8s.io/v1alpha1',
    kind: 'UpdateMachineRequest',
    desired: {
      machine: { metadata: { name: node, namespace: ns } },
      bootstrapConfig: {
        apiVersion: 'bootstrap.oscar.dev/v1alpha1',
        kind: 'OscarConfig',
        metadata: { name: node, namespace: ns },
      },
    },
  });
}

type NodeObject = WorkloadObject & { spec?: { unschedulable?: boolean } };
const nodeApi = (): Promise<NodeObject | undefined> => get<NodeObject>(`/api/v1/nodes/${node}`);
const oscNode = (): Promise<OscNodeObject | undefined> => get<OscNodeObject>(`${NODES}/${node}`);

beforeAll(async () => {
  if (clusterUnavailable !== null || !api) return;
  const built = await buildCapi();
  if ('missing' in built) {
    skipReason = `no Cluster API CRDs: ${built.missing}`;
    return;
  }
  await applyCapiCrds(testEnvInfo(), built.dir);
  ns = uniqueName('ipd');
  node = `m-${ns}`; // cluster-scoped: a name no other suite uses
  other = `o-${ns}`;
  await kubectl(['create', 'namespace', ns]);
  await kubectl(['create', 'namespace', 'oscar-system']);
  cleanups.push(() => kubectl(['delete', 'namespace', ns, '--wait=false']));
  await api.applyOsc(ns, 'v1', reconcileSpec());
  // v2: a kernel module option that takes effect at boot — a Reboot-level change
  await api.applyOsc(
    ns,
    'v2',
    reconcileSpec([
      {
        path: '/etc/modprobe.d/oscar.conf',
        onChange: 'reboot',
        content: { inline: { data: 'options loop max_loop=8\n' } },
      },
    ]),
  );
  const controller = await startController([ns]);
  cleanups.push(controller.stop);
  await readyNode(node);
  await readyNode(other);
  await startAgent();
  // the extension as deploy/extension/rbac.yaml lets it be
  const kubeconfig = await extensionKubeconfig();
  ext = new InPlaceExtension(adminClient(kubeconfig), pino({ level: 'silent' }));
}, 300_000);

afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
}, 120_000);

describe('Cluster API in-place update of a Reboot-level change', () => {
  it('is drained within its PodDisruptionBudget before the grant, proven, and uncordoned before UpdateMachine answers done', async (ctx) => {
    if (clusterUnavailable !== null || skipReason)
      return ctx.skip(clusterUnavailable ?? skipReason);
    const v1 = (await api?.getOsc(ns, 'v1'))?.status?.checksum;
    await waitFor(
      'the node on v1, confirmed',
      async () => {
        const n = await oscNode();
        return n?.status?.appliedChecksum === v1 && n?.status?.revision?.phase === 'Confirmed'
          ? n
          : undefined;
      },
      120_000,
    );
    // one pod on the node, one elsewhere; the budget lets none go
    await createReadyPod(http(), ns, 'web-a', node);
    await createReadyPod(http(), ns, 'web-b', other);
    await createWebBudget(http(), ns, 2, 0);
    await machineUpdatingTo('v2');
    const v2 = await waitFor(
      'v2 rendered',
      async () => (await api?.getOsc(ns, 'v2'))?.status?.checksum,
    );

    // blocked: cordoned, the pod stays, no grant, and the answer names the budget
    const blocked = await updateMachine();
    expect(blocked.status).toBe('Success');
    expect(blocked.retryAfterSeconds).toBeGreaterThan(0);
    expect(blocked.message).toMatch(
      /draining node .* \(Reboot: file \/etc\/modprobe\.d\/oscar\.conf \(onChange: reboot\)\)/,
    );
    expect(blocked.message).toContain(`PodDisruptionBudget ${ns}/web`);
    expect((await nodeApi())?.spec?.unschedulable).toBe(true);
    expect(await podsOn(http(), node)).toEqual(['web-a']);
    expect((await oscNode())?.spec?.revision?.checksum).toBe(v1);

    // the budget allows one: the next calls drain, grant, then wait for the node's proof
    await http().request('PATCH', `/apis/policy/v1/namespaces/${ns}/poddisruptionbudgets/web`, {
      contentType: CONTENT_MERGE_PATCH,
      body: { spec: { minAvailable: 1 } },
    });
    let grantSeen: { pods: string[]; unschedulable: boolean | undefined } | undefined;
    const answers: string[] = [];
    const done = await waitFor(
      'UpdateMachine answered done',
      async () => {
        const r = await updateMachine();
        answers.push(r.message ?? '');
        const n = await oscNode();
        if (!grantSeen && n?.spec?.revision?.checksum === v2) {
          grantSeen = {
            pods: await podsOn(http(), node),
            unschedulable: (await nodeApi())?.spec?.unschedulable,
          };
        }
        return r.retryAfterSeconds === 0 || r.status !== 'Success' ? r : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 1_000, onTimeout: () => answers.slice(-5).join('\n') },
    );
    expect(done.status, done.message).toBe('Success');
    // the grant came after the node was empty, and carries the level
    expect(grantSeen).toEqual({ pods: [], unschedulable: true });
    const n = await oscNode();
    expect(n?.spec?.revision?.disruption).toBe('Reboot');
    expect(n?.status?.revision).toMatchObject({ phase: 'Confirmed', checksum: v2 });
    expect(n?.status?.appliedChecksum).toBe(v2);
    expect(await readFile(join(root, 'etc/modprobe.d/oscar.conf'), 'utf8')).toBe(
      'options loop max_loop=8\n',
    );
    // done only once uncordoned; the pod elsewhere untouched
    expect(done.message).toMatch(/Node Ready and uncordoned/);
    const after = await nodeApi();
    expect(after?.spec?.unschedulable).toBeUndefined();
    expect(after?.metadata.annotations?.[ANNOTATION_CORDONED]).toBeUndefined();
    expect(await podsOn(http(), other)).toEqual(['web-b']);
    // the call that granted said it drained first (whether a call saw the node still applying
    // depends on timing)
    expect(answers.some((a) => /granted node .* v2 .*, drained first \(Reboot: /.test(a))).toBe(
      true,
    );
  }, 300_000);
});
