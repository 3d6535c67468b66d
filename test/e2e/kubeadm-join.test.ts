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
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeOps } from '../support/cluster.js';
import { journalTails, KUBELET_JOURNALS } from '../support/journals.js';
import { KUBEADM_AUTO_APPROVAL, prepareKubeadmCluster } from '../support/kubeadm-cluster.js';
import { bootKubeletMachine, exampleDocs, waitNodeReady } from '../support/kubelet-support.js';
import { startKubeletSuite, type KubeletSuite } from '../support/kubelet-suite.js';
import type { Node } from '../support/nspawn.js';
import { waitFor } from '../support/wait.js';

/** kubeadm join's preflight checks a container cannot pass (see the header). */
const CONTAINER_PREFLIGHT_IGNORES = [
  'SystemVerification',
  'FileContent--proc-sys-net-ipv4-ip_forward',
];

let skipReason: string | undefined;
let suite: KubeletSuite | undefined;
const cleanups: (() => Promise<void>)[] = [];
const machine = `ka-${process.pid.toString(36)}`;
const ns = `e2e-ka-${process.pid.toString(36)}`;

function ops(): KubeletSuite {
  if (!suite) throw new Error('no API server');
  return suite;
}
const get: KubeOps['get'] = (path) => ops().get(path);
const apply: KubeOps['apply'] = (path, body) => ops().apply(path, body);

/** examples/kubeadm-worker/'s OSCs, verbatim, in the test's namespace. */
async function applyWorkerOscs(kube: KubeOps): Promise<void> {
  for (const file of ['kubeadm-worker/provision.yaml', 'kubeadm-worker/reconcile.yaml']) {
    for (const doc of await exampleDocs(file, ns)) {
      await kube.apply(
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
    { timeoutMs: 60_000, intervalMs: 1000 },
  );
  return Buffer.from(secret.data?.value ?? '', 'base64').toString('utf8');
}

/**
 * The container's part besides kubelet's own (bootKubeletMachine's): kubelet's drop-in directory
 * and preflight's ignores (see the header).
 */
async function prepareKubeadmImage(root: string): Promise<void> {
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

/** kubeadm join's journal first, then a kubelet machine's. */
const journals = (node: Node): Promise<string> =>
  journalTails(node, [['kubeadm-join.service', 40], ...KUBELET_JOURNALS]);

beforeAll(async () => {
  const started = await startKubeletSuite({
    namespace: ns,
    prepareCluster: (cluster, bin) => prepareKubeadmCluster(cluster.env, join(bin, 'kubeadm')),
    applyOscs: applyWorkerOscs,
  });
  if ('skip' in started) skipReason = started.skip;
  else suite = started;
}, 3_600_000);

afterAll(async () => {
  for (const c of cleanups) await c().catch(() => undefined);
  await suite?.stop([machine]);
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
      { timeoutMs: 60_000, intervalMs: 1000 },
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
      { timeoutMs: 60_000, intervalMs: 1000 },
    );
    // and nothing but oscar approves kubelet certificates here
    for (const name of KUBEADM_AUTO_APPROVAL) {
      expect(await get(`/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${name}`)).toBe(
        undefined,
      );
    }

    const booted = await bootKubeletMachine({
      lower: ops().lower,
      bin: ops().bin,
      name: machine,
      userData: seed,
      prepare: prepareKubeadmImage,
      binds: [{ src: join(ops().bin, 'kubeadm'), dst: '/usr/bin/kubeadm' }],
    });
    cleanups.push(booted.stop);
    const { node, bootedAt: t0 } = booted;
    const { registeredAt, ready, readyAt } = await waitNodeReady(get, machine, {
      registerMs: 480_000,
      readyMs: 240_000,
      onTimeout: () => journals(node),
    });
    process.stderr.write(
      `[e2e] kubeadm join: boot → Node registered ${String(registeredAt - t0)} ms → Ready ${String(readyAt - t0)} ms\n`,
    );
    expect(ready.status?.nodeInfo?.kubeletVersion).toBe('v1.37.2');

    // kubeadm join ran once and succeeded; kubelet runs with what kubeadm wrote
    const join_ = await waitFor(
      'kubeadm-join.service to finish',
      async () => {
        const s = await node.show('kubeadm-join.service', ['ActiveState', 'SubState', 'Result']);
        return s.SubState === 'exited' || s.ActiveState === 'failed' ? s : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 1000 },
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
        { timeoutMs: 30_000, intervalMs: 1000 },
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
      { timeoutMs: 60_000, intervalMs: 1000 },
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
      { timeoutMs: 60_000, intervalMs: 1000 },
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
      { timeoutMs: 60_000, intervalMs: 1000 },
    );
  }, 1_200_000);
});
