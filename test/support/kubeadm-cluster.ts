// The test cluster prepared as `kubeadm join` expects, without a kubeadm control plane: kubeadm's
// own `init` phases run against the test API server (docs/identity.md, "kubeadm join"):
//   upload-config kubeadm — kube-system/kubeadm-config (the ClusterConfiguration) and the Role
//                           kubeadm:nodes-kubeadm-config;
//   upload-config kubelet — kube-system/kubelet-config (the cluster's KubeletConfiguration) and the
//                           Role kubeadm:kubelet-config;
//   bootstrap-token       — kube-public/cluster-info (server + CA of the admin kubeconfig) readable
//                           by anyone, kubeadm:get-nodes, kubeadm's CSR bindings.
// Then what kubeadm makes and oscar does not want goes again: the token kubeadm creates for itself
// (its group is auto-approved in a kubeadm cluster) and the two auto-approval bindings (the generic
// nodeclient/selfnodeclient approval the docs say to leave unbound), so a kubelet certificate here
// comes from oscar's approver or from nobody. deploy/kubeadm binds kubeadm's Roles to oscar's
// token group. kube-controller-manager's bootstrap-signer (hack/testenv) signs cluster-info.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { run } from './exec.js';
import { repoRoot } from './tools.js';

export interface KubeadmClusterEnv {
  server: string;
  kubeconfigPath: string;
  runDir: string;
  info: { kubectlPath: string; versions: { kubernetes: string } };
}

/** kubeadm's bindings that let any holder of its token group (or any node) get a certificate. */
export const KUBEADM_AUTO_APPROVAL = [
  'kubeadm:node-autoapprove-bootstrap',
  'kubeadm:node-autoapprove-certificate-rotation',
];

/** A random token for kubeadm's phase to create (it always creates one) and this helper to delete. */
function throwAwayToken(): { id: string; token: string } {
  const pick = (n: number) =>
    Array.from(randomBytes(n), (b) => 'abcdefghijklmnopqrstuvwxyz0123456789'.charAt(b % 36)).join(
      '',
    );
  const id = pick(6);
  return { id, token: `${id}.${pick(16)}` };
}

function kubeadmConfig(env: KubeadmClusterEnv, token: string): string {
  const endpoint = new URL(env.server).host;
  return `apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
bootstrapTokens:
  - token: ${token}
    ttl: 10m0s
nodeRegistration:
  name: oscar-test-control-plane
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: ${env.info.versions.kubernetes}
clusterName: oscar-test
controlPlaneEndpoint: "${endpoint}"
networking:
  serviceSubnet: 10.0.0.0/24
  podSubnet: 10.88.0.0/16
---
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
`;
}

async function must(what: string, cmd: string, args: string[]): Promise<string> {
  const r = await run(cmd, args, { timeoutMs: 120_000 });
  if (r.code !== 0) throw new Error(`${what} failed (exit ${String(r.code)}): ${r.stderr.trim()}`);
  return r.stdout;
}

/** Runs kubeadm's init phases against the cluster and applies deploy/kubeadm. */
export async function prepareKubeadmCluster(
  env: KubeadmClusterEnv,
  kubeadm: string,
): Promise<void> {
  const dir = await mkdtemp(join(env.runDir, 'kubeadm-'));
  const own = throwAwayToken();
  try {
    const config = join(dir, 'kubeadm.yaml');
    await writeFile(config, kubeadmConfig(env, own.token), { mode: 0o600 });
    const phase = (...p: string[]) =>
      must(`kubeadm init phase ${p.join(' ')}`, kubeadm, [
        'init',
        'phase',
        ...p,
        `--config=${config}`,
        `--kubeconfig=${env.kubeconfigPath}`,
      ]);
    await phase('upload-config', 'kubeadm');
    await phase('upload-config', 'kubelet');
    await phase('bootstrap-token', '--skip-token-print');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  const kubectl = (what: string, ...args: string[]) =>
    must(what, env.info.kubectlPath, ['--kubeconfig', env.kubeconfigPath, ...args]);
  await kubectl(
    "deleting kubeadm's auto-approval bindings",
    'delete',
    'clusterrolebinding',
    '--ignore-not-found',
    ...KUBEADM_AUTO_APPROVAL,
  );
  // kubeadm's own token (its group: system:bootstrappers:kubeadm:default-node-token).
  await kubectl(
    "deleting kubeadm's own token",
    'delete',
    'secret',
    '-n',
    'kube-system',
    '--ignore-not-found',
    `bootstrap-token-${own.id}`,
  );
  await kubectl(
    'kubectl apply -k deploy/identity',
    'apply',
    '-k',
    join(repoRoot, 'deploy', 'identity'),
  );
  await kubectl(
    'kubectl apply -k deploy/kubeadm',
    'apply',
    '-k',
    join(repoRoot, 'deploy', 'kubeadm'),
  );
}
