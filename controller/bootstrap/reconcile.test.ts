// The bootstrap reconcile in memory: which writes each situation costs, and which it never makes.
import { describe, expect, it } from 'vitest';
import type { OscarConfigStatus } from '../../api/bootstrap/schema.js';
import type { OperatingSystemConfigSpec } from '../../api/schema.js';
import { defaultRegistry } from '../../renderers/registry.js';
import type { KubeObject, OscObject } from '../kube/types.js';
import { machineGrantFor, nodeRole, nodeRoleName } from '../shared/node-rbac.js';
import {
  consumedStatus,
  departedOf,
  reconcileBootstrap,
  TokenGoneError,
  WAIT_STATUS_GRACE_MS,
  type BootstrapCaches,
  type BootstrapDeps,
  type BootstrapWriter,
  type RoleObject,
} from './reconcile.js';
import { sampleBootstrapInputs } from './sizes.js';
import { MACHINE_NAME_MAX } from './reserved-names.js';
import { CAPI_CLUSTER_NAME_LABEL } from '../../api/bootstrap/constants.js';
import type { ConfigObject } from './types.js';

const NS = 'ns';
const provision: OperatingSystemConfigSpec = {
  type: 'ubuntu',
  purpose: 'provision',
  files: [{ path: '/etc/m', content: { inline: { data: '{{ machine.name }}\n' } } }],
};
const reconcileSpec: OperatingSystemConfigSpec = { type: 'ubuntu', purpose: 'reconcile' };
/** A provision OSC that hands the token to kubeadm join (examples/kubeadm-worker/ in short). */
const kubeadmProvision: OperatingSystemConfigSpec = {
  type: 'ubuntu',
  purpose: 'provision',
  files: [
    {
      path: '/etc/kubernetes/kubeadm-join.yaml',
      permissions: '0600',
      content: { inline: { data: 'token: {{ bootstrap.token }}\n' } },
    },
  ],
};

function osc(name: string, spec: OperatingSystemConfigSpec): OscObject {
  return { metadata: { name, namespace: NS }, spec };
}

class World implements BootstrapCaches {
  configs = new Map<string, ConfigObject>();
  secrets = new Map<string, KubeObject>();
  tokens = new Set<string>();
  tokenBodies = new Map<string, Record<string, unknown>>();
  nodes = new Set<string>();
  /** Node objects' oscar.dev/config-uid labels, by machine. */
  nodeLabels = new Map<string, string>();
  roles = new Map<string, RoleObject>();
  calls: string[] = [];
  config(_ns: string, name: string) {
    return this.configs.get(name);
  }
  dataSecret(_ns: string, name: string) {
    return this.secrets.get(name);
  }
  osc(_ns: string, name: string) {
    return name === 'prov'
      ? osc('prov', provision)
      : name === 'rec'
        ? osc('rec', reconcileSpec)
        : name === 'kprov'
          ? osc('kprov', kubeadmProvision)
          : undefined;
  }
  references() {
    return { secrets: new Map(), configMaps: new Map() };
  }
  machine() {
    return undefined;
  }
  cluster() {
    return undefined;
  }
  nodeReported(name: string) {
    return this.nodes.has(name);
  }
  nodeRole(_ns: string, name: string) {
    return this.roles.get(name);
  }
  writer(): BootstrapWriter {
    return {
      applyToken: (body) => {
        const name = (body.metadata as { name: string }).name;
        this.calls.push(`applyToken ${name}`);
        this.tokens.add(name);
        this.tokenBodies.set(name, body);
        return Promise.resolve();
      },
      refreshToken: (id) => {
        this.calls.push(`refreshToken ${id}`);
        if (!this.tokens.has(`bootstrap-token-${id}`))
          return Promise.reject(new TokenGoneError(id));
        return Promise.resolve();
      },
      deleteToken: (id) => {
        this.calls.push(`deleteToken ${id}`);
        this.tokens.delete(`bootstrap-token-${id}`);
        return Promise.resolve();
      },
      createDataSecret: (body) => {
        const meta = body.metadata as KubeObject['metadata'];
        this.calls.push(`createDataSecret ${meta.name}`);
        meta.creationTimestamp ??= '2026-12-03T10:00:00Z';
        this.secrets.set(meta.name, { metadata: meta });
        return Promise.resolve({ metadata: meta });
      },
      replaceDataSecret: (body) => {
        const meta = body.metadata as KubeObject['metadata'];
        this.calls.push(`replaceDataSecret ${meta.name}`);
        this.secrets.set(meta.name, { metadata: meta });
        return Promise.resolve({ metadata: meta });
      },
      patchStatus: (_ns, name, status: OscarConfigStatus) => {
        this.calls.push(`patchStatus ${name}`);
        const c = this.configs.get(name);
        if (c) c.status = status;
        return Promise.resolve(undefined);
      },
      event: (_c, e) => {
        this.calls.push(`event ${e.reason}`);
        return Promise.resolve();
      },
      deleteNode: (machine, uid) => {
        this.calls.push(`deleteNode ${machine} ${uid}`);
        if (this.nodeLabels.get(machine) !== uid) return Promise.resolve(false);
        this.nodeLabels.delete(machine);
        return Promise.resolve(true);
      },
      applyNodeRole: (body) => {
        const role = body as unknown as RoleObject;
        this.calls.push(`applyNodeRole ${role.metadata.name}`);
        this.roles.set(role.metadata.name, role);
        return Promise.resolve({ metadata: role.metadata });
      },
    };
  }
}

