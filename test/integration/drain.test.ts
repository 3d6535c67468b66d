// Drains against the real API server (issue 25): Node objects with pods bound to them (no kubelet:
// the pods' Ready condition is written as a kubelet would, and they have no grace period, so an
// accepted eviction removes them at once), a PodDisruptionBudget kept by kube-controller-manager's
// disruption controller and enforced by the API server's Eviction API — nothing of it simulated.
// The drainer runs as the controller's own ServiceAccount with exactly deploy/controller's drain
// ClusterRole, so the RBAC is tested too.
import { readFile } from 'node:fs/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { ANNOTATION_CORDONED, HttpNodeDrainer } from '../../controller/drain/drainer.js';
import { HttpKubeClient, type KubeHttp } from '../../kube/client.js';
import { adminClient } from './controller-support.js';
import {
  createTestNamespace,
  kubeConfigFor,
  kubectl,
  skipWithoutCluster,
  uniqueName,
} from './support/cluster.js';
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

type Obj = WorkloadObject;

const node = async (http: KubeHttp, name: string, unschedulable = false): Promise<void> => {
  cleanups.push(await createNode(http, name, unschedulable));
};
const pod = createReadyPod;
const podNames = podsOn;

/** The controller's ServiceAccount with only the drain ClusterRole of deploy/controller. */
async function drainerIdentity(ns: string): Promise<{ http: HttpKubeClient; user: string }> {
  const role = await readFile(
    new URL('../../deploy/controller/clusterrole-drain.yaml', import.meta.url),
    'utf8',
  );
  const sa = uniqueName('oscar-drain');
  const named = role
    .replaceAll('name: oscar-controller-drain', `name: ${sa}`)
    .replace(
      '    name: oscar-controller\n    namespace: oscar-system',
      `    name: ${sa}\n    namespace: ${ns}`,
    );
  const applied = await kubectl(['apply', '-f', '-'], { input: named });
  expect(applied.code, applied.stderr).toBe(0);
  cleanups.push(async () => {
    await kubectl(['delete', 'clusterrole,clusterrolebinding', sa, '--ignore-not-found']);
  });
  const user = `system:serviceaccount:${ns}:${sa}`;
  const kc = await kubeConfigFor({
    user,
    groups: ['system:serviceaccounts', `system:serviceaccounts:${ns}`, 'system:authenticated'],
  });
  return { http: new HttpKubeClient(kc), user };
}

describe('draining a Node through the Eviction API', () => {
  it('evicts what the budget allows, keeps DaemonSet and mirror pods, names the blocking PDB, uncordons only what it cordoned', async () => {
    const admin = adminClient();
    const ns = await createTestNamespace('drain');
    const [a, b, c] = ['a', 'b', 'c'].map((x) => uniqueName(`drain-${x}`)) as [
      string,
      string,
      string,
    ];
    await node(admin, a);
    await node(admin, b);
    await node(admin, c, true); // an operator cordoned it
    // a DaemonSet that selects no node: only its uid is needed, as the owner of a pod
    const ds = await admin.request<Obj>('POST', `/apis/apps/v1/namespaces/${ns}/daemonsets`, {
      body: {
        apiVersion: 'apps/v1',
        kind: 'DaemonSet',
        metadata: { name: 'agent' },
        spec: {
          selector: { matchLabels: { app: 'agent' } },
          template: {
            metadata: { labels: { app: 'agent' } },
            spec: {
              nodeSelector: { nowhere: 'true' },
              containers: [{ name: 'c', image: 'localhost/busybox:oscar' }],
            },
          },
        },
      },
    });
    await pod(admin, ns, 'web-a', a);
    await pod(admin, ns, 'web-b', b);
    await pod(admin, ns, 'agent-a', a, {
      labels: { app: 'agent' },
      ownerReferences: [
        {
          apiVersion: 'apps/v1',
          kind: 'DaemonSet',
          name: 'agent',
          uid: ds.metadata.uid,
          controller: true,
        },
      ],
    });
    await pod(admin, ns, 'static-a', a, {
      labels: { app: 'static' },
      annotations: { 'kubernetes.io/config.mirror': 'e3b0c44298fc1c14' },
    });
    await createWebBudget(admin, ns, 1, 1);

    const identity = await drainerIdentity(ns);
    const drainer = new HttpNodeDrainer(identity.http);
    // an eviction is the only way a pod leaves: the drain role cannot delete pods
    const canDelete = await kubectl([
      'auth',
      'can-i',
      'delete',
      'pods',
      '--as',
      identity.user,
      '-n',
      ns,
    ]);
    expect(canDelete.stdout.trim()).toBe('no');
    const canEvict = await kubectl([
      'auth',
      'can-i',
      'create',
      'pods',
      '--subresource=eviction',
      '--as',
      identity.user,
      '-n',
      ns,
    ]);
    expect(canEvict.stdout.trim()).toBe('yes');
    // the budget allows one: node a empties (its DaemonSet and mirror pods stay)
    const first = await drainer.drain(a);
    expect(first).toEqual({ drained: true, message: 'drained' });
    expect(await podNames(admin, a)).toEqual(['agent-a', 'static-a']);
    const na = await admin.request<Obj>('GET', `/api/v1/nodes/${a}`);
    expect(na.spec?.unschedulable).toBe(true);
    expect(na.metadata.annotations?.[ANNOTATION_CORDONED]).toBe('true');

    // now web-b is the last healthy pod of the budget: the API server refuses its eviction
    const second = await drainer.drain(b);
    expect(second).toMatchObject({
      drained: false,
      pod: `${ns}/web-b`,
      podDisruptionBudget: `${ns}/web`,
    });
    expect(second.message).toContain(`by PodDisruptionBudget ${ns}/web`);
    expect(await podNames(admin, b)).toEqual(['web-b']);

    // uncordon: only the nodes oscar cordoned
    await drainer.uncordon(a);
    await drainer.uncordon(b);
    await drainer.uncordon(c);
    const after = await Promise.all(
      [a, b, c].map((n) => admin.request<Obj>('GET', `/api/v1/nodes/${n}`)),
    );
    expect(after.map((n) => n.spec?.unschedulable === true)).toEqual([false, false, true]);
    expect(after.map((n) => n.metadata.annotations?.[ANNOTATION_CORDONED])).toEqual([
      undefined,
      undefined,
      undefined,
    ]);
  });
});
