// The test cluster itself (hack/testenv) and the two clients oscar uses against it:
// kubectl and @kubernetes/client-node. Identities, RBAC, Node authorization,
// TokenRequest, API server restart on the same port, and clean teardown.
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { access, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { PatchStrategy, Watch } from '@kubernetes/client-node';
import { describe, expect, it, onTestFinished } from 'vitest';
import { stringify } from 'yaml';
import { renderKubeconfig } from '../../hack/testenv/kubeconfig.js';
import { procStartTime } from '../../hack/testenv/proc.js';
import { reapAbandonedRuns, readState } from '../../hack/testenv/state.js';
import { startTestEnv } from '../../hack/testenv/testenv.js';
import {
  adminKubeConfig,
  bearerKubeConfig,
  createTestNamespace,
  kubeConfigFor,
  kubectl,
  skipWithoutCluster,
  testEnv,
  testEnvInfo,
  tokenKubeConfig,
  uniqueName,
} from './support/cluster.js';
import { objectApi, OSC_API_VERSION, refusal } from './support/objects.js';
import { waitFor } from '../support/wait.js';

skipWithoutCluster();

const execFileP = promisify(execFile);

interface Obj {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    resourceVersion?: string;
    uid?: string;
    ownerReferences?: {
      apiVersion: string;
      kind: string;
      name: string;
      uid: string;
      controller?: boolean;
    }[];
    managedFields?: { manager?: string; operation?: string }[];
  };
  spec?: Record<string, unknown>;
  data?: Record<string, string>;
  type?: string;
  status?: Record<string, unknown>;
}

function osc(name: string, namespace: string, data = 'hello\n'): Obj {
  return {
    apiVersion: OSC_API_VERSION,
    kind: 'OperatingSystemConfig',
    metadata: { name, namespace },
    spec: {
      type: 'debian',
      purpose: 'reconcile',
      files: [{ path: '/etc/demo.conf', permissions: '0644', content: { inline: { data } } }],
    },
  };
}

interface WhoAmI {
  status: { userInfo: { username: string; groups?: string[] } };
}

async function whoami(kubeconfig?: string): Promise<{ username: string; groups: string[] }> {
  const r = await kubectl(['auth', 'whoami', '-o', 'json'], kubeconfig ? { kubeconfig } : {});
  expect(r.stderr).toBe('');
  const u = (JSON.parse(r.stdout) as WhoAmI).status.userInfo;
  return { username: u.username, groups: u.groups ?? [] };
}

async function canI(kubeconfig: string, ...args: string[]): Promise<string> {
  const r = await kubectl(['auth', 'can-i', ...args], { kubeconfig });
  return r.stdout.trim();
}

describe('kubectl (built from the same release)', () => {
  it('talks TLS to the API server of the pinned release with the admin kubeconfig', async () => {
    const r = await kubectl(['version', '-o', 'json']);
    expect(r.code, r.stderr).toBe(0);
    const v = JSON.parse(r.stdout) as {
      clientVersion: { gitVersion: string };
      serverVersion: { gitVersion: string };
    };
    expect(v.serverVersion.gitVersion).toBe(testEnvInfo().versions.kubernetes);
    expect(v.clientVersion.gitVersion).toBe(testEnvInfo().versions.kubernetes);
  });

  it('applies, lists by short name and deletes an OSC', async () => {
    const ns = await createTestNamespace('kubectl');
    const applied = await kubectl(['apply', '-n', ns, '-f', '-'], {
      input: stringify(osc('from-kubectl', ns)),
    });
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stdout).toContain('operatingsystemconfig.oscar.dev/from-kubectl created');

    const got = await kubectl(['get', 'osc', '-n', ns, '-o', 'json']);
    expect(got.code, got.stderr).toBe(0);
    const list = JSON.parse(got.stdout) as { items: Obj[] };
    expect(list.items.map((i) => i.metadata.name)).toEqual(['from-kubectl']);
    expect(list.items[0]?.spec).toEqual(osc('x', ns).spec);

    const table = await kubectl(['get', 'osc', '-n', ns]);
    expect(table.stdout).toMatch(/^NAME\s+TYPE\s+PURPOSE/m);
    expect(table.stdout).toMatch(/from-kubectl\s+debian\s+reconcile/);

    const deleted = await kubectl(['delete', 'osc', 'from-kubectl', '-n', ns]);
    expect(deleted.code, deleted.stderr).toBe(0);
    const after = await kubectl(['get', 'osc', '-n', ns, '-o', 'name']);
    expect(after.stdout.trim()).toBe('');
  });

  it('gets strict field validation: an unknown field is refused, naming it', async () => {
    const ns = await createTestNamespace('strict');
    const bad = osc('bad', ns);
    (bad.spec as Record<string, unknown>).unitz = [];
    const r = await kubectl(['apply', '--dry-run=server', '-n', ns, '-f', '-'], {
      input: stringify(bad),
    });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('unknown field "spec.unitz"');
  });
});

