// The node's own identity against the real API server and kube-controller-manager's signer:
// oscar's controller (the approver in it) and the agent's identity module, in this process. A
// machine's bootstrap token buys one certificate, CN=oscar:node:<machine>, O=oscar:nodes,
// O=oscar:config:<its config's UID>; the
// token is gone afterwards; the certificate (the agent's own key, signed by the test CA) can do
// exactly what docs/identity.md says and nothing else — shown with real requests made with it;
// each refusal of the approver that a client can provoke here is a Denied CSR and an Event.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { parse } from 'yaml';
import { renderKubeconfig } from '../../hack/testenv/kubeconfig.js';
import { ApiError, CONTENT_MERGE_PATCH, type KubeHttp } from '../../kube/client.js';
import { kubeHttp, loadKubeCredentials, type KubeCredentials } from '../../kube/credentials.js';
import type { DataObject, KubeObject } from '../../controller/kube/types.js';
import type { ConfigObject } from '../../controller/bootstrap/types.js';
import { NodeIdentity } from '../../agent/identity/identity.js';
import { certificateRequest, newNodeKey } from '../../agent/identity/csr.js';
import { CertificateStore, subjectAttributes } from '../../agent/identity/store.js';
import { createLogger } from '../../log/logger.js';
import type { ClaimedNode } from '../../controller/identity/node-claim.js';
import { Api, demoSpec, startController, waitFor } from './controller-support.js';
import { clusterUnavailable, kubectl, testEnvInfo, uniqueName } from './support/cluster.js';
import { kubeOps } from '../support/cluster.js';

const AGENT_SHA = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
const CSRS = '/apis/certificates.k8s.io/v1/certificatesigningrequests';
const api = clusterUnavailable === null ? new Api() : undefined;
let stopController: (() => Promise<void>) | undefined;
let metricsAddress = '';
let ns = '';
let other = '';
let dir = '';

function http(): KubeHttp {
  if (!api) throw new Error('no cluster');
  return api.http;
}

const { get, apply } = kubeOps(http, 'test');

const configPath = (name: string, namespace = ns): string =>
  `/apis/bootstrap.oscar.dev/v1alpha1/namespaces/${namespace}/oscarconfigs/${name}`;

async function createConfig(name: string, namespace = ns): Promise<void> {
  await apply(configPath(name, namespace), {
    apiVersion: 'bootstrap.oscar.dev/v1alpha1',
    kind: 'OscarConfig',
    metadata: { name, namespace },
    spec: { provisionRef: { name: 'prov' }, reconcileRef: { name: 'rec' } },
  });
}

/** The machine's user data (cloud-config) → a bootstrap kubeconfig file with its token. */
async function bootstrapKubeconfig(
  machine: string,
  namespace = ns,
): Promise<{ path: string; tokenId: string }> {
  const secret = await waitFor(
    `user data of ${machine}`,
    () => get<DataObject>(`/api/v1/namespaces/${namespace}/secrets/${machine}`),
    {
      onTimeout: async () =>
        `its OscarConfig's status: ${JSON.stringify((await get<ConfigObject>(configPath(machine, namespace)))?.status)}`,
    },
  );
  const doc = parse(Buffer.from(secret.data?.value ?? '', 'base64').toString('utf8')) as {
    write_files: { path: string; content: string }[];
  };
  const kc = parse(
    doc.write_files.find((f) => f.path === '/etc/oscar/bootstrap-kubeconfig')?.content ?? '',
  ) as { users: { user: { token: string } }[] };
  const token = kc.users[0]?.user.token ?? '';
  const info = testEnvInfo();
  const path = join(dir, `${machine}.bootstrap-kubeconfig`);
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
  return { path, tokenId: token.split('.')[0] ?? '' };
}

function logger(lines: string[]) {
  return createLogger({
    component: 'agent',
    level: 'debug',
    destination: new Writable({
      write(chunk: Buffer, _e, cb) {
        lines.push(chunk.toString('utf8'));
        cb();
      },
    }),
  });
}

/** The UID of the config named like the machine: what its certificate is bound to. */
async function uidOf(machine: string, namespace = ns): Promise<string> {
  return (await get<ConfigObject>(configPath(machine, namespace)))?.metadata.uid ?? '';
}

