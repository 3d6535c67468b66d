// Kubernetes nodes that run pods, for the e2e and the benches: N nspawn machines booted from
// oscar's user data (examples/kubelet-worker/, as kubelet-node.test.ts does for one), each on its
// own persistent overlay (so it survives a reboot), with kubelet on its own port (the machines
// share the host's network), the local images imported into its containerd and containerd's
// sandbox_image set to the local pause image. Pods on them use hostNetwork: the machines share one
// network namespace, so a pod network per node (a bridge and its addresses) would collide between
// them — a VM has its own.
import { join } from 'node:path';
import type { ControllerHandle } from '../../controller/main.js';
import { buildAgent } from '../../hack/agent/build.js';
import { freePort } from '../../hack/testenv/proc.js';
import type { TestEnv } from '../../hack/testenv/testenv.js';
import type { KubeHttp } from '../../kube/client.js';
import { kubeHttp, loadKubeCredentials } from '../../kube/credentials.js';
import {
  exampleDocs,
  hostSysctls,
  bootKubeletMachine,
  nodeBinaries,
  nodeReady,
  type NodeObject,
} from './kubelet-support.js';
import { journalTails } from './journals.js';
import { runBootstrapController, serveAgent, type AgentServer } from './agent-server.js';
import { clusterOrSkip, kubeOps } from './cluster.js';
import { run } from './exec.js';
import {
  imagesBind,
  localImages,
  prepareImageImport,
  containerConfigToml,
  type LocalImages,
} from './images.js';
import type { Node } from './nspawn.js';
import { nodeRoot, repoRoot, requireTools } from './tools.js';
import { waitFor } from './wait.js';

type Doc = Awaited<ReturnType<typeof exampleDocs>>[number];

export interface FleetOptions {
  /** Machine (and Node) names. */
  names: readonly string[];
  /** The test's namespace (created here). */
  namespace: string;
  /** Changes to the worker's reconcile OSC spec before it is applied (rollout policy, files). */
  reconcile?: (spec: Record<string, unknown>) => void;
  /** A cluster that schedules pods and runs Deployments (kube-scheduler and their controllers). */
  workloads?: boolean;
  log?: (m: string) => void;
}

export interface KubeletFleet {
  env: TestEnv;
  api: KubeHttp;
  namespace: string;
  images: LocalImages;
  controller: ControllerHandle;
  /** In boot order, Ready. */
  nodes: Node[];
  /** Server-side apply as the test's field manager. */
  apply(path: string, body: unknown): Promise<void>;
  get<T>(path: string): Promise<T | undefined>;
  kubectl(args: string[], input?: string): Promise<string>;
  /** The last lines of kubelet's, containerd's and the agent's journals on a node. */
  journals(node: Node): Promise<string>;
  /** Stops the nodes, the controller and the API server (if started here); restores sysctls. */
  stop(): Promise<void>;
}

interface Prereqs {
  lower: string;
  bin: string;
  images: LocalImages;
}

/** The node root, kubelet and the images; a reason to skip when one is missing (not in CI). */
async function prereqs(): Promise<Prereqs | string> {
  if (!requireTools(['systemd-nspawn', 'nsenter', 'pgrep', 'mount'])) {
    return 'systemd-nspawn, nsenter, pgrep or mount missing (run hack/deps.sh)';
  }
  const lower = nodeRoot();
  if (lower === undefined) return 'no node root (see the printed reason)';
  const bin = nodeBinaries();
  if (bin === undefined) return 'no kubelet (see the printed reason)';
  const images = await localImages();
  if (images === undefined) return 'no local images (see the printed reason)';
  return { lower, bin, images };
}

/** The worker's OSCs from examples/kubelet-worker/ with the local pause image, and `edit`. */
export async function workerOscs(
  namespace: string,
  pause: string,
  edit?: (spec: Record<string, unknown>) => void,
): Promise<Doc[]> {
  const docs = [
    ...(await exampleDocs('kubelet-worker/provision.yaml', namespace)),
    ...(await exampleDocs('kubelet-worker/reconcile.yaml', namespace)),
  ];
  for (const doc of docs) {
    if (doc.spec.purpose !== 'reconcile') continue;
    const files = doc.spec.files as { path: string; content: { inline: { data: string } } }[];
    const toml = files.find((f) => f.path === '/etc/containerd/config.toml');
    if (!toml) throw new Error('the worker example has no /etc/containerd/config.toml');
    toml.content.inline.data = containerConfigToml(toml.content.inline.data, pause);
    edit?.(doc.spec);
  }
  return docs;
}

/** kubelet's ports: its own per machine, since the machines share the host's network. */
function machinePorts(port: number): string {
  return [
    'apiVersion: kubelet.config.k8s.io/v1beta1',
    'kind: KubeletConfiguration',
    `port: ${String(port)}`,
    'healthzPort: 0',
    '',
  ].join('\n');
}

/**
 * Boots `o.names` as Kubernetes nodes and waits until every one is Ready; undefined-free: a
 * string is the reason to skip (a missing tool outside CI).
 */
