// A machine becomes a Ready Kubernetes Node from oscar's user data, on real parts (docs/identity.md,
// "kubelet"; NODE-TESTING.md): the cached Debian root with Debian's containerd and CNI plugins boots
// in systemd-nspawn with cloud-init's NoCloud seed = the `value` of its OscarConfig's Secret, made
// from examples/kubelet-worker/ verbatim. The agent installs itself and applies the worker's
// reconcile OSC (containerd, the CNI conflist, kubelet's configuration and unit); kubelet — built
// from the test API server's module set — TLS-bootstraps with the machine's own token through
// oscar's approver (never the generic auto-approval, which the test cluster does not run) and the
// Node goes Ready. Then an in-place change of kubelet's configuration (maxPods) restarts kubelet
// alone and the Node shows the new capacity.
//
// What a container cannot do that a VM could, and the workaround: kubelet's cgroup v1 / QoS /
// allocatable settings come from a drop-in written into the image (kubelet-support.ts), /dev/kmsg
// is /dev/null, containerd keeps its state on a host directory, and the node shares the host's
// network and its three non-namespaced sysctls (restored when the suite ends).
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeOps } from '../support/cluster.js';
import { journalTails } from '../support/journals.js';
import { repoRoot } from '../support/tools.js';
import { waitFor } from '../support/wait.js';
import {
  exampleDocs,
  nodeReady,
  bootKubeletMachine,
  waitNodeReady,
  type NodeObject,
} from '../support/kubelet-support.js';
import { startKubeletSuite, type KubeletSuite } from '../support/kubelet-suite.js';

let skipReason: string | undefined;
let suite: KubeletSuite | undefined;
const cleanups: (() => Promise<void>)[] = [];
const machine = `kn-${process.pid.toString(36)}`;
const ns = `e2e-kn-${process.pid.toString(36)}`;

function ops(): KubeletSuite {
  if (!suite) throw new Error('no API server');
  return suite;
}
const get: KubeOps['get'] = (path) => ops().get(path);

/** The worker's OSCs from examples/kubelet-worker/, in the test's namespace (maxPods swapped). */
async function applyWorkerOscs(maxPods?: number, { apply }: KubeOps = ops()): Promise<void> {
  for (const file of ['kubelet-worker/provision.yaml', 'kubelet-worker/reconcile.yaml']) {
    for (const doc of await exampleDocs(file, ns)) {
      const text = JSON.stringify(doc);
      const body =
        maxPods === undefined ? text : text.replace('maxPods: 110', `maxPods: ${String(maxPods)}`);
      if (maxPods !== undefined && file.includes('reconcile')) expect(body).not.toBe(text);
      await apply(
        `/apis/oscar.dev/v1alpha1/namespaces/${ns}/operatingsystemconfigs/${doc.metadata.name}`,
        JSON.parse(body) as Record<string, unknown>,
      );
    }
  }
}

async function userData(): Promise<string> {
  const [config] = await exampleDocs('kubelet-worker/oscarconfig.yaml', ns);
  if (!config) throw new Error('examples/kubelet-worker/oscarconfig.yaml is empty');
  await ops().apply(`/apis/bootstrap.oscar.dev/v1alpha1/namespaces/${ns}/oscarconfigs/${machine}`, {
    ...config,
    metadata: { name: machine, namespace: ns },
  });
  const secret = await waitFor(
    'user data',
    () => get<{ data?: { value?: string } }>(`/api/v1/namespaces/${ns}/secrets/${machine}`),
    { timeoutMs: 60_000, intervalMs: 1000 },
  );
  return Buffer.from(secret.data?.value ?? '', 'base64').toString('utf8');
}

beforeAll(async () => {
  const started = await startKubeletSuite({
    namespace: ns,
    prepareCluster: async (cluster) => {
      const applied = await cluster.kubectl(['apply', '-k', join(repoRoot, 'deploy', 'identity')]);
      if (applied.code !== 0) throw new Error(applied.stderr);
    },
    applyOscs: (kube) => applyWorkerOscs(undefined, kube),
  });
  if ('skip' in started) skipReason = started.skip;
  else suite = started;
}, 3_600_000);