describe('identities', () => {
  it('admin kubeconfig is in system:masters', async () => {
    const me = await whoami();
    expect(me.username).toBe('oscar-admin');
    expect(me.groups).toContain('system:masters');
  });

  it('static-token users and minted client certificates authenticate as declared', async () => {
    const env = await testEnv();
    const viewer = await whoami(await env.writeTokenKubeconfig('viewer'));
    expect(viewer).toEqual({
      username: 'oscar-viewer',
      groups: ['oscar:viewers', 'system:authenticated'],
    });
    const cert = await whoami(
      await env.writeKubeconfig({ user: 'carol', groups: ['team-a', 'team-b'] }),
    );
    expect(cert).toEqual({
      username: 'carol',
      groups: ['team-a', 'team-b', 'system:authenticated'],
    });
  });

  it('RBAC is enforced: a user may list OSCs only once a RoleBinding allows it', async () => {
    const ns = await createTestNamespace('rbac');
    const admin = objectApi(adminKubeConfig());
    const viewer = objectApi(await tokenKubeConfig('viewer'));
    const denied = await refusal(() => viewer.list(OSC_API_VERSION, 'OperatingSystemConfig', ns));
    expect(denied.code).toBe(403);
    expect(denied.message).toContain(
      'User "oscar-viewer" cannot list resource "operatingsystemconfigs"',
    );

    await admin.create({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: 'osc-reader', namespace: ns },
      rules: [{ apiGroups: ['oscar.dev'], resources: ['operatingsystemconfigs'], verbs: ['list'] }],
    });
    await admin.create({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'osc-reader', namespace: ns },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'osc-reader' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'oscar:viewers' }],
    });
    // The RBAC authorizer reads bindings from an informer: allow a moment to propagate.
    await waitFor(
      'the viewer to list OSCs in its namespace',
      async () => {
        const list = await viewer.list(OSC_API_VERSION, 'OperatingSystemConfig', ns);
        expect(list.items).toEqual([]);
        return true;
      },
      { timeoutMs: 10_000, intervalMs: 200 },
    );
    // Only list was granted, and only in that namespace.
    const otherNs = await refusal(() =>
      viewer.list(OSC_API_VERSION, 'OperatingSystemConfig', 'default'),
    );
    expect(otherNs.code).toBe(403);
  });

  it('the Node authorizer is active: a node identity gets node rules, others do not', async () => {
    const env = await testEnv();
    const node = await env.writeTokenKubeconfig('node-1');
    const nobody = await env.writeTokenKubeconfig('nobody');
    expect(await canI(node, 'list', 'services', '--all-namespaces')).toBe('yes');
    expect(await canI(nobody, 'list', 'services', '--all-namespaces')).toBe('no');
    // Secrets only for pods bound to the node: the Node authorizer itself says no, and why.
    expect(await canI(node, 'get', 'secrets/anything', '-n', 'default')).toBe(
      "no - node: no relationship found between node 'node-1' and this object",
    );
  });

  it('TokenRequest: a service-account token signed by the API server authenticates', async () => {
    const ns = await createTestNamespace('sa');
    expect((await kubectl(['create', 'serviceaccount', 'agent', '-n', ns])).code).toBe(0);
    const token = await kubectl(['create', 'token', 'agent', '-n', ns, '--duration=10m']);
    expect(token.code, token.stderr).toBe(0);
    const review = await objectApi(await bearerKubeConfig(token.stdout.trim())).create<Obj>({
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'SelfSubjectReview',
      metadata: { name: '' },
    });
    const userInfo = review.status?.userInfo as { username: string; groups: string[] };
    expect(userInfo.username).toBe(`system:serviceaccount:${ns}:agent`);
    expect(userInfo.groups).toContain(`system:serviceaccounts:${ns}`);
  });
});

