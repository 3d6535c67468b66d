/**
 * The set-up every suite needs that boots machines from oscar's user data into Kubernetes nodes
 * (kubelet-node, kubeadm-join): the node tools and the cached root, kubelet's binaries, the test
 * cluster, the host's sysctls to restore, the agent built and served, the test's namespace with the
 * worker's OSCs, and the bootstrap controller. A missing tool is a skip outside CI (a failure with
 * CI=true), as everywhere else.
 */
import type { ControllerHandle } from '../../controller/main.js';
import { buildAgent } from '../../hack/agent/build.js';
import { runBootstrapController, serveAgent } from './agent-server.js';
import { clusterOrSkip, kubeOps, type Cluster, type KubeOps } from './cluster.js';
import { hostSysctls, nodeBinaries } from './kubelet-support.js';
import { nodeSuiteGate } from './tools.js';

export interface KubeletSuite extends KubeOps {
  cluster: Cluster;
  /** The cached node root (the lower layer of each machine's disk). */
  lower: string;
  /** nodeBinaries()'s directory (kubelet, kubeadm). */
  bin: string;
  namespace: string;
  controller: ControllerHandle;
  /** Stops what started here, deletes the namespace and `nodes`, restores the sysctls. */
  stop: (nodes?: readonly string[]) => Promise<void>;
}

export interface KubeletSuiteOptions {
  namespace: string;
  /** The cluster made ready for the machines (deploy/identity, kubeadm's phases). */
  prepareCluster: (cluster: Cluster, bin: string) => Promise<void>;
  /** Applies the worker's OSCs into the namespace (before the controller starts). */
  applyOscs: (ops: KubeOps) => Promise<void>;
}

/** The suite's set-up, or the reason to skip it. */
export async function startKubeletSuite(
  o: KubeletSuiteOptions,
): Promise<KubeletSuite | { skip: string }> {
  const gate = nodeSuiteGate(['systemd-nspawn', 'nsenter', 'pgrep', 'mount']);
  if (gate.skip !== undefined) return { skip: gate.skip };
  const bin = nodeBinaries();
  if (bin === undefined) return { skip: 'no kubelet/kubeadm (see the printed reason)' };
  const attached = await clusterOrSkip();
  if ('skip' in attached) return attached;
  const { cluster } = attached;
  const undo: (() => Promise<unknown>)[] = [() => cluster.stop()];
  const stop = async (nodes: readonly string[] = []): Promise<void> => {
    for (const name of nodes) {
      await cluster.kubectl(['delete', 'node', name, '--ignore-not-found', '--wait=false']);
    }
    for (const u of undo.splice(0).reverse()) await u().catch(() => undefined);
  };
  try {
    undo.push(
      () => cluster.kubectl(['delete', 'namespace', o.namespace, '--wait=false']),
      await hostSysctls(),
    );
    const ops = kubeOps(cluster.api);
    await o.prepareCluster(cluster, bin);
    const agent = await buildAgent({ log: (m) => process.stderr.write(`[build:agent] ${m}\n`) });
    const server = await serveAgent(agent.path);
    undo.push(() => server.close());
    await ops.apply(`/api/v1/namespaces/${o.namespace}`, {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: o.namespace },
    });
    await o.applyOscs(ops);
    const controller = await runBootstrapController({
      env: cluster.env,
      namespace: o.namespace,
      agentUrl: server.url,
      agentSha256: agent.sha256,
    });
    undo.push(() => controller.stop());
    return { ...ops, cluster, lower: gate.root, bin, namespace: o.namespace, controller, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
