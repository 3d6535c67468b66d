// kubelet's client certificate through oscar's approver, against the real API server and
// kube-controller-manager's signer (docs/identity.md, "kubelet"): a machine whose OscarConfig sets
// spec.kubeletBootstrap gets one certificate CN=system:node:<machine>, O=system:nodes with its own
// bootstrap token, and its node renews it with that certificate; each refusal a client can provoke
// is a Denied CSR with its reason (wrong node name, another machine's token, extra groups, SANs, a
// config without kubeletBootstrap, a second use of the token). The token lives until the agent's
// certificate is issued too, and the config's status says who still needs it.
import { execFileSync } from 'node:child_process';
import { X509Certificate, type KeyObject } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderKubeconfig } from '../../hack/testenv/kubeconfig.js';
import { CONTENT_APPLY_PATCH, type KubeHttp } from '../../kube/client.js';
import { kubeHttp, loadKubeCredentials } from '../../kube/credentials.js';
import type { DataObject } from '../../controller/kube/types.js';
import type { ConfigObject } from '../../controller/bootstrap/types.js';
import { NodeIdentity } from '../../agent/identity/identity.js';
import { certificateRequest, newNodeKey } from '../../agent/identity/csr.js';
import { CertificateStore } from '../../agent/identity/store.js';
import { createLogger } from '../../log/logger.js';
import { Api, demoSpec, startController, waitFor } from './controller-support.js';
import { clusterUnavailable, kubectl, testEnvInfo, uniqueName } from './support/cluster.js';
import { kubeOps } from '../support/cluster.js';

const AGENT_SHA = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
const CSRS = '/apis/certificates.k8s.io/v1/certificatesigningrequests';
const KUBELET_SIGNER = 'kubernetes.io/kube-apiserver-client-kubelet';
const api = clusterUnavailable === null ? new Api() : undefined;
let stopController: (() => Promise<void>) | undefined;
let ns = '';
let dir = '';

function http(): KubeHttp {
  if (!api) throw new Error('no cluster');
  return api.http;
}

const { get } = kubeOps(http, 'test');

const configPath = (name: string): string =>
  `/apis/bootstrap.oscar.dev/v1alpha1/namespaces/${ns}/oscarconfigs/${name}`;

async function createConfig(name: string, kubeletBootstrap: boolean): Promise<void> {
  await http().request('PATCH', configPath(name), {
    query: { fieldManager: 'test', force: true },
    contentType: CONTENT_APPLY_PATCH,
    body: {
      apiVersion: 'bootstrap.oscar.dev/v1alpha1',
      kind: 'OscarConfig',
      metadata: { name, namespace: ns },
      spec: { provisionRef: { name: 'prov' }, reconcileRef: { name: 'rec' }, kubeletBootstrap },
    },
  });
}

/** The machine's token, read from its user data (what kubelet's bootstrap kubeconfig holds). */
async function tokenOf(machine: string): Promise<{ http: KubeHttp; path: string; id: string }> {
  const secret = await waitFor(`user data of ${machine}`, () =>
    get<DataObject>(`/api/v1/namespaces/${ns}/secrets/${machine}`),
  );
  const doc = parse(Buffer.from(secret.data?.value ?? '', 'base64').toString('utf8')) as {
    write_files: { path: string; content: string }[];
  };
  const kc = parse(
    doc.write_files.find((f) => f.path === '/etc/oscar/bootstrap-kubeconfig')?.content ?? '',
  ) as { users: { user: { token: string } }[] };
  const token = kc.users[0]?.user.token ?? '';
  const info = testEnvInfo();
  const path = join(dir, `${machine}.kubeconfig`);
  await writeFile(
    path,
    renderKubeconfig({
      name: 'oscar',
      server: info.server,
      caPem: await readFile(info.caPath, 'utf8'),
      credentials: { kind: 'token', token },
    }),
    { mode: 0o600 },
  );
  return { http: kubeHttp(await loadKubeCredentials(path)), path, id: token.split('.')[0] ?? '' };
}

interface Csr {
  status?: {
    certificate?: string;
    conditions?: { type: string; reason?: string; message?: string }[];
  };
}

