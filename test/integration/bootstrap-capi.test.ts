// Per-machine bootstrap against the real API server and Cluster API's real core manager: an
// OscarConfig per machine (by hand, for a Machine, from a MachineDeployment's template), its user
// data Secret in the shape Cluster API expects, its own bootstrap token, cleanup with the Machine,
// pause. One Cluster API manager and one oscar controller for the whole file.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { readFile, mkdtemp, writeFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { renderKubeconfig } from '../../hack/testenv/kubeconfig.js';
import { CONTENT_MERGE_PATCH } from '../../kube/client.js';
import type { DataObject, KubeObject } from '../../controller/kube/types.js';
import type { ConfigObject } from '../../controller/bootstrap/types.js';
import { Api, demoSpec, startController, waitFor, sleep } from './controller-support.js';
import { clusterUnavailable, kubectl, testEnvInfo, uniqueName } from './support/cluster.js';
import { INFRA_GROUP, startCapiManager, type CapiManager } from '../support/capi.js';
import { kubeOps } from '../support/cluster.js';
import { tokenIdFor } from '../../controller/bootstrap/token.js';
import type { OperatingSystemConfigSpec } from '../../api/schema.js';

const repoFile = join(
  fileURLToPath(new URL('.', import.meta.url)),
  '..',
  '..',
  'deploy',
  'controller',
  'clusterrole-capi-aggregate.yaml',
);
const AGENT_SHA = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
const CAPI = 'cluster.x-k8s.io/v1beta2';

let capi: CapiManager | undefined;
let skipReason: string | undefined;
let stopController: (() => Promise<void>) | undefined;
let controllerLogs: string[] = [];
let controllerWrites: (() => Promise<number>) | undefined;
let ns = '';
const api = clusterUnavailable === null ? new Api() : undefined;

function http() {
  if (!api) throw new Error('no cluster');
  return api.http;
}

const ops = kubeOps(http, 'test');
const apply = (obj: Record<string, unknown>): Promise<KubeObject> => ops.applyObject(obj);
const get = <T extends KubeObject>(path: string): Promise<T | undefined> => ops.get<T>(path);

const configPath = (name: string): string =>
  `/apis/bootstrap.oscar.dev/v1alpha1/namespaces/${ns}/oscarconfigs/${name}`;
const secretPath = (name: string): string => `/api/v1/namespaces/${ns}/secrets/${name}`;
const tokenPath = (id: string): string =>
  `/api/v1/namespaces/kube-system/secrets/bootstrap-token-${id}`;

function decoded(s: DataObject | undefined, key: string): string {
  return Buffer.from(s?.data?.[key] ?? '', 'base64').toString('utf8');
}

/** The provision OSC: placeholders for the machine, its cluster and a value; a Secret's key. */
function provisionSpec(): OperatingSystemConfigSpec {
  return {
    type: 'ubuntu',
    purpose: 'provision',
    files: [
      {
        path: '/etc/oscar/node.env',
        permissions: '0600',
        content: {
          inline: {
            data: 'MACHINE={{ machine.name }}\nCLUSTER={{ cluster.name }}\nPOOL={{ values.pool }}\nAPI={{ apiServer.url }}\n',
          },
        },
      },
      {
        path: '/etc/oscar/provision-secret',
        permissions: '0600',
        content: { secretRef: { name: 'prov-secret', key: 'k' } },
      },
    ],
  };
}

const PROVISION_SECRET = 'read-by-the-bootstrap-render';

function config(name: string, extra: Record<string, unknown> = {}, values = { pool: 'workers' }) {
  return {
    apiVersion: 'bootstrap.oscar.dev/v1alpha1',
    kind: 'OscarConfig',
    metadata: { name, namespace: ns, ...extra },
    spec: { provisionRef: { name: 'prov' }, reconcileRef: { name: 'rec' }, values },
  };
}

function machine(name: string, cluster: string, configName: string) {
  return {
    apiVersion: CAPI,
    kind: 'Machine',
    metadata: { name, namespace: ns, labels: { 'cluster.x-k8s.io/cluster-name': cluster } },
    spec: {
      clusterName: cluster,
      bootstrap: {
        configRef: { apiGroup: 'bootstrap.oscar.dev', kind: 'OscarConfig', name: configName },
      },
      infrastructureRef: { apiGroup: INFRA_GROUP, kind: 'TestMachine', name },
    },
  };
}

