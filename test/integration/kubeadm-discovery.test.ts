// What `kubeadm join` needs from oscar's user data, against the real API server and
// kube-controller-manager's bootstrap-signer (docs/identity.md, "kubeadm join"): the
// JoinConfiguration of examples/kubeadm-worker/ (verbatim) comes out private (0600) with this
// machine's token, the API server's host:port and the CA pin that openssl computes the way
// kubeadm's docs do; the token gets usage-bootstrap-signing, and the signer's JWS in
// kube-public/cluster-info verifies with that token, as kubeadm's discovery checks it. A config
// that does not hand out its token gets no signing usage, and a provision OSC that puts the token
// in a world-readable file is refused with the field named. (The whole join, with kubeadm and
// kubelet in a booted machine, is test/e2e/kubeadm-join.test.ts.)
import { execFileSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeHttp } from '../../kube/client.js';
import type { DataObject } from '../../controller/kube/types.js';
import type { ConfigObject } from '../../controller/bootstrap/types.js';
import { repoRoot } from '../support/tools.js';
import { Api, startController, waitFor } from './controller-support.js';
import { clusterUnavailable, kubectl, testEnvInfo, uniqueName } from './support/cluster.js';
import { kubeOps } from '../support/cluster.js';

const AGENT_SHA = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
const CLUSTER_INFO = '/api/v1/namespaces/kube-public/configmaps/cluster-info';
const api = clusterUnavailable === null ? new Api() : undefined;
let stopController: (() => Promise<void>) | undefined;
let ns = '';
let madeClusterInfo = false;

function http(): KubeHttp {
  if (!api) throw new Error('no cluster');
  return api.http;
}

const { get, apply } = kubeOps(http, 'test');

const oscPath = (name: string) =>
  `/apis/oscar.dev/v1alpha1/namespaces/${ns}/operatingsystemconfigs/${name}`;
const configPath = (name: string) =>
  `/apis/bootstrap.oscar.dev/v1alpha1/namespaces/${ns}/oscarconfigs/${name}`;

async function exampleDocs(file: string): Promise<Record<string, unknown>[]> {
  const text = await readFile(join(repoRoot, 'examples', file), 'utf8');
  return parseAllDocuments(text).map((d) => {
    const o = d.toJS() as { metadata: Record<string, unknown> };
    return { ...o, metadata: { ...o.metadata, namespace: ns } };
  });
}

async function createConfig(name: string, provision: string, reconcile: string): Promise<void> {
  await apply(configPath(name), {
    apiVersion: 'bootstrap.oscar.dev/v1alpha1',
    kind: 'OscarConfig',
    metadata: { name, namespace: ns },
    spec: { provisionRef: { name: provision }, reconcileRef: { name: reconcile } },
  });
}

interface WriteFile {
  path: string;
  content: string;
  permissions?: string;
}

async function userDataFiles(machine: string): Promise<WriteFile[]> {
  const secret = await waitFor(`user data of ${machine}`, () =>
    get<DataObject>(`/api/v1/namespaces/${ns}/secrets/${machine}`),
  );
  const doc = parse(Buffer.from(secret.data?.value ?? '', 'base64').toString('utf8')) as {
    write_files: WriteFile[];
  };
  return doc.write_files;
}

async function tokenSecret(config: string): Promise<Record<string, string>> {
  const c = await waitFor(`${config}'s token id`, async () => {
    const o = await get<ConfigObject>(configPath(config));
    return o?.status?.bootstrapTokenID ? o : undefined;
  });
  const id = c.status?.bootstrapTokenID ?? '';
  const s = await get<{ data: Record<string, string> }>(
    `/api/v1/namespaces/kube-system/secrets/bootstrap-token-${id}`,
  );
  return Object.fromEntries(
    Object.entries(s?.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]),
  );
}

/** kubeadm's documented recipe for the CA pin. */
function opensslCaHash(caPath: string): string {
  const hex = execFileSync(
    'sh',
    [
      '-c',
      'openssl x509 -pubkey -noout -in "$1" | openssl pkey -pubin -outform der | sha256sum',
      'sh',
      caPath,
    ],
    { encoding: 'utf8' },
  ).split(' ')[0];
  return `sha256:${hex ?? ''}`;
}

/** kubeadm's cluster-info, as `kubeadm init phase bootstrap-token` writes it (server and CA). */
async function ensureClusterInfo(): Promise<void> {
  if ((await get(CLUSTER_INFO)) !== undefined) return;
  const info = testEnvInfo();
  const ca = Buffer.from(await readFile(info.caPath, 'utf8')).toString('base64');
  const kubeconfig = `apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority-data: ${ca}\n    server: ${info.server}\n  name: ""\ncontexts: null\ncurrent-context: ""\nusers: null\n`;
  await apply(CLUSTER_INFO, {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'cluster-info', namespace: 'kube-public' },
    data: { kubeconfig },
  });
  madeClusterInfo = true;
}