afterAll(async () => {
  for (const c of cleanups) await c().catch(() => undefined);
  await suite?.stop([machine]);
}, 120_000);

describe('a machine booted from oscar’s user data becomes a Ready Kubernetes Node', () => {
  it('joins through oscar’s kubelet approver, goes Ready, and takes a kubelet change in place', async (ctx) => {
    if (skipReason) {
      ctx.skip(skipReason);
      return;
    }
    const seed = await userData();
    const booted = await bootKubeletMachine({
      lower: ops().lower,
      bin: ops().bin,
      name: machine,
      userData: seed,
    });
    cleanups.push(booted.stop);
    const node = booted.node;
    const nodePath = `/api/v1/nodes/${machine}`;
    const t0 = booted.bootedAt;
    const { registered, registeredAt, ready, readyAt } = await waitNodeReady(get, machine, {
      registerMs: 420_000,
      readyMs: 240_000,
      onTimeout: () => journalTails(node),
    });
    process.stderr.write(
      `[e2e] boot → Node registered ${String(registeredAt - t0)} ms → Ready ${String(readyAt - t0)} ms\n`,
    );
    expect(registered.metadata.name).toBe(machine);
    expect(ready.status?.nodeInfo?.kubeletVersion).toBe('v1.37.2');
    expect(ready.status?.capacity?.pods).toBe('110');

    // kubelet's certificate came from oscar's approver, with the machine's own token
    const config = await get<{
      status?: {
        bootstrapTokenID?: string;
        bootstrapTokenNeededBy?: string[];
        conditions?: { type: string; status: string; reason: string }[];
      };
    }>(`/apis/bootstrap.oscar.dev/v1alpha1/namespaces/${ns}/oscarconfigs/${machine}`);
    const tokenId = config?.status?.bootstrapTokenID ?? '';
    const csrs = await get<{
      items: {
        spec: { signerName: string; username: string };
        status?: { conditions?: { type: string; reason?: string }[] };
      }[];
    }>('/apis/certificates.k8s.io/v1/certificatesigningrequests');
    const kubeletCsrs = (csrs?.items ?? []).filter(
      (c) =>
        c.spec.signerName === 'kubernetes.io/kube-apiserver-client-kubelet' &&
        c.spec.username === `system:bootstrap:${tokenId}`,
    );
    expect(kubeletCsrs.map((c) => c.status?.conditions?.[0])).toEqual([
      expect.objectContaining({ type: 'Approved', reason: 'OscarKubeletIdentity' }),
    ]);
    // …and the token is gone once both the agent and kubelet have their certificates
    const done = await waitFor(
      'the token to be needed by nobody',
      async () => {
        const c = await get<typeof config>(
          `/apis/bootstrap.oscar.dev/v1alpha1/namespaces/${ns}/oscarconfigs/${machine}`,
        );
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

    // in place: a new maxPods restarts kubelet (filePaths), not containerd
    const kubeletPid = (await node.show('kubelet.service', ['MainPID'])).MainPID;
    const containerdPid = (await node.show('containerd.service', ['MainPID'])).MainPID;
    const t1 = Date.now();
    await applyWorkerOscs(42);
    const updated = await waitFor(
      'the Node to show maxPods 42 and be Ready',
      async () => {
        const n = await get<NodeObject>(nodePath);
        return n?.status?.capacity?.pods === '42' && nodeReady(n) ? n : undefined;
      },
      { timeoutMs: 240_000, intervalMs: 1000, onTimeout: () => journalTails(node) },
    );
    process.stderr.write(
      `[e2e] kubelet change → Node Ready with maxPods 42: ${String(Date.now() - t1)} ms\n`,
    );
    expect(updated.status?.capacity?.pods).toBe('42');
    expect((await node.show('kubelet.service', ['MainPID'])).MainPID).not.toBe(kubeletPid);
    expect((await node.show('containerd.service', ['MainPID'])).MainPID).toBe(containerdPid);
    expect(await readFile(node.hostPath('/etc/kubernetes/kubelet/config.yaml'), 'utf8')).toContain(
      'maxPods: 42',
    );
  }, 1_200_000);
});