export async function startKubeletFleet(o: FleetOptions): Promise<KubeletFleet | string> {
  const log = o.log ?? ((m: string) => process.stderr.write(`${m}\n`));
  const pre = await prereqs();
  if (typeof pre === 'string') return pre;
  const started = await clusterOrSkip({
    workloads: o.workloads === true,
    log: (m) => {
      log(`[testenv] ${m}`);
    },
  });
  if ('skip' in started) return started.skip;
  const { env } = started.cluster;
  const cleanups: (() => Promise<unknown>)[] = [() => started.cluster.stop()];
  const stop = async (): Promise<void> => {
    for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
  };
  try {
    const fleet = await startFleet(o, pre, env, cleanups, log);
    return { ...fleet, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

async function startFleet(
  o: FleetOptions,
  pre: Prereqs,
  env: TestEnv,
  cleanups: (() => Promise<unknown>)[],
  log: (m: string) => void,
): Promise<Omit<KubeletFleet, 'stop'>> {
  const restoreSysctls = await hostSysctls();
  cleanups.push(restoreSysctls);
  const api = kubeHttp(await loadKubeCredentials(env.kubeconfigPath));
  const kubectl = async (args: string[], input?: string): Promise<string> => {
    const r = await run(
      env.info.kubectlPath,
      ['--kubeconfig', env.kubeconfigPath, ...args],
      input === undefined ? {} : { input },
    );
    if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr}`);
    return r.stdout;
  };
  const ops = kubeOps(api);
  const apply = async (path: string, body: unknown): Promise<void> => {
    await ops.apply(path, body as Record<string, unknown>);
  };
  const get = ops.get;
  const ns = o.namespace;
  await kubectl(['apply', '-k', join(repoRoot, 'deploy', 'identity')]);
  const agent = await buildAgent({
    log: (m) => {
      log(`[build:agent] ${m}`);
    },
  });
  const server: AgentServer = await serveAgent(agent.path);
  cleanups.push(() => server.close());
  await apply(`/api/v1/namespaces/${ns}`, {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: ns },
  });
  cleanups.push(() => kubectl(['delete', 'namespace', ns, '--wait=false']));
  for (const doc of await workerOscs(ns, pre.images.pause, o.reconcile)) {
    await apply(
      `/apis/oscar.dev/v1alpha1/namespaces/${ns}/operatingsystemconfigs/${doc.metadata.name}`,
      doc,
    );
  }
  const controller = await runBootstrapController({
    env,
    namespace: ns,
    agentUrl: server.url,
    agentSha256: agent.sha256,
  });
  cleanups.push(() => controller.stop());
  const journals = (node: Node): Promise<string> =>
    journalTails(node, [
      ['kubelet.service', 30],
      ['containerd.service', 15],
      ['oscar-agent.service', 25],
    ]);
  const nodes: Node[] = [];
  for (const name of o.names) {
    nodes.push(await bootMachine({ name, ns, pre, apply, get, cleanups, kubectl }));
  }
  for (const node of nodes) {
    await waitFor(
      `Node ${node.name} to be Ready`,
      async () => nodeReady(await get<NodeObject>(`/api/v1/nodes/${node.name}`)),
      { timeoutMs: 600_000, intervalMs: 1000, onTimeout: () => journals(node) },
    );
  }
  return {
    env,
    api,
    namespace: ns,
    images: pre.images,
    controller,
    nodes,
    apply,
    get,
    kubectl,
    journals,
  };
}

async function bootMachine(m: {
  name: string;
  ns: string;
  pre: Prereqs;
  apply: (path: string, body: unknown) => Promise<void>;
  get: <T>(path: string) => Promise<T | undefined>;
  cleanups: (() => Promise<unknown>)[];
  kubectl: (args: string[]) => Promise<string>;
}): Promise<Node> {
  const [config] = await exampleDocs('kubelet-worker/oscarconfig.yaml', m.ns);
  if (!config) throw new Error('examples/kubelet-worker/oscarconfig.yaml is empty');
  await m.apply(`/apis/bootstrap.oscar.dev/v1alpha1/namespaces/${m.ns}/oscarconfigs/${m.name}`, {
    ...config,
    metadata: { name: m.name, namespace: m.ns },
  });
  const secret = await waitFor(
    `the user data of ${m.name}`,
    () => m.get<{ data?: { value?: string } }>(`/api/v1/namespaces/${m.ns}/secrets/${m.name}`),
    { timeoutMs: 60_000, intervalMs: 500 },
  );
  const userData = Buffer.from(secret.data?.value ?? '', 'base64').toString('utf8');
  m.cleanups.push(() =>
    m.kubectl(['delete', 'node', m.name, '--ignore-not-found', '--wait=false']),
  );
  const machine = await bootKubeletMachine({
    lower: m.pre.lower,
    bin: m.pre.bin,
    name: m.name,
    userData,
    dropIns: { '91-machine.conf': machinePorts(await freePort('127.0.0.1')) },
    prepare: prepareImageImport,
    binds: [imagesBind(m.pre.images)],
  });
  m.cleanups.push(machine.stop);
  return machine.node;
}