describe('@kubernetes/client-node', () => {
  it('lists and server-side-applies an OSC and a Secret', async () => {
    const ns = await createTestNamespace('ssa');
    const api = objectApi(adminKubeConfig());
    const apply = (o: Obj): Promise<Obj> =>
      api.patch(o, undefined, undefined, 'oscar-test', true, PatchStrategy.ServerSideApply);

    const first = await apply(osc('applied', ns, 'one\n'));
    const second = await apply(osc('applied', ns, 'two\n'));
    expect(second.metadata.resourceVersion).not.toBe(first.metadata.resourceVersion);
    const list = await api.list<Obj>(OSC_API_VERSION, 'OperatingSystemConfig', ns);
    expect(list.items.map((i) => i.metadata.name)).toEqual(['applied']);
    expect(list.items[0]?.spec).toEqual(osc('x', ns, 'two\n').spec);
    expect(list.items[0]?.metadata.managedFields).toContainEqual(
      expect.objectContaining({ manager: 'oscar-test', operation: 'Apply' }),
    );

    const secret: Obj = {
      apiVersion: 'v1',
      kind: 'Secret',
      type: 'Opaque',
      metadata: { name: 'rendered', namespace: ns, labels: { 'oscar.dev/osc': 'applied' } },
      data: {
        value: Buffer.from('#cloud-config\n').toString('base64'),
        format: 'Y2xvdWQtY29uZmln',
      },
    };
    await apply(secret);
    await apply({ ...secret, data: { value: Buffer.from('changed').toString('base64') } });
    const back = await api.read<Obj>({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'rendered', namespace: ns },
    });
    // Server-side apply removed the key the manager stopped declaring.
    expect(back.data).toEqual({ value: Buffer.from('changed').toString('base64') });
    expect(back.metadata.labels).toEqual({ 'oscar.dev/osc': 'applied' });
  });

  it('watches OSCs with bookmarks: initial state, end-of-initial-events bookmark, then changes', async () => {
    const ns = await createTestNamespace('watch');
    const kc = adminKubeConfig();
    const api = objectApi(kc);
    await api.create(osc('existing', ns));

    const events: { type: string; obj: Obj }[] = [];
    let ended: unknown = null;
    const abort = await new Watch(kc).watch(
      `/apis/oscar.dev/v1alpha1/namespaces/${ns}/operatingsystemconfigs`,
      { allowWatchBookmarks: true, sendInitialEvents: true, resourceVersionMatch: 'NotOlderThan' },
      (type, obj: Obj) => events.push({ type, obj }),
      (err: unknown) => (ended = err ?? 'closed'),
    );
    try {
      await waitFor(
        'the initial ADDED and BOOKMARK',
        () => {
          expect(ended).toBeNull();
          expect(events.map((e) => e.type)).toEqual(['ADDED', 'BOOKMARK']);
          return true;
        },
        { timeoutMs: 10_000, intervalMs: 50 },
      );
      expect(events[0]?.obj.metadata.name).toBe('existing');
      expect(events[1]?.obj.metadata.annotations?.['k8s.io/initial-events-end']).toBe('true');

      await api.create(osc('added', ns));
      await api.delete(osc('existing', ns));
      await waitFor(
        'the ADDED and DELETED events',
        () => {
          const changes = events.filter((e) => e.type !== 'BOOKMARK').slice(1);
          expect(changes.map((e) => `${e.type} ${e.obj.metadata.name}`)).toEqual([
            'ADDED added',
            'DELETED existing',
          ]);
          return true;
        },
        { timeoutMs: 10_000, intervalMs: 50 },
      );
    } finally {
      abort.abort();
    }
  });
});

