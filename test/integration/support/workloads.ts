/**
 * Workloads on the test API server without a kubelet (issue 25's drains): Node objects, pods bound
 * to them and marked Running and Ready as their kubelet would report them (no grace period, so an
 * accepted eviction removes them at once), PodDisruptionBudgets — kept by kube-controller-manager's
 * disruption controller and enforced by the API server's Eviction API.
 */
import { CONTENT_MERGE_PATCH, type KubeHttp } from '../../../kube/client.js';
import { waitFor } from '../../support/wait.js';

export interface WorkloadObject {
  metadata: { name: string; uid?: string; annotations?: Record<string, string> };
  spec?: { unschedulable?: boolean };
  status?: { disruptionsAllowed?: number };
}

/** Creates a Node; returns its deletion for the test's cleanup. */
export async function createNode(
  http: KubeHttp,
  name: string,
  unschedulable = false,
): Promise<() => Promise<void>> {
  await http.request('POST', '/api/v1/nodes', {
    body: { apiVersion: 'v1', kind: 'Node', metadata: { name }, spec: { unschedulable } },
  });
  return async () => {
    await http.request('DELETE', `/api/v1/nodes/${name}`);
  };
}

/**
 * The namespace's `default` ServiceAccount, which kube-controller-manager creates some time after
 * the namespace: until it exists the API server's ServiceAccount admission refuses every pod that
 * names none ("serviceaccount \"default\" not found"; seen in a loaded CI run).
 */
async function defaultServiceAccount(http: KubeHttp, ns: string): Promise<void> {
  await waitFor(`the ServiceAccount ${ns}/default`, async () => {
    await http.request('GET', `/api/v1/namespaces/${ns}/serviceaccounts/default`);
    return true;
  });
}

/** A pod bound to `nodeName`, Running and Ready as its kubelet would report it. */
export async function createReadyPod(
  http: KubeHttp,
  ns: string,
  name: string,
  nodeName: string,
  meta: Record<string, unknown> = {},
): Promise<void> {
  await defaultServiceAccount(http, ns);
  await http.request('POST', `/api/v1/namespaces/${ns}/pods`, {
    body: {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, labels: { app: 'web' }, ...meta },
      spec: {
        nodeName,
        terminationGracePeriodSeconds: 0,
        containers: [{ name: 'c', image: 'localhost/busybox:oscar' }],
      },
    },
  });
  const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  await http.request('PATCH', `/api/v1/namespaces/${ns}/pods/${name}/status`, {
    contentType: CONTENT_MERGE_PATCH,
    body: {
      status: {
        phase: 'Running',
        conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: now }],
      },
    },
  });
}

/** A PodDisruptionBudget over app=web; resolves once the disruption controller allows `allowed`. */
export async function createWebBudget(
  http: KubeHttp,
  ns: string,
  minAvailable: number,
  allowed: number,
): Promise<void> {
  await http.request('POST', `/apis/policy/v1/namespaces/${ns}/poddisruptionbudgets`, {
    body: {
      apiVersion: 'policy/v1',
      kind: 'PodDisruptionBudget',
      metadata: { name: 'web' },
      spec: { minAvailable, selector: { matchLabels: { app: 'web' } } },
    },
  });
  const path = `/apis/policy/v1/namespaces/${ns}/poddisruptionbudgets/web`;
  await waitFor(
    `the disruption controller to allow ${String(allowed)} disruption(s)`,
    async () => {
      const pdb = await http.request<WorkloadObject>('GET', path);
      return pdb.status?.disruptionsAllowed === allowed ? pdb : undefined;
    },
    30_000,
  );
}

export async function podsOn(http: KubeHttp, nodeName: string): Promise<string[]> {
  const list = await http.request<{ items: WorkloadObject[] }>('GET', '/api/v1/pods', {
    query: { fieldSelector: `spec.nodeName=${nodeName}` },
  });
  return list.items.map((p) => p.metadata.name).sort();
}