function setup(now = new Date('2026-12-03T10:00:00Z')) {
  const world = new World();
  const inputs = sampleBootstrapInputs();
  const deps: BootstrapDeps = {
    caches: world,
    writer: world.writer(),
    settings: {
      registry: defaultRegistry(),
      apiServer: inputs.apiServer,
      agent: inputs.agent,
      tokenTtlMs: 20 * 60_000,
      newTokenSecret: () => '0123456789abcdef',
    },
    tokens: new Map(),
    now: () => now,
  };
  const add = (name: string, meta: Partial<ConfigObject['metadata']> = {}): ConfigObject => {
    const c: ConfigObject = {
      metadata: { name, namespace: NS, uid: `uid-${name}`, generation: 1, ...meta },
      spec: { provisionRef: { name: 'prov' }, reconcileRef: { name: 'rec' } },
    };
    world.configs.set(name, c);
    return c;
  };
  return { world, deps, add };
}

describe('reconcileBootstrap', () => {
  it('signs cluster-info for a token only when the user data hands it to kubeadm join', async () => {
    const { world, deps, add } = setup();
    add('plain');
    const kubeadm = add('kubeadm');
    kubeadm.spec = { ...kubeadm.spec, provisionRef: { name: 'kprov' } };
    await reconcileBootstrap(`${NS}/plain`, deps);
    await reconcileBootstrap(`${NS}/kubeadm`, deps);
    const usages = (config: string) => {
      const id = world.configs.get(config)?.status?.bootstrapTokenID ?? '';
      const data = world.tokenBodies.get(`bootstrap-token-${id}`)?.data as Record<string, string>;
      return Object.keys(data).filter((k) => k.startsWith('usage-'));
    };
    expect(usages('plain')).toEqual(['usage-bootstrap-authentication']);
    expect(usages('kubeadm')).toEqual([
      'usage-bootstrap-authentication',
      'usage-bootstrap-signing',
    ]);
  });

  it('a new config waiting for its Machine writes no status until the wait lasts (issue 24)', async () => {
    const t0 = new Date('2026-12-03T10:00:00Z');
    let now = t0;
    const { world, deps, add } = setup(t0);
    deps.now = () => now;
    add('m1', {
      creationTimestamp: t0.toISOString(),
      labels: { [CAPI_CLUSTER_NAME_LABEL]: 'c1' },
    });
    const first = await reconcileBootstrap(`${NS}/m1`, deps);
    expect(first).toEqual({ result: 'waiting', writes: 0, requeueAfterMs: WAIT_STATUS_GRACE_MS });
    expect(world.calls).toEqual([]);
    now = new Date(t0.getTime() + WAIT_STATUS_GRACE_MS);
    await reconcileBootstrap(`${NS}/m1`, deps);
    expect(world.calls).toEqual(['patchStatus m1']);
    const ready = world.configs.get('m1')?.status?.conditions?.find((c) => c.type === 'Ready');
    expect(ready).toMatchObject({ status: 'False', reason: 'WaitingForMachine' });
  });

  it('a machine that never asks for its identity: NodeIdentity=False and one Warning Event, once', async () => {
    const t0 = new Date('2026-12-03T10:00:00Z');
    let now = t0;
    const { world, deps, add } = setup(t0);
    deps.now = () => now;
    deps.settings.identityWaitMs = 10 * 60_000;
    deps.settings.tokenTtlMs = 60 * 60_000;
    add('m1');
    await reconcileBootstrap(`${NS}/m1`, deps); // created
    const upkeep = await reconcileBootstrap(`${NS}/m1`, deps); // (the Secret's watch event)
    expect(upkeep.requeueAfterMs).toBe(10 * 60_000); // looks again when the wait is over
    now = new Date(t0.getTime() + 10 * 60_000);
    world.calls = [];
    await reconcileBootstrap(`${NS}/m1`, deps);
    expect(world.calls).toEqual(['patchStatus m1', 'event IdentityNotRequested']);
    const c = world.configs.get('m1')?.status?.conditions?.find((x) => x.type === 'NodeIdentity');
    expect(c).toMatchObject({ status: 'False', reason: 'NotRequested' });
    expect(c?.message).toMatch(/journalctl -u oscar-agent-install/);
    world.calls = [];
    await reconcileBootstrap(`${NS}/m1`, deps);
    expect(world.calls).toEqual([]);
  });

  it('a new machine costs three writes: token, Secret, status — and a second pass none', async () => {
    const { world, deps, add } = setup();
    add('m1');
    const first = await reconcileBootstrap(`${NS}/m1`, deps);
    expect(first.result).toBe('created');
    expect(world.calls).toEqual([
      expect.stringMatching(/^applyToken bootstrap-token-[a-z0-9]{6}$/),
      'createDataSecret m1',
      'patchStatus m1',
    ]);
    expect(first.writes).toBe(3);
    expect(first.requeueAfterMs).toBe(10 * 60_000);
    const status = world.configs.get('m1')?.status;
    expect(status?.dataSecretName).toBe('m1');
    expect(status?.initialization?.dataSecretCreated).toBe(true);
    world.calls = [];
    const second = await reconcileBootstrap(`${NS}/m1`, deps);
    expect(second).toMatchObject({ result: 'unchanged', writes: 0 });
    expect(world.calls).toEqual([]);
  });

  it('a spec change after creation never renders new user data (one status write for the generation)', async () => {
    const { world, deps, add } = setup();
    add('m1');
    await reconcileBootstrap(`${NS}/m1`, deps);
    const c = world.configs.get('m1');
    if (!c) throw new Error('no config');
    c.metadata.generation = 2;
    c.spec = { ...c.spec, values: { region: 'new' } };
    world.calls = [];
    await reconcileBootstrap(`${NS}/m1`, deps);
    expect(world.calls).toEqual(['patchStatus m1']);
    expect(world.configs.get('m1')?.status?.observedGeneration).toBe(2);
  });

  it('refreshes the token at half its TTL; after a restart (nothing remembered) once at once', async () => {
    const t0 = new Date('2026-12-03T10:00:00Z');
    let now = t0;
    const { world, deps, add } = setup();
    deps.now = () => now;
    add('m1');
    await reconcileBootstrap(`${NS}/m1`, deps);
    world.calls = [];
    now = new Date(t0.getTime() + 10 * 60_000 + 1);
    const r = await reconcileBootstrap(`${NS}/m1`, deps);
    expect(r.result).toBe('refreshed');
    expect(world.calls).toEqual([expect.stringMatching(/^refreshToken /)]);
    deps.tokens.clear();
    world.calls = [];
    await reconcileBootstrap(`${NS}/m1`, deps);
    expect(world.calls).toEqual([expect.stringMatching(/^refreshToken /)]);
  });

  it('a token gone before the machine joined is re-issued with new user data and a Warning Event', async () => {
    const { world, deps, add } = setup();
    add('m1');
    await reconcileBootstrap(`${NS}/m1`, deps);
    world.tokens.clear();
    deps.tokens.clear();
    world.calls = [];
    await reconcileBootstrap(`${NS}/m1`, deps);
    await reconcileBootstrap(`${NS}/m1`, deps);
    expect(world.calls).toEqual([
      expect.stringMatching(/^refreshToken /),
      expect.stringMatching(/^applyToken /),
      'replaceDataSecret m1',
      'event TokenReissued',
    ]);
  });

  it('a machine that joined loses its token (one delete, one status write), then nothing', async () => {
    const { world, deps, add } = setup();
    add('m1');
    await reconcileBootstrap(`${NS}/m1`, deps);
    world.nodes.add('m1');
    world.calls = [];
    expect((await reconcileBootstrap(`${NS}/m1`, deps)).result).toBe('joined');
    expect(world.calls).toEqual([expect.stringMatching(/^deleteToken /), 'patchStatus m1']);
    expect(world.tokens.size).toBe(0);
    world.calls = [];
    await reconcileBootstrap(`${NS}/m1`, deps);
    expect(world.calls).toEqual([]);
  });

  it('a token another component consumed (BootstrapTokenAvailable=False in the status) is neither refreshed nor re-issued', async () => {
    const { world, deps, add } = setup();
    add('m1');
    await reconcileBootstrap(`${NS}/m1`, deps);
    const c = world.configs.get('m1');
    const cond = c?.status?.conditions?.find((x) => x.type === 'BootstrapTokenAvailable');
    if (!cond) throw new Error('no condition');
    Object.assign(cond, { status: 'False', reason: 'TokenConsumed', message: 'CSR approved' });
    world.tokens.clear();
    deps.tokens.clear();
    world.calls = [];
    expect((await reconcileBootstrap(`${NS}/m1`, deps)).writes).toBe(0);
    expect(world.calls).toEqual([]);
  });

  it('paused (annotation): only the Paused condition is written', async () => {
    const { world, deps, add } = setup();
    add('m1', { annotations: { 'cluster.x-k8s.io/paused': '' } });
    expect((await reconcileBootstrap(`${NS}/m1`, deps)).result).toBe('paused');
    expect(world.calls).toEqual(['patchStatus m1']);
    expect(
      world.configs.get('m1')?.status?.conditions?.find((c) => c.type === 'Paused')?.status,
    ).toBe('True');
  });

  it('made for Cluster API (cluster-name label) but not owned by a Machine yet: waits, issues nothing', async () => {
    const { world, deps, add } = setup();
    add('m1', { labels: { 'cluster.x-k8s.io/cluster-name': 'c1' } });
    expect((await reconcileBootstrap(`${NS}/m1`, deps)).result).toBe('waiting');
    expect(world.calls).toEqual(['patchStatus m1']);
    expect(world.tokens.size).toBe(0);
  });

  it('a missing provision OSC or agent source: Ready=False with the field and the fix, nothing issued', async () => {
    const { world, deps, add } = setup();
    const c = add('m1');
    c.spec.provisionRef = { name: 'nope' };
    await reconcileBootstrap(`${NS}/m1`, deps);
    const ready = world.configs.get('m1')?.status?.conditions?.find((x) => x.type === 'Ready');
    expect(ready?.reason).toBe('ProvisionConfigNotFound');
    expect(ready?.message).toMatch(/^spec\.provisionRef: OperatingSystemConfig "nope" not found/);
    expect(world.calls).toEqual(['patchStatus m1', 'event ProvisionConfigNotFound']);
    deps.settings.agent = {};
    c.spec.provisionRef = { name: 'prov' };
    world.calls = [];
    await reconcileBootstrap(`${NS}/m1`, deps);
    expect(
      world.configs.get('m1')?.status?.conditions?.find((x) => x.type === 'Ready')?.reason,
    ).toBe('AgentSourceMissing');
    expect(world.tokens.size).toBe(0);
  });

  it('a deleted config takes its token with it', async () => {
    const { world, deps, add } = setup();
    add('m1');
    await reconcileBootstrap(`${NS}/m1`, deps);
    world.configs.delete('m1');
    world.calls = [];
    expect((await reconcileBootstrap(`${NS}/m1`, deps)).result).toBe('deleted');
    expect(world.calls).toEqual([expect.stringMatching(/^deleteToken /)]);
  });

  describe("a deleted config's node object (a machine scaled down)", () => {
    it("is deleted with the config's UID as the condition, once", async () => {
      const { world, deps, add } = setup();
      const c = add('m1');
      await reconcileBootstrap(`${NS}/m1`, deps);
      world.nodeLabels.set('m1', 'uid-m1');
      // what the controller remembers when the config's deletion is seen
      deps.departed = new Map([[`${NS}/m1`, departedOf(c) ?? { machine: '', uid: '' }]]);
      world.configs.delete('m1');
      world.calls = [];
      const out = await reconcileBootstrap(`${NS}/m1`, deps);
      expect(out).toEqual({ result: 'deleted', writes: 2 });
      expect(world.calls).toEqual([expect.stringMatching(/^deleteToken /), 'deleteNode m1 uid-m1']);
      expect(world.nodeLabels.has('m1')).toBe(false);
      world.calls = [];
      expect(await reconcileBootstrap(`${NS}/m1`, deps)).toEqual({ result: 'deleted', writes: 0 });
      expect(world.calls).toEqual([]);
    });

    it("is left alone when labelled for another config's UID (the writer's check)", async () => {
      const { world, deps, add } = setup();
      const c = add('m1');
      world.nodeLabels.set('m1', 'uid-of-another-namespace');
      deps.departed = new Map([[`${NS}/m1`, departedOf(c) ?? { machine: '', uid: '' }]]);
      world.configs.delete('m1');
      expect(await reconcileBootstrap(`${NS}/m1`, deps)).toEqual({ result: 'deleted', writes: 0 });
      expect(world.calls).toEqual(['deleteNode m1 uid-m1']);
      expect(world.nodeLabels.get('m1')).toBe('uid-of-another-namespace');
    });

    it('a config being deleted (a deletionTimestamp) deletes it from the config itself', async () => {
      const { world, deps, add } = setup();
      add('m1', { deletionTimestamp: '2026-12-03T10:00:00Z' });
      world.nodeLabels.set('m1', 'uid-m1');
      expect((await reconcileBootstrap(`${NS}/m1`, deps)).result).toBe('deleted');
      expect(world.calls).toContain('deleteNode m1 uid-m1');
    });

    it('a failed deletion is retried: the machine stays remembered', async () => {
      const { world, deps, add } = setup();
      const c = add('m1');
      world.nodeLabels.set('m1', 'uid-m1');
      deps.departed = new Map([[`${NS}/m1`, departedOf(c) ?? { machine: '', uid: '' }]]);
      world.configs.delete('m1');
      const writer = deps.writer;
      deps.writer = { ...writer, deleteNode: () => Promise.reject(new Error('409 Conflict')) };
      await expect(reconcileBootstrap(`${NS}/m1`, deps)).rejects.toThrow(/409/);
      deps.writer = writer;
      await reconcileBootstrap(`${NS}/m1`, deps);
      expect(world.nodeLabels.has('m1')).toBe(false);
    });

    it("names a Cluster API Machine's node after the Machine, not the config", () => {
      expect(
        departedOf({
          metadata: {
            name: 'cfg-x',
            namespace: NS,
            uid: 'u1',
            ownerReferences: [
              { apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'Machine', name: 'md-abc', uid: 'm' },
            ],
          },
          spec: { provisionRef: { name: 'prov' }, reconcileRef: { name: 'rec' } },
        }),
      ).toEqual({ machine: 'md-abc', uid: 'u1' });
      expect(
        departedOf({
          metadata: { name: 'm1', namespace: NS },
          spec: { provisionRef: { name: 'prov' }, reconcileRef: { name: 'rec' } },
        }),
      ).toBeUndefined();
    });
  });

  describe('node access: the Role the approver wrote follows spec.reconcileRef', () => {
    // the machine joined and its identity was issued: the approver wrote the Role for 'rec'
    async function issued() {
      const { world, deps, add } = setup();
      const c = add('m1');
      await reconcileBootstrap(`${NS}/m1`, deps);
      world.nodes.add('m1');
      await reconcileBootstrap(`${NS}/m1`, deps);
      world.roles.set('oscar-node-m1', nodeRole(machineGrantFor(c, 'm1')) as unknown as RoleObject);
      world.calls = [];
      return { world, deps, c };
    }
    const secretsOf = (role: RoleObject | undefined) =>
      (role?.rules as { resourceNames: string[] }[] | undefined)?.flatMap((r) => r.resourceNames);

    it('at steady state: no write', async () => {
      const { world, deps } = await issued();
      expect(await reconcileBootstrap(`${NS}/m1`, deps)).toMatchObject({
        result: 'unchanged',
        writes: 0,
      });
      expect(world.calls).toEqual([]);
    });

    it('a new reconcileRef: one apply naming only the new OSC, then nothing', async () => {
      const { world, deps, c } = await issued();
      world.calls = [];
      c.spec = { ...c.spec, reconcileRef: { name: 'rec2' } };
      const out = await reconcileBootstrap(`${NS}/m1`, deps);
      expect(world.calls).toEqual(['applyNodeRole oscar-node-m1']);
      expect(out).toMatchObject({ result: 'access', writes: 1 });
      expect(secretsOf(world.roles.get('oscar-node-m1'))).toEqual([
        'oscar-rec2-reconcile',
        'oscar-rec2-rev-0',
        'oscar-rec2-rev-1',
        'oscar-rec2-rev-2',
        'oscar-rec2-rev-3',
        'oscar-rec2-rev-4',
      ]);
      world.calls = [];
      expect((await reconcileBootstrap(`${NS}/m1`, deps)).writes).toBe(0);
      expect(world.calls).toEqual([]);
    });

    it('no identity yet (no Role): nothing — the approver writes it from the config then', async () => {
      const { world, deps, add } = setup();
      const c = add('m1');
      await reconcileBootstrap(`${NS}/m1`, deps);
      c.spec = { ...c.spec, reconcileRef: { name: 'rec2' } };
      world.calls = [];
      await reconcileBootstrap(`${NS}/m1`, deps);
      expect(world.calls.filter((x) => x.startsWith('applyNodeRole'))).toEqual([]);
    });

    it("a Role another config owns (the machine's name reused) is left alone", async () => {
      const { world, deps, c } = await issued();
      const other = nodeRole(
        machineGrantFor({ ...c, metadata: { ...c.metadata, uid: 'uid-other' } }, 'm1'),
      ) as unknown as RoleObject;
      world.roles.set('oscar-node-m1', other);
      c.spec = { ...c.spec, reconcileRef: { name: 'rec2' } };
      await reconcileBootstrap(`${NS}/m1`, deps);
      expect(world.calls).toEqual([]);
      expect(world.roles.get('oscar-node-m1')).toBe(other);
    });

    it('paused: the Role is not rewritten until resumed', async () => {
      const { world, deps, c } = await issued();
      c.metadata.annotations = { 'cluster.x-k8s.io/paused': '' };
      c.spec = { ...c.spec, reconcileRef: { name: 'rec2' } };
      await reconcileBootstrap(`${NS}/m1`, deps);
      expect(world.calls.filter((x) => x.startsWith('applyNodeRole'))).toEqual([]);
    });
  });
});