function cluster(name: string, paused = false) {
  return {
    apiVersion: CAPI,
    kind: 'Cluster',
    metadata: { name, namespace: ns },
    spec: { paused },
  };
}

async function waitSecret(name: string, timeoutMs = 60_000): Promise<DataObject> {
  return waitFor(`Secret ${ns}/${name}`, () => get<DataObject>(secretPath(name)), timeoutMs);
}

async function tokenOf(configName: string): Promise<DataObject> {
  const c = await waitFor(`${configName} has a token id`, async () => {
    const got = await get<ConfigObject>(configPath(configName));
    return got?.status?.bootstrapTokenID ? got : undefined;
  });
  const token = await get<DataObject>(tokenPath(c.status?.bootstrapTokenID ?? ''));
  if (!token) throw new Error(`token of ${configName} not found`);
  return token;
}

function userDataOf(s: DataObject): { files: Map<string, string>; token: string } {
  const doc = parse(decoded(s, 'value')) as { write_files: { path: string; content: string }[] };
  const files = new Map(doc.write_files.map((f) => [f.path, f.content]));
  const kc = parse(files.get('/etc/oscar/bootstrap-kubeconfig') ?? '') as {
    users: { user: { token: string } }[];
  };
  return { files, token: kc.users[0]?.user.token ?? '' };
}

/** On failure, the Cluster API manager's last lines about what failed. */
async function withCapiLogs<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    const lines = (capi?.logs() ?? '')
      .split('\n')
      .filter((l) => /error|Error|MachineSet|MachineDeployment/.test(l))
      .slice(-25)
      .join('\n');
    throw new Error(`${(error as Error).message}\nCluster API manager:\n${lines}`, {
      cause: error,
    });
  }
}

beforeAll(async () => {
  if (clusterUnavailable !== null) return;
  const info = testEnvInfo();
  const manager = await startCapiManager(info);
  if ('skip' in manager) {
    skipReason = manager.skip;
    return;
  }
  capi = manager.manager;
  ns = uniqueName('bootstrap');
  await apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  await api?.putSecret(ns, 'prov-secret', { k: PROVISION_SECRET });
  await api?.applyOsc(ns, 'prov', provisionSpec());
  await api?.applyOsc(ns, 'rec', demoSpec('reconcile'));
  const started = await startController([ns], {
    bootstrap: {
      enabled: true,
      agentUrl: 'http://127.0.0.1:9/oscar-agent',
      agentSha256: AGENT_SHA,
      clusterName: 'demo',
      tokenTtlMs: 20 * 60_000,
    },
  });
  stopController = started.stop;
  controllerWrites = async () =>
    (await started.handle.metrics.writes.get()).values.reduce((n, v) => n + v.value, 0);
  controllerLogs = started.logs;
}, 600_000);

afterAll(async () => {
  await stopController?.();
  if (ns) await kubectl(['delete', 'namespace', ns, '--wait=false']);
  await capi?.stop();
});

