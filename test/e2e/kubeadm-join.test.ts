// A machine joins through `kubeadm join` from its OscarConfig, on real parts (docs/identity.md,
// "kubeadm join"): the test cluster is prepared as kubeadm expects by kubeadm's own `init` phases
// (test/support/kubeadm-cluster.ts) with deploy/identity and deploy/kubeadm applied and kubeadm's
// auto-approval bindings removed; the cached Debian root boots in systemd-nspawn with the user data
// of an OscarConfig made from examples/kubeadm-worker/ verbatim. The agent applies the worker's
// reconcile OSC (containerd, CNI, kubelet with kubeadm's drop-in, kubeadm-join.service); kubeadm —
// built from the test API server's module set — discovers the cluster through cluster-info signed
// for the machine's own token and pinned by the CA hash, kubelet TLS-bootstraps with that token,
// oscar's approver (nobody else: no generic auto-approval is bound or running) signs
// system:node:<machine>, and the Node goes Ready.
//
// What a container cannot do that a VM could, and the workaround: as in kubelet-node.test.ts
// (kubelet's cgroup v1 / QoS / allocatable settings from a drop-in written into the image, here
// through /etc/default/kubelet's --config-dir; /dev/kmsg is /dev/null; containerd's state on a host
// directory; the host's network and sysctls, restored at the end), and kubeadm's preflight ignores
// SystemVerification (the host's kernel config and cgroup v1 hierarchy show through) and
// FileContent--proc-sys-net-ipv4-ip_forward (the host's network namespace, not turned on here),
// through /etc/default/kubeadm-join written into the image.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ControllerHandle } from '../../controller/main.js';
import { CONTENT_APPLY_PATCH, isNotFound, type KubeHttp } from '../../kube/client.js';
import { kubeHttp, loadKubeCredentials } from '../../kube/credentials.js';
import { buildAgent, type BuiltAgent } from '../../hack/agent/build.js';
import {
  attachTestEnv,
  startTestEnv,
  ToolMissingError,
  type TestEnv,
} from '../../hack/testenv/testenv.js';
import { runBootstrapController, serveAgent, type AgentServer } from '../support/agent-server.js';
import { run } from '../support/exec.js';
import { KUBEADM_AUTO_APPROVAL, prepareKubeadmCluster } from '../support/kubeadm-cluster.js';
import { bootNode, persistentRoot, type Node } from '../support/nspawn.js';
import { missing, nodeRoot, requireTools } from '../support/tools.js';
import {
  exampleDocs,
  hostSysctls,
  kubeletBinds,
  nodeBinaries,
  nodeReady,
  prepareKubeletImage,
  type NodeObject,
} from '../support/kubelet-support.js';

/** kubeadm join's preflight checks a container cannot pass (see the header). */
const CONTAINER_PREFLIGHT_IGNORES = [
  'SystemVerification',
  'FileContent--proc-sys-net-ipv4-ip_forward',
];

let skipReason: string | undefined;
let env: TestEnv | undefined;
let ownEnv = false;
let admin: KubeHttp | undefined;
let controller: ControllerHandle | undefined;
let server: AgentServer | undefined;
let agent: BuiltAgent | undefined;
let bin = '';
let ns = '';
let restoreSysctls: (() => Promise<void>) | undefined;
const cleanups: (() => Promise<void>)[] = [];
const nodes: Node[] = [];
const machine = `ka-${process.pid.toString(36)}`;

function api(): KubeHttp {
  if (!admin) throw new Error('no API server');
  return admin;
}

async function get<T>(path: string): Promise<T | undefined> {
  try {
    return await api().request<T>('GET', path);
  } catch (error) {
    if (isNotFound(error)) return undefined;
    throw error;
  }
}

async function apply(path: string, body: Record<string, unknown>): Promise<void> {
  await api().request('PATCH', path, {
    query: { fieldManager: 'e2e', force: true },
    contentType: CONTENT_APPLY_PATCH,
    body,
  });
}