describe('controllers (kube-controller-manager)', () => {
  it('the garbage collector deletes a Secret whose owner OSC is deleted', async () => {
    const ns = await createTestNamespace('gc');
    const api = objectApi(adminKubeConfig());
    const owner = await api.create(osc('owner', ns));
    const secret: Obj = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name: 'owned',
        namespace: ns,
        ownerReferences: [
          {
            apiVersion: OSC_API_VERSION,
            kind: 'OperatingSystemConfig',
            name: 'owner',
            uid: owner.metadata.uid ?? '',
            controller: true,
          },
        ],
      },
      data: { value: Buffer.from('x').toString('base64') },
    };
    await api.create(secret);
    await api.delete(owner);
    await waitFor(
      'the owned Secret to be collected',
      async () => {
        const r = await refusal(() =>
          api.read({
            apiVersion: 'v1',
            kind: 'Secret',
            metadata: { name: 'owned', namespace: ns },
          }),
        );
        expect(r.code).toBe(404);
        return true;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
  });

  it('a new namespace gets its default ServiceAccount; a deleted one goes away with its OSCs', async () => {
    const name = uniqueName('nsctl');
    const api = objectApi(adminKubeConfig());
    const ns: Obj = { apiVersion: 'v1', kind: 'Namespace', metadata: { name } };
    await api.create(ns);
    await api.create(osc('inside', name));
    await waitFor(
      'the default ServiceAccount of the namespace',
      () =>
        api.read({
          apiVersion: 'v1',
          kind: 'ServiceAccount',
          metadata: { name: 'default', namespace: name },
        }),
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    await api.delete(ns);
    await waitFor(
      'the namespace to be gone',
      async () => {
        const r = await refusal(() => api.read(ns));
        expect(r.code).toBe(404);
        return true;
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );
  });
});

describe('bootstrap tokens and CSR signing (what per-machine bootstrap needs)', () => {
  /** A kubeconfig file that authenticates with a bearer token. */
  async function tokenKubeconfigFile(token: string): Promise<string> {
    const info = testEnvInfo();
    const dir = await mkdtemp(join(tmpdir(), 'oscar-bt-'));
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
    const path = join(dir, 'kubeconfig');
    await writeFile(
      path,
      renderKubeconfig({
        name: 'bootstrap',
        server: info.server,
        caPem: await readFile(info.caPath, 'utf8'),
        credentials: { kind: 'token', token },
      }),
      { mode: 0o600 },
    );
    return path;
  }

  function bootstrapToken(id: string, secret: string, expiration: Date): Obj {
    return {
      apiVersion: 'v1',
      kind: 'Secret',
      type: 'bootstrap.kubernetes.io/token',
      metadata: { name: `bootstrap-token-${id}`, namespace: 'kube-system' },
      data: Object.fromEntries(
        Object.entries({
          'token-id': id,
          'token-secret': secret,
          expiration: expiration.toISOString().replace(/\.\d{3}Z$/, 'Z'),
          'usage-bootstrap-authentication': 'true',
          'auth-extra-groups': 'system:bootstrappers:oscar',
        }).map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
      ),
    };
  }

  const randomId = (n: number): string =>
    [...randomBytes(n)].map((b) => 'abcdefghijklmnopqrstuvwxyz0123456789'[b % 36]).join('');

  it('a bootstrap token authenticates as system:bootstrap:<id> in its extra group', async () => {
    const api = objectApi(adminKubeConfig());
    const id = randomId(6);
    const secret = randomId(16);
    const token = await api.create(bootstrapToken(id, secret, new Date(Date.now() + 600_000)));
    onTestFinished(() =>
      api.delete(token).then(
        () => undefined,
        () => undefined,
      ),
    );
    const who = await whoami(await tokenKubeconfigFile(`${id}.${secret}`));
    expect(who.username).toBe(`system:bootstrap:${id}`);
    expect(who.groups).toEqual(
      expect.arrayContaining(['system:bootstrappers', 'system:bootstrappers:oscar']),
    );
    // A wrong secret for the same id is refused.
    const wrong = await kubectl(['auth', 'whoami'], {
      kubeconfig: await tokenKubeconfigFile(`${id}.${randomId(16)}`),
    });
    expect(wrong.code).not.toBe(0);
    expect(wrong.stderr).toMatch(/Unauthorized|credentials/i);
  });

  it("kube-controller-manager's token cleaner deletes an expired bootstrap token", async () => {
    const api = objectApi(adminKubeConfig());
    const expired = bootstrapToken(randomId(6), randomId(16), new Date(Date.now() - 1000));
    await api.create(expired);
    await waitFor(
      'the expired token Secret to be cleaned',
      async () => {
        expect((await refusal(() => api.read(expired))).code).toBe(404);
        return true;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
  });

  it('an approved CSR for kubernetes.io/kube-apiserver-client is signed, and the certificate authenticates', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'oscar-csr-'));
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
    const user = uniqueName('oscar:node:m');
    await execFileP('openssl', [
      'req',
      '-new',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      join(dir, 'key.pem'),
      '-out',
      join(dir, 'csr.pem'),
      '-subj',
      `/O=oscar:nodes/CN=${user}`,
    ]);
    const name = uniqueName('csr');
    const csr = {
      apiVersion: 'certificates.k8s.io/v1',
      kind: 'CertificateSigningRequest',
      metadata: { name },
      spec: {
        request: (await readFile(join(dir, 'csr.pem'))).toString('base64'),
        signerName: 'kubernetes.io/kube-apiserver-client',
        usages: ['digital signature', 'client auth'],
        expirationSeconds: 600,
      },
    };
    const input = JSON.stringify(csr);
    expect((await kubectl(['create', '-f', '-'], { input })).code).toBe(0);
    onTestFinished(async () => {
      await kubectl(['delete', 'csr', name, '--ignore-not-found']);
    });
    expect((await kubectl(['certificate', 'approve', name])).code).toBe(0);
    const pem = await waitFor(
      'the CSR to be signed',
      async () => {
        const r = await kubectl(['get', 'csr', name, '-o', 'jsonpath={.status.certificate}']);
        expect(r.stdout).not.toBe('');
        return Buffer.from(r.stdout, 'base64').toString('utf8');
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    const info = testEnvInfo();
    const path = join(dir, 'kubeconfig');
    await writeFile(
      path,
      renderKubeconfig({
        name: user,
        server: info.server,
        caPem: await readFile(info.caPath, 'utf8'),
        credentials: {
          kind: 'clientCert',
          certPem: pem,
          keyPem: await readFile(join(dir, 'key.pem'), 'utf8'),
        },
      }),
      { mode: 0o600 },
    );
    const who = await whoami(path);
    expect(who.username).toBe(user);
    expect(who.groups).toContain('oscar:nodes');
  });
});

describe('API server restart (etcd keeps the data)', () => {
  it('stops, refuses connections, starts again on the same port with the data intact', async () => {
    const env = await testEnv();
    const ns = await createTestNamespace('restart');
    const api = objectApi(adminKubeConfig());
    await api.create(osc('survivor', ns));
    const before = (await readState(env.stateFile)).apiserver.ref;

    await env.stopApiServer();
    expect((await readState(env.stateFile)).apiserver.ref).toBeNull();
    if (before !== null) expect(await procStartTime(before.pid)).toBeUndefined();
    const r = await kubectl(['get', 'ns', ns, '--request-timeout=2s']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/refused/);

    await env.startApiServer();
    const after = (await readState(env.stateFile)).apiserver.ref;
    expect(after?.pid).not.toBe(before?.pid);
    expect(env.server).toBe(testEnvInfo().server);
    const back = await api.read<Obj>({
      apiVersion: OSC_API_VERSION,
      kind: 'OperatingSystemConfig',
      metadata: { name: 'survivor', namespace: ns },
    });
    expect(back.spec).toEqual(osc('x', ns).spec);
  });
});

describe('cluster lifecycle', () => {
  it('a cluster whose owner died is reaped by the next start: no process, no data left', async () => {
    // The owner is a short-lived child: when it dies the cluster counts as abandoned.
    const owner = spawn('sleep', ['600'], { stdio: 'ignore' });
    const ownerPid = owner.pid;
    if (ownerPid === undefined) throw new Error('could not start the owner process');
    const other = await startTestEnv({ ownerPid, crdDir: null });
    const state = await readState(other.stateFile);
    const refs = [state.etcd.ref, state.apiserver.ref, state.controllerManager?.ref ?? null];
    expect(refs.every((r) => r !== null)).toBe(true);
    for (const ref of refs) expect(await procStartTime(ref?.pid ?? -1)).toBe(ref?.startTime);
    expect(other.server).not.toBe(testEnvInfo().server);
    const me = await whoami(other.kubeconfigPath);
    expect(me.username).toBe('oscar-admin');

    // Still owned: the reaper must leave it alone.
    await reapAbandonedRuns(() => undefined);
    await access(other.runDir);

    owner.kill('SIGKILL');
    await new Promise((r) => owner.once('exit', r));
    const reaped: string[] = [];
    await reapAbandonedRuns((m) => reaped.push(m));
    expect(reaped.join('\n')).toContain(other.runDir);
    for (const ref of refs) expect(await procStartTime(ref?.pid ?? -1)).toBeUndefined();
    await expect(access(other.runDir)).rejects.toThrow(/ENOENT/);
    // stop() after the reaper is harmless.
    await other.stop();
  });

  it("workloads: kube-scheduler binds a Deployment's pod to a Ready Node, kube-root-ca.crt is published, stop() ends the scheduler", async () => {
    const other = await startTestEnv({ crdDir: null, workloads: true });
    onTestFinished(() => other.stop());
    const state = await readState(other.stateFile);
    const sched = state.scheduler?.ref;
    expect(sched).toBeDefined();
    expect(await procStartTime(sched?.pid ?? -1)).toBe(sched?.startTime);
    const k = (args: string[], input?: string) =>
      kubectl(args, {
        kubeconfig: other.kubeconfigPath,
        ...(input === undefined ? {} : { input }),
      });
    // A Node as a kubelet would register it (no kubelet runs here): schedulable, with room.
    const node = uniqueName('node');
    expect(
      (
        await k(
          ['apply', '-f', '-'],
          stringify({ apiVersion: 'v1', kind: 'Node', metadata: { name: node } }),
        )
      ).stderr,
    ).toBe('');
    const capacity = { cpu: '2', memory: '2Gi', pods: '10' };
    const now = new Date().toISOString();
    const ready = {
      type: 'Ready',
      status: 'True',
      reason: 'KubeletReady',
      lastHeartbeatTime: now,
      lastTransitionTime: now,
    };
    // Ready: the node-lifecycle controller lifts the not-ready taint admission put on the Node
    const status = { status: { capacity, allocatable: capacity, conditions: [ready] } };
    const patched = await k([
      'patch',
      'node',
      node,
      '--subresource=status',
      '--type=merge',
      '-p',
      JSON.stringify(status),
    ]);
    expect(patched.stderr).toBe('');
    const ns = uniqueName('wl');
    await k(['create', 'namespace', ns]);
    const created = await k(['-n', ns, 'create', 'deployment', 'web', '--image=localhost/none:1']);
    expect(created.stderr).toBe('');
    const bound = await waitFor(
      "the Deployment's pod bound by kube-scheduler",
      async () => {
        const r = await k(['-n', ns, 'get', 'pods', '-o', 'jsonpath={.items[*].spec.nodeName}']);
        return r.stdout.trim() || undefined;
      },
      { timeoutMs: 90_000, intervalMs: 500 },
    );
    expect(bound).toBe(node);
    const ca = await waitFor(
      'kube-root-ca.crt published in the namespace',
      async () => {
        const r = await k([
          '-n',
          ns,
          'get',
          'configmap',
          'kube-root-ca.crt',
          '-o',
          'jsonpath={.data.ca\\.crt}',
        ]);
        return r.stdout.includes('BEGIN CERTIFICATE') ? r.stdout : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    expect(ca.trim()).toBe((await readFile(other.caPath, 'utf8')).trim());
    await other.stop();
    expect(await procStartTime(sched?.pid ?? -1)).toBeUndefined();
  });

  it('names a user that cannot be put into a certificate', async () => {
    await expect(kubeConfigFor({ user: 'bad/name' })).rejects.toThrow(
      /identity\.user "bad\/name" contains/,
    );
  });
});