/** examples/kubeadm-worker/'s OSCs, a plain provision OSC and one that would leak the token. */
async function applyOscs(): Promise<void> {
  for (const file of ['kubeadm-worker/provision.yaml', 'kubeadm-worker/reconcile.yaml']) {
    for (const doc of await exampleDocs(file)) {
      const name = (doc.metadata as { name: string }).name;
      await apply(oscPath(name), doc);
    }
  }
  await api?.applyOsc(ns, 'plain', {
    type: 'ubuntu',
    purpose: 'provision',
    files: [{ path: '/etc/m', content: { inline: { data: '{{ machine.name }}\n' } } }],
  });
  await api?.applyOsc(ns, 'leaky', {
    type: 'ubuntu',
    purpose: 'provision',
    files: [
      {
        path: '/etc/kubernetes/join.yaml',
        permissions: '0644',
        content: { inline: { data: 'token: {{ bootstrap.token }}\n' } },
      },
    ],
  });
}

beforeAll(async () => {
  if (clusterUnavailable !== null) return;
  ns = uniqueName('kubeadm');
  await apply(`/api/v1/namespaces/${ns}`, {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: ns },
  });
  await ensureClusterInfo();
  await applyOscs();
  const started = await startController([ns], {
    bootstrap: {
      enabled: true,
      agentUrl: 'http://127.0.0.1:9/oscar-agent',
      agentSha256: AGENT_SHA,
    },
  });
  stopController = started.stop;
  await api?.waitReady(ns, 'kubeadm-worker-reconcile');
}, 300_000);

afterAll(async () => {
  await stopController?.();
  if (ns) await kubectl(['delete', 'namespace', ns, '--wait=false']);
  if (madeClusterInfo) await kubectl(['delete', 'configmap', '-n', 'kube-public', 'cluster-info']);
});

describe.skipIf(clusterUnavailable !== null)('user data for kubeadm join', () => {
  it('holds the machine’s token, the endpoint and the CA pin in a private file; cluster-info is signed for that token', async () => {
    const m = `${ns}-w1`;
    await createConfig(m, 'kubeadm-worker-provision', 'kubeadm-worker-reconcile');
    const files = await userDataFiles(m);
    const joinFile = files.find((f) => f.path === '/etc/kubernetes/kubeadm-join.yaml');
    expect(joinFile?.permissions).toBe('0600');
    const joinConfig = parse(joinFile?.content ?? '') as {
      kind: string;
      discovery: {
        bootstrapToken: { apiServerEndpoint: string; token: string; caCertHashes: string[] };
      };
      nodeRegistration: { name: string };
    };
    const info = testEnvInfo();
    const bt = joinConfig.discovery.bootstrapToken;
    expect(joinConfig.kind).toBe('JoinConfiguration');
    expect(bt.apiServerEndpoint).toBe(new URL(info.server).host);
    expect(bt.caCertHashes).toEqual([opensslCaHash(info.caPath)]);
    expect(joinConfig.nodeRegistration.name).toBe(m);
    // the same token as oscar's own bootstrap kubeconfig
    const kc = parse(
      files.find((f) => f.path === '/etc/oscar/bootstrap-kubeconfig')?.content ?? '',
    ) as {
      users: { user: { token: string } }[];
    };
    expect(bt.token).toBe(kc.users[0]?.user.token);
    const [id, secret] = bt.token.split('.');

    const token = await tokenSecret(m);
    expect(token['token-id']).toBe(id);
    expect(token['usage-bootstrap-signing']).toBe('true');
    const cm = await waitFor(`cluster-info signed for ${id ?? ''}`, async () => {
      const c = await get<{ data: Record<string, string> }>(CLUSTER_INFO);
      return c?.data[`jws-kubeconfig-${id ?? ''}`] ? c : undefined;
    });
    // kubeadm's check: a detached HS256 JWS over the kubeconfig, keyed by the token's secret
    const [header, payload, signature] = (cm.data[`jws-kubeconfig-${id ?? ''}`] ?? '').split('.');
    expect(payload).toBe('');
    expect(JSON.parse(Buffer.from(header ?? '', 'base64url').toString('utf8'))).toMatchObject({
      alg: 'HS256',
      kid: id,
    });
    const input = `${header ?? ''}.${Buffer.from(cm.data.kubeconfig ?? '').toString('base64url')}`;
    expect(signature).toBe(
      createHmac('sha256', secret ?? '')
        .update(input)
        .digest('base64url'),
    );
  });

  it('a config that does not hand out its token gets no signing usage', async () => {
    const m = `${ns}-plain`;
    await createConfig(m, 'plain', 'kubeadm-worker-reconcile');
    const token = await tokenSecret(m);
    expect(token['usage-bootstrap-authentication']).toBe('true');
    expect(token['usage-bootstrap-signing']).toBeUndefined();
  });

  it('refuses the token in a file others can read, naming the field and the fix', async () => {
    const m = `${ns}-leaky`;
    await createConfig(m, 'leaky', 'kubeadm-worker-reconcile');
    const c = await waitFor('Ready=False', async () => {
      const o = await get<ConfigObject>(configPath(m));
      const ready = o?.status?.conditions?.find((x) => x.type === 'Ready');
      return ready?.status === 'False' ? ready : undefined;
    });
    expect(c.reason).toBe('InvalidProvisionConfig');
    expect(c.message).toContain('spec.files[0].content.inline.data');
    expect(c.message).toMatch(/\{\{ bootstrap\.token \}\} is the machine's credential/);
    expect(await get(`/api/v1/namespaces/${ns}/secrets/${m}`)).toBeUndefined();
  });
});