async function waitFor<T>(
  what: string,
  fn: () => Promise<T | undefined>,
  timeoutMs: number,
  onTimeout?: () => Promise<string>,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}${onTimeout ? `\n${await onTimeout()}` : ''}`);
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}

/** examples/kubeadm-worker/'s OSCs, verbatim, in the test's namespace. */
async function applyWorkerOscs(): Promise<void> {
  for (const file of ['kubeadm-worker/provision.yaml', 'kubeadm-worker/reconcile.yaml']) {
    for (const doc of await exampleDocs(file, ns)) {
      await apply(
        `/apis/oscar.dev/v1alpha1/namespaces/${ns}/operatingsystemconfigs/${doc.metadata.name}`,
        doc,
      );
    }
  }
}

const configPath = (): string =>
  `/apis/bootstrap.oscar.dev/v1alpha1/namespaces/${ns}/oscarconfigs/${machine}`;

interface ConfigStatus {
  status?: {
    bootstrapTokenID?: string;
    bootstrapTokenNeededBy?: string[];
    conditions?: { type: string; status: string; reason: string }[];
  };
}

async function userData(): Promise<string> {
  const [config] = await exampleDocs('kubeadm-worker/oscarconfig.yaml', ns);
  if (!config) throw new Error('examples/kubeadm-worker/oscarconfig.yaml is empty');
  await apply(configPath(), { ...config, metadata: { name: machine, namespace: ns } });
  const secret = await waitFor(
    'user data',
    () => get<{ data?: { value?: string } }>(`/api/v1/namespaces/${ns}/secrets/${machine}`),
    60_000,
  );
  return Buffer.from(secret.data?.value ?? '', 'base64').toString('utf8');
}

/** The container's part: kubelet's drop-in directory and preflight's ignores (see the header). */
async function prepareKubeadmImage(root: string): Promise<void> {
  await prepareKubeletImage(root);
  await mkdir(join(root, 'etc/default'), { recursive: true });
  await writeFile(
    join(root, 'etc/default/kubelet'),
    'KUBELET_EXTRA_ARGS=--config-dir=/etc/kubernetes/kubelet.conf.d\n',
  );
  await writeFile(
    join(root, 'etc/default/kubeadm-join'),
    `KUBEADM_JOIN_ARGS=--ignore-preflight-errors=${CONTAINER_PREFLIGHT_IGNORES.join(',')}\n`,
  );
}

async function journals(node: Node): Promise<string> {
  const tail = async (u: string, n: number) =>
    `--- ${u}\n${(await node.journal(u)).split('\n').slice(-n).join('\n')}`;
  return [
    await tail('kubeadm-join.service', 40),
    await tail('kubelet.service', 30),
    await tail('containerd.service', 10),
    await tail('oscar-agent.service', 25),
    await tail('cloud-final.service', 10),
  ].join('\n');
}

beforeAll(async () => {
  if (!requireTools(['systemd-nspawn', 'nsenter', 'pgrep', 'mount'])) {
    skipReason = 'systemd-nspawn, nsenter, pgrep or mount missing (run hack/deps.sh)';
    return;
  }
  if (nodeRoot() === undefined) {
    skipReason = 'no node root (see the printed reason)';
    return;
  }
  const built = nodeBinaries();
  if (built === undefined) {
    skipReason = 'no kubelet/kubeadm (see the printed reason)';
    return;
  }
  bin = built;
  try {
    const attach = process.env.OSCAR_TESTENV_STATE;
    if (attach) env = await attachTestEnv(attach);
    else {
      env = await startTestEnv({ log: (m) => process.stderr.write(`[testenv] ${m}\n`) });
      ownEnv = true;
    }
  } catch (error) {
    if (error instanceof ToolMissingError) {
      skipReason = 'no test API server';
      missing('the test API server', error.message);
      return;
    }
    throw error;
  }
  restoreSysctls = await hostSysctls();
  admin = kubeHttp(await loadKubeCredentials(env.kubeconfigPath));
  await prepareKubeadmCluster(env, join(bin, 'kubeadm'));
  agent = await buildAgent({ log: (m) => process.stderr.write(`[build:agent] ${m}\n`) });
  server = await serveAgent(agent.path);
  ns = `e2e-ka-${process.pid.toString(36)}`;
  await apply(`/api/v1/namespaces/${ns}`, {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: ns },
  });
  await applyWorkerOscs();
  controller = await runBootstrapController({
    env,
    namespace: ns,
    agentUrl: server.url,
    agentSha256: agent.sha256,
  });
}, 3_600_000);

afterAll(async () => {
  for (const n of nodes) await n.stop().catch(() => undefined);
  for (const c of cleanups) await c().catch(() => undefined);
  await restoreSysctls?.();
  await controller?.stop();
  await server?.close();
  if (env) {
    const kubectl = (args: string[]) =>
      run(env?.info.kubectlPath ?? 'kubectl', ['--kubeconfig', env?.kubeconfigPath ?? '', ...args]);
    await kubectl(['delete', 'node', machine, '--ignore-not-found', '--wait=false']);
    if (ns) await kubectl(['delete', 'namespace', ns, '--wait=false']);
  }
  if (ownEnv) await env?.stop();
}, 120_000);

interface OscNodeStatus {
  conditions?: { type: string; status: string }[];
  drift?: { items?: { unit?: string; reason: string }[] };
}

interface ClusterInfo {
  data?: Record<string, string>;
}

describe('a machine joins through kubeadm join from its OscarConfig', () => {
  it('discovers the cluster with its own token and the CA pin, gets system:node:<machine> from oscar’s approver, goes Ready', async (ctx) => {
    if (skipReason) {
      ctx.skip(skipReason);
      return;
    }
    const seed = await userData();
    expect(seed).toMatch(/caCertHashes:\s*\n\s*- "sha256:[0-9a-f]{64}"/);
    expect(seed).not.toContain('{{');

    // the token handed to kubeadm can sign cluster-info, and the bootstrap-signer signed it
    const configObj = await waitFor(
      'the token id in the status',
      async () => {
        const c = await get<ConfigStatus>(configPath());
        return c?.status?.bootstrapTokenID ? c : undefined;
      },
      60_000,
    );
    const tokenId = configObj.status?.bootstrapTokenID ?? '';
    const token = await get<{ data: Record<string, string> }>(
      `/api/v1/namespaces/kube-system/secrets/bootstrap-token-${tokenId}`,
    );
    expect(Buffer.from(token?.data['usage-bootstrap-signing'] ?? '', 'base64').toString()).toBe(
      'true',
    );
    const clusterInfoPath = '/api/v1/namespaces/kube-public/configmaps/cluster-info';
    await waitFor(
      `cluster-info signed for token ${tokenId}`,
      async () => (await get<ClusterInfo>(clusterInfoPath))?.data?.[`jws-kubeconfig-${tokenId}`],
      60_000,
    );
    // and nothing but oscar approves kubelet certificates here
    for (const name of KUBEADM_AUTO_APPROVAL) {
      expect(await get(`/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${name}`)).toBe(
        undefined,
      );
    }

    const disk = await persistentRoot(nodeRoot() ?? '');
    cleanups.push(disk.cleanup);
    await prepareKubeadmImage(disk.root);
    const containerd = await mkdtemp(join(tmpdir(), 'oscar-containerd-'));
    cleanups.push(() => rm(containerd, { recursive: true, force: true }));
    const t0 = Date.now();
    const node = await bootNode({
      root: disk.root,
      name: machine,
      volatile: false,
      seed: { userData: seed },
      binds: [
        ...kubeletBinds(bin, containerd),
        { src: join(bin, 'kubeadm'), dst: '/usr/bin/kubeadm' },
      ],
      writableProcSys: true,
    });
    nodes.push(node);
    const nodePath = `/api/v1/nodes/${machine}`;
    await waitFor(
      'the Node to register',
      () => get<NodeObject>(nodePath),
      480_000,
      () => journals(node),
    );
    const tRegistered = Date.now();
    const ready = await waitFor(
      'the Node to be Ready',
      async () => {
        const n = await get<NodeObject>(nodePath);
        return nodeReady(n) ? n : undefined;
      },
      240_000,
      () => journals(node),
    );
    process.stderr.write(
      `[e2e] kubeadm join: boot → Node registered ${String(tRegistered - t0)} ms → Ready ${String(Date.now() - t0)} ms\n`,
    );
    expect(ready.status?.nodeInfo?.kubeletVersion).toBe('v1.37.2');

    // kubeadm join ran once and succeeded; kubelet runs with what kubeadm wrote
    const join_ = await waitFor(
      'kubeadm-join.service to finish',
      async () => {
        const s = await node.show('kubeadm-join.service', ['ActiveState', 'SubState', 'Result']);
        return s.SubState === 'exited' || s.ActiveState === 'failed' ? s : undefined;
      },
      60_000,
    );
    expect(join_).toMatchObject({ ActiveState: 'active', Result: 'success' });
    expect(await node.journal('kubeadm-join.service')).toContain(
      'This node has joined the cluster',
    );
    // once joined it does nothing (a reboot or a restart starts it again), and stays active
    await node.execOk(['systemctl', 'restart', 'kubeadm-join.service']);
    expect(
      await waitFor(
        'kubeadm-join.service to exit again',
        async () => {
          const s = await node.show('kubeadm-join.service', ['SubState', 'Result']);
          return s.SubState === 'running' ? undefined : s;
        },
        30_000,
      ),
    ).toEqual({ SubState: 'exited', Result: 'success' });
    // the agent applied the worker's OSC and sees neither unit as drifted
    const oscnode = await waitFor(
      'the node to report its OSC applied',
      async () => {
        const o = await get<{ status?: OscNodeStatus }>(
          `/apis/oscar.dev/v1alpha1/operatingsystemconfignodes/${machine}`,
        );
        const applied = o?.status?.conditions?.find((c) => c.type === 'Applied');
        return applied?.status === 'True' ? o : undefined;
      },
      60_000,
    );
    expect(
      (oscnode.status?.drift?.items ?? []).filter((i) =>
        ['kubelet.service', 'kubeadm-join.service'].includes(i.unit ?? ''),
      ),
    ).toEqual([]);

    // kubelet's certificate came from oscar's approver, for this machine's token, exactly once
    const csrs = await get<{
      items: {
        spec: { signerName: string; username: string };
        status?: { conditions?: { type: string; reason?: string }[] };
      }[];
    }>('/apis/certificates.k8s.io/v1/certificatesigningrequests');
    const kubeletCsrs = (csrs?.items ?? []).filter(
      (c) => c.spec.signerName === 'kubernetes.io/kube-apiserver-client-kubelet',
    );
    expect(
      kubeletCsrs
        .filter((c) => c.spec.username === `system:bootstrap:${tokenId}`)
        .map((c) => c.status?.conditions),
    ).toEqual([[expect.objectContaining({ type: 'Approved', reason: 'OscarKubeletIdentity' })]]);
    for (const c of kubeletCsrs) {
      for (const cond of c.status?.conditions ?? []) {
        if (cond.type === 'Approved') expect(cond.reason).toBe('OscarKubeletIdentity');
      }
    }

    // the token goes once the agent and kubelet have their certificates; so does its signature
    const done = await waitFor(
      'the token to be needed by nobody',
      async () => {
        const c = await get<ConfigStatus>(configPath());
        return c?.status?.bootstrapTokenNeededBy?.length === 0 ? c : undefined;
      },
      60_000,
    );
    expect(done.status?.conditions?.find((c) => c.type === 'KubeletIdentity')).toMatchObject({
      status: 'True',
    });
    expect(
      await get(`/api/v1/namespaces/kube-system/secrets/bootstrap-token-${tokenId}`),
    ).toBeUndefined();
    await waitFor(
      'cluster-info to drop the token’s signature',
      async () => {
        const info = await get<ClusterInfo>(clusterInfoPath);
        return info?.data?.[`jws-kubeconfig-${tokenId}`] === undefined ? true : undefined;
      },
      60_000,
    );
  }, 1_200_000);
});