async function identityFor(
  machine: string,
  bootstrapPath: string,
  lines: string[] = [],
  pki = `${machine}-pki`,
  namespace = ns,
) {
  const identity = new NodeIdentity({
    machine,
    configUid: await uidOf(machine, namespace),
    store: new CertificateStore(join(dir, pki)),
    bootstrap: await loadKubeCredentials(bootstrapPath),
    httpFor: (c: KubeCredentials) => kubeHttp(c),
    lifetimeSeconds: 600,
    log: logger(lines),
    pollMs: 200,
    waitMs: 60_000,
  });
  return identity;
}

/** The HTTP status of a request (200 family → 200). */
async function status(h: KubeHttp, method: string, path: string, body?: unknown, extra = {}) {
  try {
    await h.request(method, path, { ...(body === undefined ? {} : { body }), ...extra });
    return 200;
  } catch (error) {
    if (error instanceof ApiError) return error.status;
    throw error;
  }
}

interface Csr {
  status?: { conditions?: { type: string; reason?: string; message?: string }[] };
}

async function csrAs(
  h: KubeHttp,
  name: string,
  subject: { commonName: string; organizations: string[] },
): Promise<{ type: string; reason?: string; message?: string }> {
  return csrWith(h, name, certificateRequest(newNodeKey(), subject));
}

/** A CSR whose spec.request is exactly `pem`, created as `h`; its first condition once decided. */
async function csrWith(
  h: KubeHttp,
  name: string,
  pem: string,
): Promise<{ type: string; reason?: string; message?: string }> {
  await h.request('POST', CSRS, {
    body: {
      apiVersion: 'certificates.k8s.io/v1',
      kind: 'CertificateSigningRequest',
      metadata: { name },
      spec: {
        request: Buffer.from(pem).toString('base64'),
        signerName: 'kubernetes.io/kube-apiserver-client',
        usages: ['digital signature', 'client auth'],
        expirationSeconds: 600,
      },
    },
  });
  const csr = await waitFor(`CSR ${name} decided`, async () => {
    const c = await get<Csr>(`${CSRS}/${name}`);
    return c?.status?.conditions?.length ? c : undefined;
  });
  return csr.status?.conditions?.[0] ?? { type: 'none' };
}

beforeAll(async () => {
  if (clusterUnavailable !== null) return;
  dir = await mkdtemp(join(tmpdir(), 'oscar-identity-'));
  ns = uniqueName('identity');
  other = uniqueName('identity-other');
  for (const n of [ns, other]) {
    await apply(`/api/v1/namespaces/${n}`, {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: n },
    });
  }
  const applied = await kubectl(['apply', '-k', 'deploy/identity']);
  if (applied.code !== 0) throw new Error(applied.stderr);
  await api?.applyOsc(ns, 'prov', { ...demoSpec('provision'), type: 'ubuntu' });
  await api?.applyOsc(ns, 'rec', demoSpec('reconcile'));
  await api?.applyOsc(ns, 'other', demoSpec('reconcile'));
  // a machine of namespace `other` bootstraps too (a name reused across namespaces)
  await api?.applyOsc(other, 'prov', { ...demoSpec('provision'), type: 'ubuntu' });
  await api?.applyOsc(other, 'rec', demoSpec('reconcile'));
  // `other` too: a config there naming one of this namespace's machines must be seen to matter
  const started = await startController([ns, other], {
    bootstrap: {
      enabled: true,
      agentUrl: 'http://127.0.0.1:9/oscar-agent',
      agentSha256: AGENT_SHA,
      nodeCertificateMaxSeconds: 3600,
    },
  });
  stopController = started.stop;
  metricsAddress = started.handle.metricsAddress ?? '';
  await api?.waitReady(ns, 'rec');
  await api?.waitReady(ns, 'other');
  await api?.waitReady(other, 'rec');
}, 300_000);