let seq = 0;
/** Creates a kubelet client CSR as `h` and waits for oscar's decision (and the signature). */
async function kubeletCsr(
  h: KubeHttp,
  request: string,
  usages = ['digital signature', 'client auth'],
): Promise<{
  name: string;
  condition: { type: string; reason?: string; message?: string };
  cert?: string;
}> {
  const name = `${ns}-kubelet-${String(++seq)}`;
  await h.request('POST', CSRS, {
    body: {
      apiVersion: 'certificates.k8s.io/v1',
      kind: 'CertificateSigningRequest',
      metadata: { name },
      spec: {
        request: Buffer.from(request).toString('base64'),
        signerName: KUBELET_SIGNER,
        usages,
      },
    },
  });
  const csr = await waitFor(`CSR ${name} decided`, async () => {
    const c = await get<Csr>(`${CSRS}/${name}`);
    const cond = c?.status?.conditions?.[0];
    if (!cond) return undefined;
    return cond.type !== 'Approved' || c.status?.certificate ? c : undefined;
  });
  const condition = csr.status?.conditions?.[0] ?? { type: 'none' };
  const cert = csr.status?.certificate;
  return {
    name,
    condition,
    ...(cert ? { cert: Buffer.from(cert, 'base64').toString('utf8') } : {}),
  };
}

const subject = (cn: string, orgs = ['system:nodes']) => ({ commonName: cn, organizations: orgs });
const pemFor = (key: KeyObject, cn: string, orgs?: string[]) =>
  certificateRequest(key, subject(cn, orgs));

async function config(name: string): Promise<ConfigObject | undefined> {
  return get<ConfigObject>(configPath(name));
}

beforeAll(async () => {
  if (clusterUnavailable !== null) return;
  dir = await mkdtemp(join(tmpdir(), 'oscar-kubelet-identity-'));
  ns = uniqueName('kubelet-id');
  await http().request('PATCH', `/api/v1/namespaces/${ns}`, {
    query: { fieldManager: 'test', force: true },
    contentType: CONTENT_APPLY_PATCH,
    body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } },
  });
  const applied = await kubectl(['apply', '-k', 'deploy/identity']);
  if (applied.code !== 0) throw new Error(applied.stderr);
  await api?.applyOsc(ns, 'prov', { ...demoSpec('provision'), type: 'ubuntu' });
  await api?.applyOsc(ns, 'rec', demoSpec('reconcile'));
  const started = await startController([ns], {
    bootstrap: {
      enabled: true,
      agentUrl: 'http://127.0.0.1:9/oscar-agent',
      agentSha256: AGENT_SHA,
      nodeCertificateMaxSeconds: 3600,
    },
  });
  stopController = started.stop;
  await api?.waitReady(ns, 'rec');
}, 300_000);

