/**
 * The test cluster for e2e suites and benches: attach to the one OSCAR_TESTENV_STATE names (a
 * cluster kept running between runs) or start a fresh one, with an admin client and the small
 * `get`/`apply` every suite needs. Integration tests use test/integration/support/cluster.ts
 * instead (vitest's global setup starts their cluster).
 */
import { KubeConfig } from '@kubernetes/client-node';
import { readState } from '../../hack/testenv/state.js';
import {
  attachTestEnv,
  startTestEnv,
  ToolMissingError,
  type StartOptions,
  type TestEnv,
} from '../../hack/testenv/testenv.js';
import {
  CONTENT_APPLY_PATCH,
  isNotFound,
  type HttpKubeClient,
  type KubeHttp,
} from '../../kube/client.js';
import { kubeHttp, loadKubeCredentials } from '../../kube/credentials.js';
import { run, type RunResult } from './exec.js';
import { missing, nodeSuiteGate } from './tools.js';

export interface Cluster {
  env: TestEnv;
  /** True when this process started the cluster (and `stop` ends it). */
  own: boolean;
  /** The admin (system:masters) client. */
  api: HttpKubeClient;
  /** The admin kubeconfig, for @kubernetes/client-node users. */
  kubeConfig: KubeConfig;
  /** kubectl (the API server's release) as the admin; never throws on a non-zero exit. */
  kubectl: (args: readonly string[], input?: string) => Promise<RunResult>;
  /** Stops the cluster when this process started it; an attached one is left running. */
  stop: () => Promise<void>;
}

const testenvLog = (m: string): void => {
  process.stderr.write(`[testenv] ${m}\n`);
};

/**
 * Attaches to OSCAR_TESTENV_STATE's cluster, or starts one (`options` apply to a start only; an
 * attached cluster must have the workloads' scheduler when `options.workloads` asks for it).
 */
export async function attachCluster(options: StartOptions = { log: testenvLog }): Promise<Cluster> {
  const state = process.env.OSCAR_TESTENV_STATE;
  const own = state === undefined || state === '';
  if (!own && options.workloads === true && (await readState(state)).scheduler === null) {
    throw new Error(
      "OSCAR_TESTENV_STATE names a cluster without kube-scheduler: start one with 'hack/testenv/cli.ts start --workloads', or unset it",
    );
  }
  const env = own ? await startTestEnv(options) : await attachTestEnv(state);
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(env.kubeconfigPath);
  return {
    env,
    own,
    api: kubeHttp(await loadKubeCredentials(env.kubeconfigPath)),
    kubeConfig,
    kubectl: (args, input) =>
      run(env.kubectlPath, ['--kubeconfig', env.kubeconfigPath, ...args], { input }),
    stop: async () => {
      if (own) await env.stop();
    },
  };
}

/**
 * attachCluster for a suite: when the test API server's binaries are missing, says so under the
 * tool gate's policy (a failure with CI=true, else a printed skip) and returns the skip reason.
 */
export async function clusterOrSkip(
  options?: StartOptions,
): Promise<{ cluster: Cluster } | { skip: string }> {
  try {
    return { cluster: await attachCluster(options) };
  } catch (error) {
    if (!(error instanceof ToolMissingError)) throw error;
    missing('the test API server', error.message);
    return { skip: 'no test API server' };
  }
}

/**
 * The gate of a suite that boots a node and talks to the test cluster: the node gate (its tools,
 * the cached node root), then the cluster; the node root and the cluster, or the reason to skip.
 */
export async function nodeSuiteCluster(
  tools: readonly string[],
  options?: StartOptions,
): Promise<{ root: string; cluster: Cluster } | { skip: string }> {
  const gate = nodeSuiteGate(tools);
  if (gate.skip !== undefined) return { skip: gate.skip };
  const attached = await clusterOrSkip(options);
  if ('skip' in attached) return attached;
  return { root: gate.root, cluster: attached.cluster };
}

/** The reads and writes suites make as the admin: `get` (undefined when absent), `apply`. */
export interface KubeOps {
  get: <T>(path: string) => Promise<T | undefined>;
  /** Server-side apply of `body` at `path` (forced, as `fieldManager`). */
  apply: <T = unknown>(path: string, body: Record<string, unknown>) => Promise<T>;
  /** Server-side apply of a whole object, at the path its apiVersion, kind and metadata name. */
  applyObject: <T = unknown>(obj: Record<string, unknown>) => Promise<T>;
}

/** The REST path of an object (the plural is the lower-cased kind + "s", true of every kind used). */
export function pathOf(obj: Record<string, unknown>): string {
  const meta = obj.metadata as { name: string; namespace?: string };
  const apiVersion = String(obj.apiVersion);
  const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : ['', apiVersion];
  const plural = `${String(obj.kind).toLowerCase()}s`;
  const base = group ? `/apis/${group}/${String(version)}` : `/api/${String(version)}`;
  const nsPart = meta.namespace ? `/namespaces/${meta.namespace}` : '';
  return `${base}${nsPart}/${plural}/${meta.name}`;
}

/** `get`/`apply` on a client; `api` may be a function for a client made later (in beforeAll). */
export function kubeOps(api: KubeHttp | (() => KubeHttp), fieldManager = 'e2e'): KubeOps {
  const client = typeof api === 'function' ? api : () => api;
  const apply = <T>(path: string, body: Record<string, unknown>): Promise<T> =>
    client().request<T>('PATCH', path, {
      query: { fieldManager, force: true },
      contentType: CONTENT_APPLY_PATCH,
      body,
    });
  return {
    get: async <T>(path: string): Promise<T | undefined> => {
      try {
        return await client().request<T>('GET', path);
      } catch (error) {
        if (isNotFound(error)) return undefined;
        throw error;
      }
    },
    apply,
    applyObject: <T>(obj: Record<string, unknown>) => apply<T>(pathOf(obj), obj),
  };
}