afterAll(async () => {
  await stopController?.();
  if (ns) {
    for (const n of [ns, other]) await kubectl(['delete', 'namespace', n, '--wait=false']);
    await kubectl([
      'delete',
      'operatingsystemconfignode',
      `${ns}-m1`,
      `${ns}-m2`,
      `${ns}-m5`,
      `${ns}-m6`,
      '--ignore-not-found',
    ]);
  }
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe.skipIf(clusterUnavailable !== null)('node identity (real API server and signer)', () => {
  let m1: NodeIdentity;
  let m1Http: KubeHttp;
  let m1Bootstrap = { path: '', tokenId: '' };
  const machine = (): string => `${ns}-m1`;

  it('a machine trades its bootstrap token for its own certificate, once', async () => {
    // machine names are cluster-wide (OperatingSystemConfigNodes are): the config's name here
    await createConfig(machine());
    m1Bootstrap = await bootstrapKubeconfig(machine());
    const lines: string[] = [];
    m1 = await identityFor(machine(), m1Bootstrap.path, lines);
    const cert = await m1.ensure();
    expect(subjectAttributes(cert.cert.subject)).toEqual([
      `CN=oscar:node:${machine()}`,
      `O=oscar:config:${await uidOf(machine())}`,
      'O=oscar:nodes',
    ]);
    expect(cert.cert.issuer).toBe(
      new (await import('node:crypto')).X509Certificate(await readFile(testEnvInfo().caPath))
        .subject,
    );
    const lifetime =
      new Date(cert.cert.validTo).getTime() - new Date(cert.cert.validFrom).getTime();
    expect(lifetime).toBeLessThanOrEqual(600_000 + 300_000); // the signer backdates 5 min at most
    // the token is gone, and the config says why (before it went)
    await waitFor('token deleted', async () =>
      (await get(
        `/api/v1/namespaces/kube-system/secrets/bootstrap-token-${m1Bootstrap.tokenId}`,
      )) === undefined
        ? true
        : undefined,
    );
    const config = await get<ConfigObject>(configPath(machine()));
    const cond = config?.status?.conditions?.find((c) => c.type === 'BootstrapTokenAvailable');
    expect(cond).toMatchObject({ status: 'False', reason: 'IdentityIssued' });
    // the per-machine Role and RoleBinding, owned by the config
    const role = await get<KubeObject>(
      `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles/oscar-node-${machine()}`,
    );
    expect(role?.metadata.ownerReferences?.[0]).toMatchObject({
      kind: 'OscarConfig',
      name: machine(),
    });
    const events = await api?.listEvents(ns);
    expect(events?.some((e) => e.reason === 'IdentityIssued')).toBe(true);
    m1Http = kubeHttp(m1);
  }, 120_000);

  it('a second start uses the stored certificate: no token needed', async () => {
    const again = await identityFor(machine(), m1Bootstrap.path);
    const cert = await again.ensure();
    expect(cert.cert.serialNumber).toBe(m1.certificate?.cert.serialNumber);
  });

  it("the used token authenticates no more (a second machine presenting m1's token)", async () => {
    const h = kubeHttp(await loadKubeCredentials(m1Bootstrap.path));
    // The token authenticator reads Secrets from a cache: the deletion reaches it shortly.
    await waitFor(
      'the deleted token to be refused',
      async () => (await status(h, 'GET', `${CSRS}/none`)) === 401,
      15_000,
    );
  });

  it('the certificate can do exactly what docs/identity.md lists (real requests with it)', async () => {
    const h = m1Http;
    const secrets = `/api/v1/namespaces/${ns}/secrets`;
    const me = machine();
    const nodes = '/apis/oscar.dev/v1alpha1/operatingsystemconfignodes';
    const nodeBody = (name: string, spec?: unknown) => ({
      apiVersion: 'oscar.dev/v1alpha1',
      kind: 'OperatingSystemConfigNode',
      metadata: { name },
      ...(spec ? { spec } : {}),
    });
    // someone else's node object, made by the admin
    await http().request('POST', nodes, { body: nodeBody(`${ns}-m9`) });
    const byName = { query: { fieldSelector: `metadata.name=oscar-rec-reconcile` } };
    const rows: [string, number][] = [
      ['get its reconcile Secret', await status(h, 'GET', `${secrets}/oscar-rec-reconcile`)],
      ['list its reconcile Secret by name', await status(h, 'GET', secrets, undefined, byName)],
      [
        'get a revision slot of its OSC (absent: 404, not 403)',
        await status(h, 'GET', `${secrets}/oscar-rec-rev-0`),
      ],
      ['get another OSC’s Secret', await status(h, 'GET', `${secrets}/oscar-other-reconcile`)],
      ['get its user data Secret', await status(h, 'GET', `${secrets}/${me}`)],
      ['list all Secrets', await status(h, 'GET', secrets)],
      [
        'get the same name in another namespace',
        await status(h, 'GET', `/api/v1/namespaces/${other}/secrets/oscar-rec-reconcile`),
      ],
      [
        'update its reconcile Secret',
        await status(
          h,
          'PATCH',
          `${secrets}/oscar-rec-reconcile`,
          {},
          { contentType: CONTENT_MERGE_PATCH },
        ),
      ],
      [
        'create its node object with spec.revision (grant itself)',
        await status(
          h,
          'POST',
          nodes,
          nodeBody(me, {
            revision: {
              namespace: ns,
              osc: 'rec',
              number: 1,
              secretName: 'x',
              checksum: 'a'.repeat(64),
              grantedTime: '2026-01-01T00:00:00Z',
            },
          }),
        ),
      ],
      [
        'create its node object without its config UID label',
        await status(h, 'POST', nodes, nodeBody(me)),
      ],
      [
        'create its node object with its label (it exists)',
        await status(h, 'POST', nodes, {
          ...nodeBody(me),
          metadata: { name: me, labels: { 'oscar.dev/config-uid': await uidOf(me) } },
        }),
      ],
      ['create another node’s object', await status(h, 'POST', nodes, nodeBody(`${ns}-m3`))],
      ['get its node object', await status(h, 'GET', `${nodes}/${me}`)],
      [
        'list its node object by name (how grant mode watches it)',
        await status(h, 'GET', nodes, undefined, {
          query: { fieldSelector: `metadata.name=${me}` },
        }),
      ],
      // another machine's report (any namespace's: node objects are cluster-wide) holds its
      // failing units' journal lines and drifted paths
      ['get another node’s object', await status(h, 'GET', `${nodes}/${ns}-m9`)],
      ['list all node objects', await status(h, 'GET', nodes)],
      [
        'list another node’s object by name',
        await status(h, 'GET', nodes, undefined, {
          query: { fieldSelector: `metadata.name=${ns}-m9` },
        }),
      ],
      [
        'patch its node status',
        await status(
          h,
          'PATCH',
          `${nodes}/${me}/status`,
          { status: { observedGeneration: 1 } },
          { contentType: CONTENT_MERGE_PATCH },
        ),
      ],
      [
        'patch another node’s status',
        await status(
          h,
          'PATCH',
          `${nodes}/${ns}-m9/status`,
          { status: { observedGeneration: 1 } },
          { contentType: CONTENT_MERGE_PATCH },
        ),
      ],
      [
        'patch its node spec (grant itself)',
        await status(
          h,
          'PATCH',
          `${nodes}/${me}`,
          { spec: {} },
          { contentType: CONTENT_MERGE_PATCH },
        ),
      ],
      ['delete its node object', await status(h, 'DELETE', `${nodes}/${me}`)],
      ['list CSRs', await status(h, 'GET', CSRS)],
      [
        'read OSCs',
        await status(h, 'GET', `/apis/oscar.dev/v1alpha1/namespaces/${ns}/operatingsystemconfigs`),
      ],
      [
        'read OscarConfigs',
        await status(h, 'GET', `/apis/bootstrap.oscar.dev/v1alpha1/namespaces/${ns}/oscarconfigs`),
      ],
      ['read ConfigMaps', await status(h, 'GET', `/api/v1/namespaces/${ns}/configmaps`)],
      // a Node by name, read after a reboot inside try mode (no Node here: 404, not 403)
      ['get its Kubernetes Node', await status(h, 'GET', `/api/v1/nodes/${me}`)],
      ['get another Kubernetes Node', await status(h, 'GET', `/api/v1/nodes/${ns}-m9`)],
      ['list Nodes', await status(h, 'GET', '/api/v1/nodes')],
      [
        'patch its Kubernetes Node',
        await status(h, 'PATCH', `/api/v1/nodes/${me}`, {}, { contentType: CONTENT_MERGE_PATCH }),
      ],
      [
        'read the bootstrap tokens',
        await status(h, 'GET', '/api/v1/namespaces/kube-system/secrets'),
      ],
    ];
    expect(Object.fromEntries(rows)).toEqual({
      'get its reconcile Secret': 200,
      'list its reconcile Secret by name': 200,
      'get a revision slot of its OSC (absent: 404, not 403)': 404,
      'get another OSC’s Secret': 403,
      'get its user data Secret': 403,
      'list all Secrets': 403,
      'get the same name in another namespace': 403,
      'update its reconcile Secret': 403,
      'create its node object with spec.revision (grant itself)': 403,
      // the approver made it, labelled with its config's UID, before it approved
      'create its node object without its config UID label': 403,
      'create its node object with its label (it exists)': 409,
      'create another node’s object': 403,
      'get its node object': 200,
      'list its node object by name (how grant mode watches it)': 200,
      'get another node’s object': 403,
      'list all node objects': 403,
      'list another node’s object by name': 403,
      'patch its node status': 200,
      'patch another node’s status': 403,
      'patch its node spec (grant itself)': 403,
      'delete its node object': 403,
      'list CSRs': 403,
      'read OSCs': 403,
      'read OscarConfigs': 403,
      'read ConfigMaps': 403,
      'get its Kubernetes Node': 404,
      'get another Kubernetes Node': 403,
      'list Nodes': 403,
      'patch its Kubernetes Node': 403,
      'read the bootstrap tokens': 403,
    });
    // RBAC alone lets every node create any node object (it cannot name objects not yet made):
    // the 403s for another node's object above are the admission policy's.
    const review = await http().request<{ status?: { allowed?: boolean } }>(
      'POST',
      '/apis/authorization.k8s.io/v1/subjectaccessreviews',
      {
        body: {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SubjectAccessReview',
          spec: {
            user: `oscar:node:${me}`,
            groups: ['oscar:nodes', 'system:authenticated'],
            resourceAttributes: {
              group: 'oscar.dev',
              resource: 'operatingsystemconfignodes',
              verb: 'create',
              name: `${ns}-m3`,
            },
          },
        },
      },
    );
    expect(review.status?.allowed).toBe(true);
  }, 60_000);

  it('renews with its own certificate (requester == subject); the new one works', async () => {
    const before = m1.certificate?.cert.serialNumber;
    const renewed = await m1.renewNow();
    expect(renewed.cert.serialNumber).not.toBe(before);
    expect(
      await status(m1Http, 'GET', `/api/v1/namespaces/${ns}/secrets/oscar-rec-reconcile`),
    ).toBe(200);
    const events = await api?.listEvents(ns);
    expect(events?.some((e) => e.reason === 'IdentityRenewed')).toBe(true);
  }, 60_000);

  it("its config's reconcileRef changes: the certificate reads the new OSC's Secrets, no longer the old one's", async () => {
    const h = m1Http;
    const secrets = `/api/v1/namespaces/${ns}/secrets`;
    // a revision Secret of the new OSC is what a grant of it (Cluster API's in-place update)
    // names; no grant-mode node follows OSC other here, so the test writes one slot itself
    const revision = 'oscar-other-rev-4';
    await api?.putSecret(ns, revision, { 'config.json': '{}' });
    expect(await status(h, 'GET', `${secrets}/oscar-other-reconcile`)).toBe(403);
    expect(await status(h, 'GET', `${secrets}/${revision}`)).toBe(403);
    await http().request('PATCH', configPath(machine()), {
      contentType: 'application/merge-patch+json',
      body: { spec: { reconcileRef: { name: 'other' } } },
    });
    await waitFor(
      'the node may read the new OSC',
      async () =>
        (await status(h, 'GET', `${secrets}/oscar-other-reconcile`)) === 200 ? true : undefined,
      20_000,
    );
    expect(await status(h, 'GET', `${secrets}/${revision}`)).toBe(200);
    expect(
      await status(h, 'GET', secrets, undefined, {
        query: { fieldSelector: 'metadata.name=oscar-other-reconcile', watch: 'false' },
      }),
    ).toBe(200);
    // only the OSC its config names: the old one's Secrets are refused now
    expect(await status(h, 'GET', `${secrets}/oscar-rec-reconcile`)).toBe(403);
    expect(await status(h, 'GET', `${secrets}/oscar-rec-rev-0`)).toBe(403);
    // a renewal (the approver writes the Role again) keeps following the config
    await m1.renewNow();
    expect(await status(h, 'GET', `${secrets}/oscar-other-reconcile`)).toBe(200);
    expect(await status(h, 'GET', `${secrets}/oscar-rec-reconcile`)).toBe(403);
  }, 60_000);

  it('refuses a renewal that names another machine, with a reason', async () => {
    const c = await csrAs(m1Http, uniqueName('renew-other'), {
      commonName: `oscar:node:${ns}-m2`,
      organizations: ['oscar:nodes', `oscar:config:${await uidOf(machine())}`],
    });
    expect(c).toMatchObject({ type: 'Denied', reason: 'RenewalSubjectMismatch' });
    // what OscarIdentityRequestsDenied reads
    const text = await (await fetch(`http://${metricsAddress}/metrics`)).text();
    expect(text).toMatch(
      /^oscar_controller_identity_denials_total\{reason="RenewalSubjectMismatch"\} [1-9]/m,
    );
  }, 60_000);

  it('adversarial: a renewal whose request the API server (Go) reads as a kube-system service account, and oscar’s old reader as the node, is denied', async () => {
    // Go's pem.Decode skips the first block (a "." in its base64 does not decode) and the signer
    // signs the second; the API server accepts the CSR as valid.
    const own = certificateRequest(newNodeKey(), {
      commonName: `oscar:node:${machine()}`,
      organizations: ['oscar:nodes', `oscar:config:${await uidOf(machine())}`],
    }).replace('\n', '\n.');
    const sa = certificateRequest(newNodeKey(), {
      commonName: 'system:serviceaccount:kube-system:generic-garbage-collector',
      organizations: ['system:serviceaccounts'],
    });
    const c = await csrWith(m1Http, uniqueName('renew-two-blocks'), own + sa);
    expect(c).toMatchObject({ type: 'Denied', reason: 'InvalidRequest' });
    expect(c.message).toMatch(/one form oscar reads/);
  }, 60_000);

  it('adversarial: a config in another namespace naming the same machine takes nothing from its holder (its renewal is approved)', async () => {
    await apply(
      `/apis/bootstrap.oscar.dev/v1alpha1/namespaces/${other}/oscarconfigs/${machine()}`,
      {
        apiVersion: 'bootstrap.oscar.dev/v1alpha1',
        kind: 'OscarConfig',
        metadata: { name: machine(), namespace: other },
        spec: { provisionRef: { name: 'prov' }, reconcileRef: { name: 'rec' } },
      },
    );
    try {
      // the controller has the newcomer in its cache once the bootstrap reconcile wrote its status
      await waitFor('the newcomer config reconciled', async () =>
        (
          await get<ConfigObject>(
            `/apis/bootstrap.oscar.dev/v1alpha1/namespaces/${other}/oscarconfigs/${machine()}`,
          )
        )?.status?.conditions?.length
          ? true
          : undefined,
      );
      const renewed = await csrAs(m1Http, uniqueName('renew-held'), {
        commonName: `oscar:node:${machine()}`,
        organizations: ['oscar:nodes', `oscar:config:${await uidOf(machine())}`],
      });
      expect(renewed).toMatchObject({ type: 'Approved', reason: 'OscarNodeRenewal' });
    } finally {
      await http().request(
        'DELETE',
        `/apis/bootstrap.oscar.dev/v1alpha1/namespaces/${other}/oscarconfigs/${machine()}`,
      );
    }
  }, 60_000);

  const nodePath = (m: string): string =>
    `/apis/oscar.dev/v1alpha1/operatingsystemconfignodes/${m}`;

  const OLD_SUM = 'a'.repeat(64);

  /** What an earlier machine `m` leaves on its node object: a report of a healthy applied revision and a grant. */
  /** A report of a healthy applied revision of ns/rec, in grant mode. */
  function staleReport(): Record<string, unknown> {
    const now = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
    return {
      source: 'Grant',
      oscRef: { namespace: ns, name: 'rec' },
      appliedChecksum: OLD_SUM,
      revision: {
        observedGeneration: 1,
        number: 3,
        checksum: OLD_SUM,
        phase: 'Confirmed',
        reason: 'Healthy',
        message: 'applied',
        lastTransitionTime: now,
      },
      conditions: [
        {
          type: 'Applied',
          status: 'True',
          reason: 'Applied',
          message: '',
          lastTransitionTime: now,
        },
      ],
    };
  }

  async function reportingNode(h: KubeHttp, name: string, labels: Record<string, string>) {
    await h.request('POST', '/apis/oscar.dev/v1alpha1/operatingsystemconfignodes', {
      body: {
        apiVersion: 'oscar.dev/v1alpha1',
        kind: 'OperatingSystemConfigNode',
        metadata: { name, labels, annotations: { a: 'old' } },
      },
    });
    await h.request('PATCH', `${nodePath(name)}/status`, {
      contentType: CONTENT_MERGE_PATCH,
      body: { status: staleReport() },
    });
  }

  /**
   * What an earlier machine `m` leaves on its node object: the old certificate makes it again
   * and reports a healthy applied revision; a grant lands on it. Its identity belongs to no live
   * config, so no rollout counts or grants it: shown against an administrator's unlabelled node
   * reporting the same, which the rollout does grant (its grant is the barrier: by then the
   * rollout has read both objects, in the order they were written).
   */
  async function leaveStaleNode(h: KubeHttp, m: string, uid: string): Promise<void> {
    await reportingNode(h, m, { 'oscar.dev/config-uid': uid });
    const admin = `${m}-admin`;
    await reportingNode(http(), admin, {});
    try {
      await waitFor(
        "the rollout grants the administrator's node",
        async () =>
          (await get<ClaimedNode>(nodePath(admin)))?.spec?.revision !== undefined
            ? true
            : undefined,
        30_000,
      );
      expect((await get<ClaimedNode>(nodePath(m)))?.spec?.revision).toBeUndefined();
    } finally {
      await http().request('DELETE', nodePath(admin));
    }
    await http().request('PATCH', nodePath(m), {
      contentType: CONTENT_MERGE_PATCH,
      body: {
        spec: {
          revision: {
            namespace: ns,
            osc: 'rec',
            number: 3,
            secretName: 'oscar-rec-rev-3',
            checksum: OLD_SUM,
            grantedTime: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'),
          },
        },
      },
    });
    const left = await get<ClaimedNode>(nodePath(m));
    expect(left?.status).toMatchObject({ appliedChecksum: OLD_SUM });
    expect(left?.spec).toMatchObject({ revision: { number: 3 } });
  }

  /**
   * Machine `m` of namespace `ns` gets its certificate and is deleted; a new `m` bootstraps in
   * `newNs` (another namespace, or the same one) with a new config UID. The old certificate, still
   * valid, must read, write and renew nothing of the new machine's; the new one does all three.
   */
  async function nameReuse(m: string, newNs: string): Promise<void> {
    const oldSecret = `/api/v1/namespaces/${ns}/secrets/oscar-rec-reconcile`;
    const newSecret = `/api/v1/namespaces/${newNs}/secrets/oscar-rec-reconcile`;
    const nodeStatus = `/apis/oscar.dev/v1alpha1/operatingsystemconfignodes/${m}/status`;
    const patch = (h: KubeHttp, gen: number) =>
      status(
        h,
        'PATCH',
        nodeStatus,
        { status: { observedGeneration: gen } },
        { contentType: CONTENT_MERGE_PATCH },
      );
    await createConfig(m);
    const oldUid = await uidOf(m);
    const old = await identityFor(m, (await bootstrapKubeconfig(m)).path, [], `${m}-old-pki`);
    await old.ensure();
    const oldHttp = kubeHttp(old);
    expect(await status(oldHttp, 'GET', oldSecret)).toBe(200);
    expect(await patch(oldHttp, 1)).toBe(200);
    // the machine is deleted; its Role, RoleBinding and user data go with its config (garbage
    // collector): wait for all three, so the new machine's are the only ones of that name
    await http().request('DELETE', configPath(m));
    const owned = [
      `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings/oscar-node-${m}`,
      `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles/oscar-node-${m}`,
      `/api/v1/namespaces/${ns}/secrets/${m}`,
    ];
    await waitFor(
      'the old config, its RoleBinding, Role and user data gone',
      async () => {
        for (const path of [configPath(m), ...owned]) {
          if ((await get(path)) !== undefined) return undefined;
        }
        return true;
      },
      60_000,
    );
    expect(await status(oldHttp, 'GET', oldSecret)).toBe(403);
    // its node object goes with it: it was labelled with the deleted config's UID
    await waitFor(
      "the deleted machine's node object gone",
      async () => ((await get(nodePath(m))) === undefined ? true : undefined),
      30_000,
    );
    // The old certificate, still valid, makes it again (labelled with its own UID, which the
    // admission policy allows) and reports a revision applied and healthy; a rollout's grant
    // lands on it. None of this may carry over to the new machine of that name.
    await leaveStaleNode(oldHttp, m, oldUid);
    // a new machine of the same name bootstraps in newNs
    await createConfig(m, newNs);
    const newUid = await uidOf(m, newNs);
    expect(newUid).not.toBe(oldUid);
    const fresh = await identityFor(
      m,
      (await bootstrapKubeconfig(m, newNs)).path,
      [],
      `${m}-new-pki`,
      newNs,
    );
    const cert = await fresh.ensure();
    expect(subjectAttributes(cert.cert.subject)).toContain(`O=oscar:config:${newUid}`);
    // the approver relabelled the object for the new UID and cleared everything the old one left
    const claimed = await get<ClaimedNode>(nodePath(m));
    expect(claimed?.status ?? {}).toEqual({});
    expect(claimed?.spec ?? {}).toEqual({});
    expect(claimed?.metadata.labels).toEqual({ 'oscar.dev/config-uid': newUid });
    expect(claimed?.metadata.annotations ?? {}).toEqual({});
    const newHttp = kubeHttp(fresh);
    // positive control: the new certificate reads its Secret and writes its node object
    expect(await status(newHttp, 'GET', newSecret)).toBe(200);
    expect(await patch(newHttp, 2)).toBe(200);
    // the old one, still valid, does neither
    expect(await status(oldHttp, 'GET', newSecret)).toBe(403);
    expect(await patch(oldHttp, 3)).toBe(403);
    // …and is not renewed: the renewal is denied with its reason
    await expect(old.renewNow()).rejects.toThrow(/IdentityNotCurrent/);
    // while the new one renews and keeps its UID
    const renewed = await fresh.renewNow();
    expect(subjectAttributes(renewed.cert.subject)).toContain(`O=oscar:config:${newUid}`);
    expect(await status(newHttp, 'GET', newSecret)).toBe(200);
    old.stop();
    fresh.stop();
  }

  it('adversarial: a machine name reused in another namespace while the old certificate is valid — the old certificate reads, renews and writes nothing of the new machine (the new one does)', async () => {
    await nameReuse(`${ns}-m5`, other);
  }, 180_000);

  it('adversarial: a machine name reused in the same namespace (a new config UID) — the old certificate reads, renews and writes nothing of the new machine (the new one does)', async () => {
    await nameReuse(`${ns}-m6`, ns);
  }, 180_000);

  describe('with an unused token of machine m2', () => {
    let h: KubeHttp;
    const m2 = (): string => `${ns}-m2`;
    beforeAll(async () => {
      await createConfig(m2());
      h = kubeHttp(await loadKubeCredentials((await bootstrapKubeconfig(m2())).path));
    }, 60_000);

    it("refuses a CSR for another machine's name, with a reason and an Event", async () => {
      const c = await csrAs(h, uniqueName('m2-as-m1'), {
        commonName: `oscar:node:${machine()}`,
        organizations: ['oscar:nodes', `oscar:config:${await uidOf(m2())}`],
      });
      expect(c).toMatchObject({ type: 'Denied', reason: 'WrongSubject' });
      expect(c.message).toContain(`oscar:node:${machine()}`);
      await waitFor('IdentityDenied Event on m2', async () =>
        (await api?.listEvents(ns))?.some(
          (e) => e.reason === 'IdentityDenied' && e.involvedObject.name === m2(),
        ),
      );
    }, 60_000);

    it('refuses system:masters (the API server already refuses it for this signer)', async () => {
      await expect(
        csrAs(h, uniqueName('m2-masters'), {
          commonName: `oscar:node:${m2()}`,
          organizations: ['system:masters'],
        }),
      ).rejects.toThrow(/system:masters group is not allowed/);
    }, 60_000);

    it('refuses an extra organisation', async () => {
      const c = await csrAs(h, uniqueName('m2-extra-o'), {
        commonName: `oscar:node:${m2()}`,
        organizations: ['oscar:nodes', `oscar:config:${await uidOf(m2())}`, 'ops'],
      });
      expect(c).toMatchObject({ type: 'Denied', reason: 'WrongSubject' });
    }, 60_000);

    it('the token is still unused after refusals: its exact request is approved', async () => {
      const identity = await identityFor(m2(), (await bootstrapKubeconfig(m2())).path);
      const cert = await identity.ensure();
      expect(cert.cert.subject).toContain(`oscar:node:${m2()}`);
    }, 60_000);
  });
});