describe('per-machine bootstrap with the real Cluster API manager', () => {
  it('an OscarConfig without Cluster API: its Secret, its own token (which authenticates), both gone with the config', async (ctx) => {
    if (clusterUnavailable !== null || skipReason)
      return ctx.skip(clusterUnavailable ?? skipReason);
    await apply(config('hand-1'));
    const secret = await waitSecret('hand-1');
    expect(secret.type).toBe('cluster.x-k8s.io/secret');
    expect(Object.keys(secret.data ?? {}).sort()).toEqual(['format', 'value']);
    expect(decoded(secret, 'format')).toBe('cloud-config');
    // the status is the config's last write, after the Secret (and the token): wait for it
    const created = await waitFor('hand-1 status.dataSecretName', async () => {
      const c = await get<ConfigObject>(configPath('hand-1'));
      return c?.status?.dataSecretName !== undefined ? c : undefined;
    });
    expect(secret.metadata.ownerReferences).toEqual([
      expect.objectContaining({
        kind: 'OscarConfig',
        name: 'hand-1',
        uid: created.metadata.uid,
        controller: true,
      }),
    ]);
    expect(secret.metadata.labels?.['cluster.x-k8s.io/cluster-name']).toBeUndefined();
    expect(created.status?.dataSecretName).toBe('hand-1');
    expect(created.status?.initialization?.dataSecretCreated).toBe(true);
    expect(created.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');

    const { files, token } = userDataOf(secret);
    expect(files.get('/etc/oscar/node.env')).toBe(
      `MACHINE=hand-1\nCLUSTER=demo\nPOOL=workers\nAPI=${testEnvInfo().server}\n`,
    );
    // The provision OSC's secretRef, read (GET) before the bootstrap render.
    expect(files.get('/etc/oscar/provision-secret')).toBe(PROVISION_SECRET);
    const t = await tokenOf('hand-1');
    expect(t.type).toBe('bootstrap.kubernetes.io/token');
    expect(t.metadata.labels?.['bootstrap.oscar.dev/config-uid']).toBe(created.metadata.uid);
    expect(t.metadata.annotations?.['bootstrap.oscar.dev/machine']).toBe(`${ns}/hand-1`);
    expect(decoded(t, 'auth-extra-groups')).toBe('system:bootstrappers:oscar');
    expect(decoded(t, 'usage-bootstrap-authentication')).toBe('true');
    const expiresIn = Date.parse(decoded(t, 'expiration')) - Date.now();
    expect(expiresIn).toBeGreaterThan(15 * 60_000);
    expect(expiresIn).toBeLessThanOrEqual(20 * 60_000);
    expect(token).toBe(`${decoded(t, 'token-id')}.${decoded(t, 'token-secret')}`);

    // The token in the user data authenticates as this machine's bootstrap identity.
    const dir = await mkdtemp(join(tmpdir(), 'oscar-bt-'));
    const kcPath = join(dir, 'kubeconfig');
    await writeFile(
      kcPath,
      renderKubeconfig({
        name: 'm',
        server: testEnvInfo().server,
        caPem: await readFile(testEnvInfo().caPath, 'utf8'),
        credentials: { kind: 'token', token },
      }),
    );
    const who = await kubectl(['auth', 'whoami', '-o', 'jsonpath={.status.userInfo.username}'], {
      kubeconfig: kcPath,
    });
    await rm(dir, { recursive: true, force: true });
    expect(who.stdout).toBe(`system:bootstrap:${decoded(t, 'token-id')}`);

    // No token data in the controller's logs.
    expect(controllerLogs.join('')).not.toContain(decoded(t, 'token-secret'));

    await http().request('DELETE', configPath('hand-1'));
    await waitFor('the token deleted', async () =>
      (await get(tokenPath(decoded(t, 'token-id')))) === undefined ? true : undefined,
    );
    await waitFor('the Secret garbage-collected', async () =>
      (await get(secretPath('hand-1'))) === undefined ? true : undefined,
    );
  });

  it('a token id someone else holds is never taken over (the config takes the next derived id); a Secret deleted before the machine joined is written again with a working token', async (ctx) => {
    if (clusterUnavailable !== null || skipReason)
      return ctx.skip(clusterUnavailable ?? skipReason);
    const name = uniqueName('taken');
    const created = await apply(config(name, { annotations: { 'cluster.x-k8s.io/paused': '' } }));
    const takenId = tokenIdFor(created.metadata.uid ?? '', 0);
    const foreign = {
      apiVersion: 'v1',
      kind: 'Secret',
      type: 'bootstrap.kubernetes.io/token',
      metadata: { name: `bootstrap-token-${takenId}`, namespace: 'kube-system' },
      stringData: {
        'token-id': takenId,
        'token-secret': 'aaaaaaaaaaaaaaaa',
        expiration: '2099-01-01T00:00:00Z',
      },
    };
    expect((await kubectl(['create', '-f', '-'], { input: JSON.stringify(foreign) })).code).toBe(0);
    // Resume: the controller renders now.
    await http().request('PATCH', configPath(name), {
      contentType: CONTENT_MERGE_PATCH,
      body: { metadata: { annotations: { 'cluster.x-k8s.io/paused': null } } },
    });
    await waitSecret(name);
    const t = await tokenOf(name);
    expect(decoded(t, 'token-id')).toBe(tokenIdFor(created.metadata.uid ?? '', 1));
    const untouched = await get<DataObject>(tokenPath(takenId));
    expect(decoded(untouched, 'token-secret')).toBe('aaaaaaaaaaaaaaaa');

    // A refresh (a merge patch by the controller's manager) then the Secret deleted: the
    // controller writes it again over its own token.
    const id = decoded(t, 'token-id');
    await http().request('PATCH', tokenPath(id), {
      contentType: CONTENT_MERGE_PATCH,
      query: { fieldManager: 'oscar-bootstrap' },
      body: { data: { expiration: Buffer.from('2099-01-01T00:00:00Z').toString('base64') } },
    });
    const before = userDataOf(await waitSecret(name)).token;
    await http().request('DELETE', secretPath(name));
    const again = await waitFor('the Secret written again', async () => {
      const s = await get<DataObject>(secretPath(name));
      return s && userDataOf(s).token !== before ? s : undefined;
    });
    const after = await get<DataObject>(tokenPath(id));
    expect(userDataOf(again).token).toBe(`${id}.${decoded(after, 'token-secret')}`);
    await kubectl(['delete', 'secret', '-n', 'kube-system', `bootstrap-token-${takenId}`]);
  });

  it('a machine that reported (its OperatingSystemConfigNode exists) loses its token; the Secret stays', async (ctx) => {
    if (clusterUnavailable !== null || skipReason)
      return ctx.skip(clusterUnavailable ?? skipReason);
    const name = uniqueName('joined');
    await apply(config(name));
    await waitSecret(name);
    const t = await tokenOf(name);
    await apply({
      apiVersion: 'oscar.dev/v1alpha1',
      kind: 'OperatingSystemConfigNode',
      metadata: { name },
    });
    await waitFor('the joined machine token deleted', async () =>
      (await get(tokenPath(decoded(t, 'token-id')))) === undefined ? true : undefined,
    );
    const c = await waitFor('BootstrapTokenAvailable=False', async () => {
      const got = await get<ConfigObject>(configPath(name));
      const cond = got?.status?.conditions?.find((x) => x.type === 'BootstrapTokenAvailable');
      return cond?.status === 'False' ? cond : undefined;
    });
    expect(c.reason).toBe('MachineJoined');
    expect(await get(secretPath(name))).toBeDefined();
    await http().request('DELETE', `/apis/oscar.dev/v1alpha1/operatingsystemconfignodes/${name}`);
  });

  it("a Machine with bootstrap.configRef to an OscarConfig gets spec.bootstrap.dataSecretName; the Secret carries the cluster label and the machine's values", async (ctx) => {
    if (clusterUnavailable !== null || skipReason)
      return ctx.skip(clusterUnavailable ?? skipReason);
    await apply(cluster('c1'));
    await apply(config('m-1', { labels: { 'cluster.x-k8s.io/cluster-name': 'c1' } }));
    await apply(machine('m-1', 'c1', 'm-1'));
    const m = await waitFor(
      'Machine m-1 spec.bootstrap.dataSecretName',
      async () => {
        const got = await get<KubeObject & { spec: { bootstrap: { dataSecretName?: string } } }>(
          `/apis/cluster.x-k8s.io/v1beta2/namespaces/${ns}/machines/m-1`,
        );
        return got?.spec.bootstrap.dataSecretName ? got : undefined;
      },
      90_000,
    );
    expect(m.spec.bootstrap.dataSecretName).toBe('m-1');
    const secret = await waitSecret('m-1');
    expect(secret.metadata.labels?.['cluster.x-k8s.io/cluster-name']).toBe('c1');
    expect(userDataOf(secret).files.get('/etc/oscar/node.env')).toContain(
      'MACHINE=m-1\nCLUSTER=c1\n',
    );
    const c = await get<ConfigObject>(configPath('m-1'));
    expect(c?.metadata.ownerReferences?.some((r) => r.kind === 'Machine' && r.name === 'm-1')).toBe(
      true,
    );
  });

  it('a MachineDeployment with an OscarConfigTemplate: one config per Machine (named like it), one Secret and one token each; scaling down removes its Machine’s config, Secret, token and node object', async (ctx) => {
    if (clusterUnavailable !== null || skipReason)
      return ctx.skip(clusterUnavailable ?? skipReason);
    await apply(cluster('c2'));
    await apply({
      apiVersion: 'bootstrap.oscar.dev/v1alpha1',
      kind: 'OscarConfigTemplate',
      metadata: { name: 'tpl', namespace: ns },
      spec: {
        template: {
          spec: {
            provisionRef: { name: 'prov' },
            reconcileRef: { name: 'rec' },
            values: { pool: 'md-pool' },
          },
        },
      },
    });
    await apply({
      apiVersion: `${INFRA_GROUP}/v1alpha1`,
      kind: 'TestMachineTemplate',
      metadata: { name: 'tmt', namespace: ns },
      spec: { template: { spec: {} } },
    });
    const labels = {
      'cluster.x-k8s.io/cluster-name': 'c2',
      'cluster.x-k8s.io/deployment-name': 'md',
    };
    await apply({
      apiVersion: CAPI,
      kind: 'MachineDeployment',
      metadata: { name: 'md', namespace: ns },
      spec: {
        clusterName: 'c2',
        replicas: 2,
        // What Cluster API's defaulting webhook would set (it is not registered here).
        rollout: {
          strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } },
        },
        deletion: { order: 'Random' },
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: {
            clusterName: 'c2',
            bootstrap: {
              configRef: {
                apiGroup: 'bootstrap.oscar.dev',
                kind: 'OscarConfigTemplate',
                name: 'tpl',
              },
            },
            infrastructureRef: { apiGroup: INFRA_GROUP, kind: 'TestMachineTemplate', name: 'tmt' },
          },
        },
      },
    });
    type MachineList = {
      items: (KubeObject & {
        spec: { bootstrap: { configRef?: { name: string }; dataSecretName?: string } };
      })[];
    };
    const machines = await withCapiLogs(() =>
      waitFor(
        'two Machines with their bootstrap data',
        async () => {
          const list = await http().request<MachineList>(
            'GET',
            `/apis/cluster.x-k8s.io/v1beta2/namespaces/${ns}/machines`,
            { query: { labelSelector: 'cluster.x-k8s.io/deployment-name=md' } },
          );
          return list.items.length === 2 && list.items.every((m) => m.spec.bootstrap.dataSecretName)
            ? list.items
            : undefined;
        },
        60_000,
      ),
    );
    const tokens = new Set<string>();
    for (const m of machines) {
      const configName = m.spec.bootstrap.configRef?.name ?? '';
      expect(configName).toBe(m.metadata.name);
      expect(m.spec.bootstrap.dataSecretName).toBe(configName);
      const secret = await waitSecret(configName);
      expect(secret.metadata.labels?.['cluster.x-k8s.io/cluster-name']).toBe('c2');
      const data = userDataOf(secret);
      expect(data.files.get('/etc/oscar/node.env')).toContain(
        `MACHINE=${m.metadata.name}\nCLUSTER=c2\nPOOL=md-pool\n`,
      );
      tokens.add(data.token);
      const t = await tokenOf(configName);
      expect(t.metadata.annotations?.['bootstrap.oscar.dev/machine']).toBe(
        `${ns}/${m.metadata.name}`,
      );
    }
    expect(tokens.size).toBe(2);

    // Scale to one: the Machine that goes takes its config, Secret, token and node object with it.
    const t0 = await tokenOf(machines[0]?.metadata.name ?? '');
    const t1 = await tokenOf(machines[1]?.metadata.name ?? '');
    // Each machine's node object, labelled as the identity approver labels it when it issues
    // the machine's identity (its config's UID); both machines have now joined.
    const nodes = '/apis/oscar.dev/v1alpha1/operatingsystemconfignodes';
    for (const m of machines) {
      const name = m.metadata.name;
      const uid = (await get<ConfigObject>(configPath(name)))?.metadata.uid ?? '';
      expect(uid).not.toBe('');
      await http().request('POST', nodes, {
        body: {
          apiVersion: 'oscar.dev/v1alpha1',
          kind: 'OperatingSystemConfigNode',
          metadata: { name, labels: { 'oscar.dev/config-uid': uid } },
        },
      });
    }
    await http().request(
      'PATCH',
      `/apis/cluster.x-k8s.io/v1beta2/namespaces/${ns}/machinedeployments/md`,
      {
        contentType: CONTENT_MERGE_PATCH,
        body: { spec: { replicas: 1 } },
      },
    );
    const gone = await waitFor(
      'one Machine, its config, Secret and token deleted',
      async () => {
        for (const [m, t] of [
          [machines[0], t0],
          [machines[1], t1],
        ] as const) {
          const name = m?.metadata.name ?? '';
          const left = await Promise.all([
            get(`/apis/cluster.x-k8s.io/v1beta2/namespaces/${ns}/machines/${name}`),
            get(configPath(name)),
            get(secretPath(name)),
            get(tokenPath(decoded(t, 'token-id'))),
            get(`${nodes}/${name}`),
          ]);
          if (left.every((x) => x === undefined)) return name;
        }
        return undefined;
      },
      120_000,
    );
    expect(gone).toBeTruthy();
    // the Machine that stays keeps its node object
    const kept = machines.find((m) => m.metadata.name !== gone)?.metadata.name ?? '';
    expect(await get(`${nodes}/${kept}`)).toBeDefined();
    for (const m of machines) {
      await kubectl(['delete', 'operatingsystemconfignode', m.metadata.name, '--ignore-not-found']);
    }
  });

  it('a paused Cluster (or the pause annotation) is left alone: no Secret, no token until it resumes', async (ctx) => {
    if (clusterUnavailable !== null || skipReason)
      return ctx.skip(clusterUnavailable ?? skipReason);
    await apply(cluster('c3', true));
    const m = await apply(machine('p-1', 'c3', 'p-1'));
    // Cluster API sets itself as owner; while the Cluster is paused it does not, so the test
    // does what it would have done.
    await apply(
      config('p-1', {
        labels: { 'cluster.x-k8s.io/cluster-name': 'c3' },
        ownerReferences: [
          { apiVersion: CAPI, kind: 'Machine', name: 'p-1', uid: m.metadata.uid, controller: true },
        ],
      }),
    );
    await apply(config('a-1', { annotations: { 'cluster.x-k8s.io/paused': '' } }));
    for (const name of ['p-1', 'a-1']) {
      const paused = await waitFor(`${name} Paused=True`, async () => {
        const got = await get<ConfigObject>(configPath(name));
        return got?.status?.conditions?.find((c) => c.type === 'Paused' && c.status === 'True')
          ? got
          : undefined;
      });
      expect(paused.status?.dataSecretName).toBeUndefined();
    }
    await sleep(2000);
    expect(await get(secretPath('p-1'))).toBeUndefined();
    expect(await get(secretPath('a-1'))).toBeUndefined();

    await apply(cluster('c3', false));
    await waitSecret('p-1', 90_000);
  });

  it("deploy/'s aggregated ClusterRole gives a Cluster API manager role rights on OscarConfigs and templates", async (ctx) => {
    if (clusterUnavailable !== null || skipReason)
      return ctx.skip(clusterUnavailable ?? skipReason);
    const role = uniqueName('capi-manager');
    const user = uniqueName('capi-user');
    // A manager role shaped like Cluster API's own: empty rules, filled by aggregation.
    const manifests = [
      await readFile(repoFile, 'utf8'),
      JSON.stringify({
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRole',
        metadata: { name: role },
        aggregationRule: {
          clusterRoleSelectors: [
            { matchLabels: { 'cluster.x-k8s.io/aggregate-to-manager': 'true' } },
          ],
        },
        rules: [],
      }),
      JSON.stringify({
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRoleBinding',
        metadata: { name: role },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
      }),
    ].join('\n---\n');
    expect((await kubectl(['apply', '-f', '-'], { input: manifests })).code).toBe(0);
    const can = async (verb: string, resource: string): Promise<boolean> =>
      (await kubectl(['auth', 'can-i', verb, resource, `--as=${user}`, '-n', ns])).code === 0;
    await waitFor('the aggregation controller filled the role', async () =>
      (await can('create', 'oscarconfigs.bootstrap.oscar.dev')) ? true : undefined,
    );
    for (const verb of ['get', 'list', 'watch', 'create', 'patch', 'update', 'delete']) {
      expect(await can(verb, 'oscarconfigs.bootstrap.oscar.dev'), verb).toBe(true);
      expect(await can(verb, 'oscarconfigtemplates.bootstrap.oscar.dev'), verb).toBe(true);
    }
    expect(await can('get', 'secrets')).toBe(false);
    await kubectl(['delete', 'clusterrole', role]);
    await kubectl(['delete', 'clusterrolebinding', role]);
  });

  it('writes nothing at idle: every machine above settled, 5 s without a single write', async (ctx) => {
    if (clusterUnavailable !== null || skipReason)
      return ctx.skip(clusterUnavailable ?? skipReason);
    const count = controllerWrites;
    if (!count) throw new Error('no controller');
    // Settle: no write for 2 s in a row.
    let last = await count();
    for (let quiet = 0; quiet < 2;) {
      await sleep(1000);
      const now = await count();
      quiet = now === last ? quiet + 1 : 0;
      last = now;
    }
    await sleep(5000);
    expect(await count()).toBe(last);
  });
});
