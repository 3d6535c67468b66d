// Everything the Cluster API flow on nspawn machines runs, started in order and stopped in reverse:
// oscar's identity manifests, the agent served as machines download it, Cluster API's core
// manager, oscar's controller (after Cluster API's API exists: it watches Machines only when the
// API is there as it starts), the nspawn provider's CRDs, oscar's Runtime Extension registered and
// discovered, the provider, and the workload Cluster. Used by test/e2e/capi-machinedeployment.test.ts
// and hack/bench/capi-nodes.ts.
import { join } from 'node:path';
import { type ControllerHandle } from '../../../controller/main.js';
import { buildAgent } from '../../../hack/agent/build.js';
import type { TestEnv } from '../../../hack/testenv/testenv.js';
import type { KubeHttp } from '../../../kube/client.js';
import { startCapi, type CapiManager } from '../../support/capi.js';
import { waitFor } from '../../support/wait.js';
import { runBootstrapController, serveAgent } from '../../support/agent-server.js';
import { run } from '../../support/exec.js';
import { repoRoot } from '../../support/tools.js';
import { exampleDocs, hostSysctls } from '../../support/kubelet-support.js';
import {
  applyObject,
  applyWorkloadCluster,
  getObject,
  startExtension,
  type RegisteredExtension,
} from './cluster.js';
import { nspawnCrdList } from './crds.js';
import { nspawnHost, type NspawnMachine } from './nspawn-host.js';
import { NspawnProvider } from './provider.js';

export interface CapiStack {
  controller: ControllerHandle;
  capi: CapiManager;
  extension: RegisteredExtension;
  provider: NspawnProvider<NspawnMachine>;
  /** Stops everything in reverse, the machines first; puts the host's sysctls back. */
  stop(): Promise<void>;
}

export interface StackOptions {
  env: TestEnv;
  api: KubeHttp;
  /** Namespace of the Cluster, its MachineDeployments and OSCs (created here). */
  namespace: string;
  cluster: string;
  /** Cluster API's build (buildCapi()). */
  capiDir: string;
  /** The node root and kubelet's directory. */
  lower: string;
  bin: string;
  /** Names the ExtensionConfig (cluster-scoped). */
  suffix: string;
  log?: (m: string) => void;
}

async function kubectlOk(env: TestEnv, args: string[], input?: string): Promise<void> {
  const r = await run(
    env.info.kubectlPath,
    ['--kubeconfig', env.kubeconfigPath, ...args],
    input === undefined ? {} : { input },
  );
  if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr}`);
}

async function applyNspawnCrds(env: TestEnv): Promise<void> {
  await kubectlOk(
    env,
    ['apply', '--server-side', '--force-conflicts', '-f', '-'],
    JSON.stringify(nspawnCrdList()),
  );
  await kubectlOk(env, [
    'wait',
    '--for=condition=Established',
    '--timeout=60s',
    'crd',
    '-l',
    'cluster.x-k8s.io/v1beta2',
  ]);
}

async function waitDiscovered(api: KubeHttp, name: string): Promise<void> {
  await waitFor(
    `ExtensionConfig ${name} to list its 3 handlers`,
    async () => {
      const got = await getObject<{ status?: { handlers?: unknown[] } }>(
        api,
        `/apis/runtime.cluster.x-k8s.io/v1beta2/extensionconfigs/${name}`,
      );
      return (got?.status?.handlers?.length ?? 0) === 3;
    },
    { timeoutMs: 60_000, intervalMs: 500 },
  );
}

/**
 * The worker's OSCs from examples/kubelet-worker/ verbatim, and `v2`: its reconcile OSC under
 * another name with kubelet's maxPods 42 (what the template moves to).
 */
export async function applyWorkerOscs(api: KubeHttp, ns: string, v2: string): Promise<void> {
  for (const file of ['kubelet-worker/provision.yaml', 'kubelet-worker/reconcile.yaml']) {
    for (const doc of await exampleDocs(file, ns)) await applyObject(api, doc);
  }
  const [reconcile] = await exampleDocs('kubelet-worker/reconcile.yaml', ns);
  if (!reconcile) throw new Error('examples/kubelet-worker/reconcile.yaml is empty');
  const text = JSON.stringify({ ...reconcile, metadata: { name: v2, namespace: ns } });
  const changed = text.replace('maxPods: 110', 'maxPods: 42');
  if (changed === text)
    throw new Error('examples/kubelet-worker/reconcile.yaml has no maxPods 110');
  await applyObject(api, JSON.parse(changed) as Record<string, unknown>);
}

/** An OscarConfigTemplate holding the example OscarConfig's spec, `reconcile` its OSC if given. */
export async function applyTemplate(
  api: KubeHttp,
  ns: string,
  name: string,
  reconcile?: string,
): Promise<void> {
  const [config] = await exampleDocs('kubelet-worker/oscarconfig.yaml', ns);
  if (!config) throw new Error('examples/kubelet-worker/oscarconfig.yaml is empty');
  const spec = reconcile ? { ...config.spec, reconcileRef: { name: reconcile } } : config.spec;
  await applyObject(api, {
    apiVersion: 'bootstrap.oscar.dev/v1alpha1',
    kind: 'OscarConfigTemplate',
    metadata: { name, namespace: ns },
    spec: { template: { spec } },
  });
}

export async function startCapiStack(o: StackOptions): Promise<CapiStack> {
  const log = o.log ?? (() => undefined);
  const stops: (() => Promise<unknown>)[] = [];
  const stop = async (): Promise<void> => {
    for (const s of stops.splice(0).reverse()) await s().catch(() => undefined);
  };
  try {
    stops.push(await hostSysctls());
    await kubectlOk(o.env, ['apply', '-k', join(repoRoot, 'deploy', 'identity')]);
    const agent = await buildAgent({
      log: (m) => {
        log(`[build:agent] ${m}`);
      },
    });
    const server = await serveAgent(agent.path);
    stops.push(() => server.close());
    await applyObject(o.api, {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: o.namespace },
    });
    const capi = await startCapi(o.env.info, o.capiDir);
    stops.push(() => capi.stop());
    const controller = await runBootstrapController({
      env: o.env,
      namespace: o.namespace,
      agentUrl: server.url,
      agentSha256: agent.sha256,
    });
    stops.push(() => controller.stop());
    await applyNspawnCrds(o.env);
    const extension = await startExtension(o.api, o.env, `oscar-${o.suffix}`);
    stops.push(() => extension.stop());
    await waitDiscovered(o.api, `oscar-${o.suffix}`);
    const url = new URL(o.env.info.server);
    const provider = new NspawnProvider({
      api: o.api,
      namespace: o.namespace,
      host: nspawnHost({ lower: o.lower, bin: o.bin }),
      endpoint: { host: url.hostname, port: Number(url.port) },
    });
    provider.start();
    stops.push(() => provider.stop());
    await applyWorkloadCluster(o.api, o.env, o.namespace, o.cluster);
    return { controller, capi, extension, provider, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