describe('reconcileBootstrap with spec.kubeletBootstrap: the token serves the agent and kubelet', () => {
  const agentUsed = {
    reason: 'IdentityIssued',
    message: 'Token consumed by the agent’s certificate request oscar-m1-abc (user oscar:node:m1).',
  };
  const kubeletUsed = {
    reason: 'KubeletIdentityIssued',
    message: 'Token consumed by kubelet’s certificate request csr-1 (user system:node:m1).',
  };
  const condition = (c: ConfigObject | undefined, type: string) =>
    c?.status?.conditions?.find((x) => x.type === type);

  function kubeletSetup(t0: Date) {
    const s = setup(t0);
    const c = s.add('m1');
    c.spec = { ...c.spec, kubeletBootstrap: true };
    return { ...s, c };
  }

  it('says both consumers need the token until one is done; a registered Node alone deletes nothing', async () => {
    const t0 = new Date('2026-12-03T10:00:00Z');
    const { world, deps } = kubeletSetup(t0);
    await reconcileBootstrap(`${NS}/m1`, deps);
    await reconcileBootstrap(`${NS}/m1`, deps);
    const c = world.configs.get('m1');
    expect(c?.status?.bootstrapTokenNeededBy).toEqual(['agent', 'kubelet']);
    expect(condition(c, 'BootstrapTokenAvailable')?.message).toMatch(
      /the agent's and kubelet's certificate/,
    );
    world.nodes.add('m1'); // (an OSCNode does not replace the agent's issued certificate)
    world.calls = [];
    await reconcileBootstrap(`${NS}/m1`, deps);
    expect(world.calls.filter((x) => x.startsWith('deleteToken'))).toEqual([]);
  });

  it('the creating pass says who needs the token, so the next pass writes no status (issue 24)', async () => {
    const { world, deps } = kubeletSetup(new Date('2026-12-03T10:00:00Z'));
    await reconcileBootstrap(`${NS}/m1`, deps);
    const c = world.configs.get('m1');
    expect(c?.status?.bootstrapTokenNeededBy).toEqual(['agent', 'kubelet']);
    expect(condition(c, 'BootstrapTokenAvailable')?.message).toMatch(
      /the agent's and kubelet's certificate/,
    );
    world.calls = [];
    await reconcileBootstrap(`${NS}/m1`, deps);
    expect(world.calls.filter((x) => x.startsWith('patchStatus'))).toEqual([]);
  });

  it('agent first: the token is kept for kubelet, no longer refreshed, and its expiry is reported', async () => {
    const t0 = new Date('2026-12-03T10:00:00Z');
    let now = t0;
    const { world, deps } = kubeletSetup(t0);
    deps.now = () => now;
    deps.consumed = new Map();
    await reconcileBootstrap(`${NS}/m1`, deps);
    const c = world.configs.get('m1');
    if (!c) throw new Error('no config');
    c.status = consumedStatus(c, agentUsed, now, 'agent', deps.consumed);
    expect(c.status.bootstrapTokenNeededBy).toEqual(['kubelet']);
    expect(condition(c, 'BootstrapTokenAvailable')).toMatchObject({
      status: 'True',
      reason: 'AwaitingKubelet',
    });
    expect(condition(c, 'NodeIdentity')).toMatchObject({ status: 'True', reason: 'Issued' });
    // past half the TTL: a config waiting for the agent would refresh; this one does not
    now = new Date(t0.getTime() + 15 * 60_000);
    world.calls = [];
    const r = await reconcileBootstrap(`${NS}/m1`, deps);
    expect(world.calls.filter((x) => /refreshToken|deleteToken/.test(x))).toEqual([]);
    expect(r.requeueAfterMs).toBe(5 * 60_000); // at the expiry
    now = new Date(t0.getTime() + 20 * 60_000);
    world.calls = [];
    await reconcileBootstrap(`${NS}/m1`, deps);
    expect(world.calls).toEqual(['patchStatus m1', 'event KubeletNotRequested']);
    expect(condition(c, 'BootstrapTokenAvailable')).toMatchObject({
      status: 'False',
      reason: 'ExpiredBeforeKubelet',
    });
    expect(c.status.bootstrapTokenNeededBy).toEqual([]);
    world.calls = [];
    await reconcileBootstrap(`${NS}/m1`, deps);
    expect(world.calls).toEqual([]);
  });

  it('then kubelet: the token is consumed by both (False, nobody needs it)', () => {
    const now = new Date('2026-12-03T10:00:00Z');
    const { c } = kubeletSetup(now);
    c.status = consumedStatus(c, agentUsed, now, 'agent');
    c.status = consumedStatus(c, kubeletUsed, now, 'kubelet');
    expect(condition(c, 'BootstrapTokenAvailable')).toMatchObject({
      status: 'False',
      reason: 'KubeletIdentityIssued',
    });
    expect(condition(c, 'KubeletIdentity')).toMatchObject({ status: 'True', reason: 'Issued' });
    expect(c.status.bootstrapTokenNeededBy).toEqual([]);
  });

  it('kubelet first: the token stays (and is refreshed) for the agent', async () => {
    const t0 = new Date('2026-12-03T10:00:00Z');
    let now = t0;
    const { world, deps } = kubeletSetup(t0);
    deps.now = () => now;
    await reconcileBootstrap(`${NS}/m1`, deps);
    const c = world.configs.get('m1');
    if (!c) throw new Error('no config');
    c.status = consumedStatus(c, kubeletUsed, now, 'kubelet');
    expect(condition(c, 'BootstrapTokenAvailable')).toMatchObject({
      status: 'True',
      reason: 'AwaitingAgent',
    });
    expect(c.status.bootstrapTokenNeededBy).toEqual(['agent']);
    now = new Date(t0.getTime() + 10 * 60_000 + 1);
    world.calls = [];
    await reconcileBootstrap(`${NS}/m1`, deps);
    expect(world.calls[0]).toMatch(/^refreshToken /);
    expect(c.status.bootstrapTokenNeededBy).toEqual(['agent']);
  });

  it('without spec.kubeletBootstrap the agent’s certificate ends the token as before', () => {
    const now = new Date('2026-12-03T10:00:00Z');
    const { add } = setup(now);
    const c = add('m2');
    c.status = consumedStatus(c, agentUsed, now);
    expect(condition(c, 'BootstrapTokenAvailable')).toMatchObject({
      status: 'False',
      reason: 'IdentityIssued',
    });
    expect(c.status.bootstrapTokenNeededBy).toBeUndefined();
  });
});

