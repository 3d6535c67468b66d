// The objects of a Cluster API workload cluster on the nspawn provider, and oscar's Runtime
// Extension registered with Cluster API: what the MachineDeployment e2e and bench set up.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runExtension, type ExtensionHandle } from '../../../controller/extension/main.js';
import { writeKubeconfigFor, type TestEnv } from '../../../hack/testenv/testenv.js';
import { CONTENT_APPLY_PATCH, isNotFound, type KubeHttp } from '../../../kube/client.js';
import { createLogger } from '../../../log/logger.js';
import { run } from '../../support/exec.js';
import { loopbackServingCert } from '../../support/serving-cert.js';
import { repoRoot } from '../../support/tools.js';
import { NSPAWN_API, NSPAWN_GROUP } from './crds.js';

export const CAPI = 'cluster.x-k8s.io/v1beta2';

/** Server-side apply of one object by its apiVersion, kind and name. */
export async function applyObject(api: KubeHttp, obj: Record<string, unknown>): Promise<void> {
  const meta = obj.metadata as { name: string; namespace?: string };
  const av = String(obj.apiVersion);
  const base = av.includes('/') ? `/apis/${av}` : `/api/${av}`;
  const nsPart = meta.namespace ? `/namespaces/${meta.namespace}` : '';
  const plural = `${String(obj.kind).toLowerCase()}s`;
  await api.request('PATCH', `${base}${nsPart}/${plural}/${meta.name}`, {
    query: { fieldManager: 'e2e', force: true },
    contentType: CONTENT_APPLY_PATCH,
    body: obj,
  });
}

export async function getObject<T>(api: KubeHttp, path: string): Promise<T | undefined> {
  try {
    return await api.request<T>('GET', path);
  } catch (error) {
    if (isNotFound(error)) return undefined;
    throw error;
  }
}

/**
 * Cluster `name` whose workload cluster is the test cluster itself: an NspawnCluster for its
 * infrastructure, an NspawnControlPlane for the test API server (external, already initialized),
 * and the kubeconfig Secret Cluster API's cluster cache reads Nodes through.
 */
export async function applyWorkloadCluster(
  api: KubeHttp,
  env: TestEnv,
  ns: string,
  name: string,
): Promise<void> {
  for (const kind of ['NspawnCluster', 'NspawnControlPlane']) {
    await applyObject(api, { apiVersion: NSPAWN_API, kind, metadata: { name, namespace: ns } });
  }
  await applyObject(api, {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'cluster.x-k8s.io/secret',
    metadata: {
      name: `${name}-kubeconfig`,
      namespace: ns,
      labels: { 'cluster.x-k8s.io/cluster-name': name },
    },
    data: { value: (await readFile(env.kubeconfigPath)).toString('base64') },
  });
  await applyObject(api, {
    apiVersion: CAPI,
    kind: 'Cluster',
    metadata: { name, namespace: ns },
    spec: {
      infrastructureRef: { apiGroup: NSPAWN_GROUP, kind: 'NspawnCluster', name },
      controlPlaneRef: { apiGroup: NSPAWN_GROUP, kind: 'NspawnControlPlane', name },
    },
  });
  await applyObject(api, {
    apiVersion: NSPAWN_API,
    kind: 'NspawnMachineTemplate',
    metadata: { name: 'nspawn', namespace: ns },
    spec: { template: { spec: {} } },
  });
}

/** A MachineDeployment of `replicas` nspawn machines bootstrapped by OscarConfigTemplate `tpl`. */
export function machineDeployment(o: {
  ns: string;
  name: string;
  cluster: string;
  tpl: string;
  replicas: number;
}): Record<string, unknown> {
  const labels = {
    'cluster.x-k8s.io/cluster-name': o.cluster,
    'cluster.x-k8s.io/deployment-name': o.name,
  };
  return {
    apiVersion: CAPI,
    kind: 'MachineDeployment',
    metadata: { name: o.name, namespace: o.ns },
    spec: {
      clusterName: o.cluster,
      replicas: o.replicas,
      // What Cluster API's defaulting webhook would set (it is not registered here). No surge:
      // a machine leaves the old MachineSet only by being updated in place or replaced.
      rollout: {
        strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: 1 } },
      },
      deletion: { order: 'Oldest' },
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          clusterName: o.cluster,
          bootstrap: {
            configRef: {
              apiGroup: 'bootstrap.oscar.dev',
              kind: 'OscarConfigTemplate',
              name: o.tpl,
            },
          },
          infrastructureRef: {
            apiGroup: NSPAWN_GROUP,
            kind: 'NspawnMachineTemplate',
            name: 'nspawn',
          },
        },
      },
    },
  };
}

export interface RegisteredExtension {
  handle: ExtensionHandle;
  stop(): Promise<void>;
}

/**
 * oscar's Runtime Extension as its deploy/extension identity, over HTTPS on loopback with a test
 * serving certificate, registered with Cluster API by an ExtensionConfig (`name`) and discovered.
 */
export async function startExtension(
  api: KubeHttp,
  env: TestEnv,
  name: string,
): Promise<RegisteredExtension> {
  const kubectl = (args: string[]) =>
    run(env.info.kubectlPath, ['--kubeconfig', env.kubeconfigPath, ...args]);
  await applyObject(api, {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: 'oscar-system' },
  });
  const rbac = await kubectl(['apply', '-f', join(repoRoot, 'deploy/extension/rbac.yaml')]);
  if (rbac.code !== 0) throw new Error(`deploy/extension/rbac.yaml: ${rbac.stderr}`);
  const dir = await mkdtemp(join(tmpdir(), 'oscar-ext-e2e-'));
  const serving = await loopbackServingCert(dir);
  const handle = await runExtension({
    kubeconfig: await writeKubeconfigFor(env.info, {
      user: 'system:serviceaccount:oscar-system:oscar-extension',
      groups: ['system:serviceaccounts', 'system:serviceaccounts:oscar-system'],
    }),
    cert: serving.cert,
    key: serving.key,
    host: '127.0.0.1',
    port: 0,
    log: createLogger({ component: 'extension', level: 'warn' }),
  });
  await applyObject(api, {
    apiVersion: 'runtime.cluster.x-k8s.io/v1beta2',
    kind: 'ExtensionConfig',
    metadata: { name },
    spec: {
      clientConfig: {
        url: `https://127.0.0.1:${String(handle.server.port)}`,
        caBundle: serving.ca.toString('base64'),
      },
      namespaceSelector: {},
    },
  });
  return {
    handle,
    stop: async () => {
      await kubectl(['delete', 'extensionconfig', name, '--ignore-not-found']);
      await handle.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