afterAll(async () => {
  await stopController?.();
  if (ns) await kubectl(['delete', 'namespace', ns, '--wait=false']);
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe.skipIf(clusterUnavailable !== null)(
  "kubelet's certificate through oscar's approver",
  () => {
    const m1 = (): string => `${ns}-m1`;
    const m2 = (): string => `${ns}-m2`;
    const off = (): string => `${ns}-off`;
    let t1: Awaited<ReturnType<typeof tokenOf>>;
    let t2: Awaited<ReturnType<typeof tokenOf>>;
    const key = newNodeKey();
    let kubeletCert = '';

    it('refuses, one by one: another node name, another machine’s token, extra groups, SANs, no kubeletBootstrap', async () => {
      await createConfig(m1(), true);
      await createConfig(m2(), true);
      await createConfig(off(), false);
      t1 = await tokenOf(m1());
      t2 = await tokenOf(m2());
      const tOff = await tokenOf(off());
      const k = newNodeKey();
      const refusals: [string, string | undefined][] = [];
      const refused = async (what: string, h: KubeHttp, request: string): Promise<void> => {
        const r = await kubeletCsr(h, request);
        expect(r.condition.type, what).toBe('Denied');
        refusals.push([what, r.condition.reason]);
      };
      await refused('m1 token, node name m2', t1.http, pemFor(k, `system:node:${m2()}`));
      await refused('m2 token, node name m1', t2.http, pemFor(k, `system:node:${m1()}`));
      await refused(
        'm1 token, extra group system:masters',
        t1.http,
        pemFor(k, `system:node:${m1()}`, ['system:nodes', 'system:masters']),
      );
      const keyFile = join(dir, 'san.key');
      execFileSync('openssl', [
        'ecparam',
        '-name',
        'prime256v1',
        '-genkey',
        '-noout',
        '-out',
        keyFile,
      ]);
      const san = execFileSync('openssl', [
        'req',
        '-new',
        '-key',
        keyFile,
        '-subj',
        `/O=system:nodes/CN=system:node:${m1()}`,
        '-addext',
        'subjectAltName=IP:127.0.0.1',
      ]).toString('utf8');
      await refused('m1 token, SANs', t1.http, san);
      await refused(
        'token of a config without kubeletBootstrap',
        tOff.http,
        pemFor(k, `system:node:${off()}`),
      );
      expect(refusals).toEqual([
        ['m1 token, node name m2', 'WrongSubject'],
        ['m2 token, node name m1', 'WrongSubject'],
        ['m1 token, extra group system:masters', 'WrongSubject'],
        ['m1 token, SANs', 'AttributesNotAllowed'],
        ['token of a config without kubeletBootstrap', 'KubeletBootstrapOff'],
      ]);
      // none of it used a token: m1 and m2 still hold theirs, for both consumers
      expect((await config(m1()))?.status?.bootstrapTokenNeededBy).toEqual(['agent', 'kubelet']);
      const events = await api?.listEvents(ns);
      expect(events?.filter((e) => e.reason === 'IdentityDenied').length).toBeGreaterThanOrEqual(5);
    }, 180_000);

    it("approves kubelet's exact request with the machine's token; the token stays for the agent", async () => {
      const r = await kubeletCsr(t1.http, pemFor(key, `system:node:${m1()}`));
      expect(r.condition).toMatchObject({ type: 'Approved', reason: 'OscarKubeletIdentity' });
      kubeletCert = r.cert ?? '';
      const cert = new X509Certificate(kubeletCert);
      expect(cert.subject.split('\n').sort()).toEqual([`CN=system:node:${m1()}`, 'O=system:nodes']);
      const c = await waitFor('KubeletIdentity=True', async () => {
        const got = await config(m1());
        return got?.status?.conditions?.some(
          (x) => x.type === 'KubeletIdentity' && x.status === 'True',
        )
          ? got
          : undefined;
      });
      expect(c.status?.bootstrapTokenNeededBy).toEqual(['agent']);
      expect(c.status?.conditions?.find((x) => x.type === 'BootstrapTokenAvailable')).toMatchObject(
        {
          status: 'True',
          reason: 'AwaitingAgent',
        },
      );
      expect(
        await get(`/api/v1/namespaces/kube-system/secrets/bootstrap-token-${t1.id}`),
      ).toBeDefined();
      // a second kubelet certificate with the same token is refused
      const again = await kubeletCsr(t1.http, pemFor(newNodeKey(), `system:node:${m1()}`));
      expect(again.condition).toMatchObject({ type: 'Denied', reason: 'TokenAlreadyUsed' });
    }, 120_000);

    it('the agent’s certificate ends the token: deleted, nobody needs it', async () => {
      const identity = new NodeIdentity({
        machine: m1(),
        configUid: (await config(m1()))?.metadata.uid ?? '',
        store: new CertificateStore(join(dir, 'm1-pki')),
        bootstrap: await loadKubeCredentials(t1.path),
        httpFor: (c) => kubeHttp(c),
        lifetimeSeconds: 600,
        log: createLogger({ component: 'agent', level: 'silent' }),
        pollMs: 200,
        waitMs: 60_000,
      });
      await identity.ensure();
      await waitFor('token deleted', async () =>
        (await get(`/api/v1/namespaces/kube-system/secrets/bootstrap-token-${t1.id}`)) === undefined
          ? true
          : undefined,
      );
      const c = await waitFor('nobody needs the token', async () => {
        const got = await config(m1());
        return got?.status?.bootstrapTokenNeededBy?.length === 0 ? got : undefined;
      });
      expect(c.status?.conditions?.find((x) => x.type === 'BootstrapTokenAvailable')).toMatchObject(
        {
          status: 'False',
          reason: 'IdentityIssued',
        },
      );
    }, 120_000);

    it('the node renews with its own certificate; it cannot ask for another name', async () => {
      const path = join(dir, 'kubelet.kubeconfig');
      const info = testEnvInfo();
      await writeFile(
        path,
        renderKubeconfig({
          name: 'oscar',
          server: info.server,
          caPem: await readFile(info.caPath, 'utf8'),
          credentials: {
            kind: 'clientCert',
            certPem: kubeletCert,
            keyPem: key.export({ type: 'pkcs8', format: 'pem' }).toString(),
          },
        }),
        { mode: 0o600 },
      );
      const node = kubeHttp(await loadKubeCredentials(path));
      const renewed = await kubeletCsr(node, pemFor(newNodeKey(), `system:node:${m1()}`));
      expect(renewed.condition).toMatchObject({ type: 'Approved', reason: 'OscarKubeletRenewal' });
      // the API server itself refuses a node's CSR for another node name at create (the
      // approver's own refusal of that case is in controller/identity/kubelet.test.ts)
      await expect(kubeletCsr(node, pemFor(newNodeKey(), `system:node:${m2()}`))).rejects.toThrow(
        /can only create a node CSR with CN=system:node:/,
      );
    }, 120_000);
  },
);