describe("reconcileBootstrap: a config named like an OSC's Secret (red-team, issue 28 tenancy)", () => {
  it.each(['oscar-rec-reconcile', 'oscar-rec-rev-0', 'oscar-rec-rev-4', 'oscar-prov-provision'])(
    '%s gets no token and no user data: its machine’s token would be readable by the machines of that OSC',
    async (name) => {
      const { world, deps, add } = setup();
      add(name);
      await reconcileBootstrap(`${NS}/${name}`, deps);
      const ready = world.configs.get(name)?.status?.conditions?.find((x) => x.type === 'Ready');
      expect(ready?.reason).toBe('SecretNameReserved');
      expect(ready?.message).toMatch(/Rename the config/);
      expect(world.tokens.size).toBe(0);
      expect(world.secrets.has(name)).toBe(false);
    },
  );

  it('names that only look alike get their user data', async () => {
    for (const name of [
      'oscar-rec-rev-5',
      'oscar-reconcile',
      'rec-reconcile',
      'oscar-rec-rev-0x',
    ]) {
      const { world, deps, add } = setup();
      add(name);
      await reconcileBootstrap(`${NS}/${name}`, deps);
      expect(world.calls, name).toContain(`createDataSecret ${name}`);
    }
  });
});

describe('reconcileBootstrap: machine names too long for the names derived from them (red-team round 3)', () => {
  it('a 237-character machine name gets no token and no user data, and says why', async () => {
    const name = `m${'a'.repeat(MACHINE_NAME_MAX)}`;
    const { world, deps, add } = setup();
    add(name);
    await reconcileBootstrap(`${NS}/${name}`, deps);
    const ready = world.configs.get(name)?.status?.conditions?.find((x) => x.type === 'Ready');
    expect(ready).toMatchObject({ status: 'False', reason: 'MachineNameTooLong' });
    expect(ready?.message).toContain(`at most ${String(MACHINE_NAME_MAX)}`);
    expect(world.tokens.size).toBe(0);
    expect(world.secrets.has(name)).toBe(false);
  });

  it('positive control: a machine name of exactly the limit is bootstrapped, its derived names fit', async () => {
    const name = 'a'.repeat(MACHINE_NAME_MAX);
    const { world, deps, add } = setup();
    add(name);
    await reconcileBootstrap(`${NS}/${name}`, deps);
    expect(world.calls).toContain(`createDataSecret ${name}`);
    // Its user data Secret's label value fits in 63 characters (the API server refused the name).
    const label = world.secrets.get(name)?.metadata.labels?.['bootstrap.oscar.dev/config'] ?? '';
    expect(label.length).toBeGreaterThan(0);
    expect(label.length).toBeLessThanOrEqual(63);
    expect(label).toMatch(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/);
    expect(`oscar-${name}-0123456789`.length).toBe(253);
    expect(nodeRoleName(name).length).toBeLessThanOrEqual(253);
  });
});
