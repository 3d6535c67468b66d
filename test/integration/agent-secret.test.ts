// The agent against the real API server: it follows its reconcile Secret (written here the way
// the controller writes it: encodeConfigData + checksum annotation) into a directory root, and
// reports in its OperatingSystemConfigNode — with the least-privilege RBAC of
// deploy/agent-rbac.yaml, as the agent's own ServiceAccount identity.
import { gzipSync } from 'node:zlib';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  KubernetesObjectApi,
  type KubeConfig,
  type KubernetesObject,
} from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { memoryLogger } from '../../log/memory.js';
import { type Agent, logReporter } from '../../agent/agent.js';
import { immediateAgent } from '../../agent/immediate.js';
import { followSecret } from '../../agent/follow-secret.js';
import { LocalSystemd } from '../../agent/systemd.js';
import { config, desiredOf, file, unit } from '../../agent/testing/fixtures.js';
import { ANNOTATION_CHECKSUM, encodeConfigData, KEY_CONFIG_GZIP } from '../../api/secret.js';
import type { OperatingSystemConfigNode } from '../../api/schema.js';
import {
  adminKubeConfig,
  createTestNamespace,
  kubeConfigFor,
  kubectl,
  skipWithoutCluster,
  testEnv,
  uniqueName,
} from './support/cluster.js';
import { waitFor } from '../support/wait.js';
import { agentIdentity, agentRbacManifest } from '../support/agent-identity.js';

skipWithoutCluster();

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const SECRET = 'oscar-w-reconcile';

function version(n: string) {
  return desiredOf(
    config(
      [unit('app.service', { filePaths: ['/etc/app/app.conf'] })],
      [file('/etc/app/app.conf', `version ${n}\n`)],
    ),
  );
}

interface Setup {
  ns: string;
  node: string;
  root: string;
  agent: Agent;
  /** Another agent on the same root and state directory: the node's agent after a restart. */
  newAgent(): Agent;
  logs: string[];
  admin: KubernetesObjectApi;
  requests: { n: number };
  putSecret(data: Record<string, Buffer>, checksum: string): Promise<void>;
  nodeStatus(): Promise<OperatingSystemConfigNode['status']>;
}

async function setup(pollIntervalMs = 60_000): Promise<Setup> {
  const ns = await createTestNamespace('agent');
  const node = uniqueName('node');
  const rbac = await agentRbacManifest({ node, namespace: ns, osc: 'w' }); // SECRET is w's
  const applied = await kubectl(['apply', '-f', '-'], { input: rbac });
  expect(applied.code, applied.stderr).toBe(0);
  const kc: KubeConfig = await kubeConfigFor(agentIdentity(ns, node));
  const admin = KubernetesObjectApi.makeApiClient(adminKubeConfig());
  const putSecret = async (data: Record<string, Buffer>, checksum: string): Promise<void> => {
    const body: Omit<KubernetesObject, 'metadata'> & {
      metadata: Record<string, unknown>;
      data: Record<string, string>;
    } = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: SECRET, namespace: ns, annotations: { [ANNOTATION_CHECKSUM]: checksum } },
      data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, v.toString('base64')])),
    };
    try {
      const current = await admin.read({
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: SECRET, namespace: ns },
      });
      await admin.replace({
        ...body,
        metadata: {
          name: SECRET,
          namespace: ns,
          annotations: { [ANNOTATION_CHECKSUM]: checksum },
          resourceVersion: current.metadata?.resourceVersion ?? '',
        },
      });
    } catch (error) {
      if (
        !String(error).includes('404') &&
        !String((error as { code?: number }).code).includes('404')
      )
        throw error;
      await admin.create(body);
    }
  };
  const nodeStatus = async (): Promise<OperatingSystemConfigNode['status']> => {
    const o = (await admin.read({
      apiVersion: 'oscar.dev/v1alpha1',
      kind: 'OperatingSystemConfigNode',
      metadata: { name: node },
    })) as unknown as OperatingSystemConfigNode;
    return o.status;
  };
  const root = await mkdtemp(join(tmpdir(), 'oscar-agent-it-'));
  const stateDir = join(root, 'var/lib/oscar');
  await mkdir(stateDir, { recursive: true });
  const { log, lines: logs } = memoryLogger('agent');
  const requests = { n: 0 };
  const onRequest = (): void => {
    requests.n++;
  };
  // An agent on this root, as a node process runs it; a restart is a second one on the same root.
  const newAgent = (): Agent => {
    const { source, reporter } = followSecret(kc, {
      namespace: ns,
      secret: SECRET,
      node,
      pollIntervalMs,
      log,
      onRequest,
      backoffMaxMs: 2_000,
    });
    const a = immediateAgent({
      source,
      deps: {
        root,
        stateDir,
        systemd: new LocalSystemd(root, join(stateDir, 'would-run.log')),
        owners: false,
      },
      reporters: [logReporter(log), reporter],
      log,
      retryBaseMs: 200,
    });
    cleanups.push(async () => {
      await a.stop();
      reporter.stop();
    });
    return a;
  };
  cleanups.push(() => rm(root, { recursive: true, force: true }));
  const agent = newAgent();
  return { ns, node, root, agent, newAgent, logs, admin, requests, putSecret, nodeStatus };
}

const put = (s: Setup, d: ReturnType<typeof version>) =>
  s.putSecret(encodeConfigData(d.bytes), d.checksum);

const appliedIs = (s: Setup, checksum: string) =>
  waitFor(`oscnode appliedChecksum ${checksum.slice(0, 12)}`, async () => {
    const st = await s.nodeStatus();
    return st?.appliedChecksum === checksum &&
      st.conditions?.find((c) => c.type === 'Applied')?.status === 'True'
      ? st
      : undefined;
  });

describe('agent with the real API server', () => {
  it('applies its Secret, follows a change, and reports per node', async () => {
    const s = await setup();
    const v1 = version('1');
    await put(s, v1);
    await s.agent.start();
    const st1 = await appliedIs(s, v1.checksum);
    expect(st1.desiredChecksum).toBe(v1.checksum);
    expect(st1.oscRef).toMatchObject({ namespace: s.ns, secretName: SECRET });
    expect(await readFile(join(s.root, 'etc/app/app.conf'), 'utf8')).toBe('version 1\n');

    const v2 = version('2');
    const t0 = Date.now();
    await put(s, v2);
    const st2 = await appliedIs(s, v2.checksum);
    console.log(`agent-secret: Secret update → oscnode applied in ${Date.now() - t0} ms`);
    expect(await readFile(join(s.root, 'etc/app/app.conf'), 'utf8')).toBe('version 2\n');
    expect(st2.restartedUnits?.map((u) => `${u.action} ${u.name}`)).toEqual([
      'restart app.service',
    ]);
    expect(st2.conditions?.find((c) => c.type === 'Degraded')?.status).toBe('False');
    expect(st2.lastAppliedTime).toMatch(/^\d{4}-\d\d-\d\dT/);
  });

  it('after a restart with nothing new, reports what is applied without applying it again', async () => {
    const s = await setup();
    const v1 = version('1');
    await put(s, v1);
    await s.agent.start();
    await appliedIs(s, v1.checksum);
    await s.agent.stop();
    // The node object goes (say, a cleanup); the restarted agent must say again what is applied.
    const deleted = await kubectl(['delete', 'oscnode', s.node]);
    expect(deleted.code, deleted.stderr).toBe(0);
    const logsBefore = s.logs.length;
    const again = s.newAgent();
    await again.start();
    const st = await appliedIs(s, v1.checksum);
    expect(st.desiredChecksum).toBe(v1.checksum);
    expect(st.conditions?.find((c) => c.type === 'Degraded')?.status).toBe('False');
    const after = s.logs.slice(logsBefore).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(after.filter((r) => r.msg === 'applied')).toEqual([]); // nothing re-applied
    expect(after).toContainEqual(
      expect.objectContaining({
        msg: 'restored from the state directory',
        checksum: v1.checksum.slice(0, 12),
      }),
    );
  });

  it('refuses a corrupted Secret (bad checksum, truncated gzip), reports it, keeps the last good state', async () => {
    const s = await setup();
    const v1 = version('1');
    await put(s, v1);
    await s.agent.start();
    await appliedIs(s, v1.checksum);

    const v2 = version('2');
    await s.putSecret(encodeConfigData(v2.bytes), 'f'.repeat(64)); // annotation does not match
    const bad = await waitFor('Degraded=True InvalidSecret', async () => {
      const st = await s.nodeStatus();
      const d = st?.conditions?.find((c) => c.type === 'Degraded');
      return d?.status === 'True' && d.reason === 'InvalidSecret' ? st : undefined;
    });
    expect(bad.lastError?.message).toMatch(/checksum mismatch/);
    expect(bad.appliedChecksum).toBe(v1.checksum);
    expect(await readFile(join(s.root, 'etc/app/app.conf'), 'utf8')).toBe('version 1\n');

    const gz = gzipSync(v2.bytes);
    await s.putSecret({ [KEY_CONFIG_GZIP]: gz.subarray(0, gz.length - 10) }, v2.checksum);
    const truncated = await waitFor('the truncated gzip reported', async () => {
      const st = await s.nodeStatus();
      return st?.lastError?.message.includes('not valid gzip') === true ? st : undefined;
    });
    expect(truncated.appliedChecksum).toBe(v1.checksum);
    expect(await readFile(join(s.root, 'etc/app/app.conf'), 'utf8')).toBe('version 1\n');

    await put(s, v2); // fixed: applied, Degraded clears
    const ok = await appliedIs(s, v2.checksum);
    expect(ok.conditions?.find((c) => c.type === 'Degraded')?.status).toBe('False');
    expect(ok.lastError).toBeUndefined();
  });

  it('the agent identity can read only its own Secret and write only its own node object', async () => {
    const s = await setup();
    const kc = await kubeConfigFor({
      user: `system:serviceaccount:${s.ns}:oscar-agent-${s.node}`,
      groups: ['system:serviceaccounts'],
    });
    const path = join(tmpdir(), `${uniqueName('kc')}.yaml`);
    await (await import('node:fs/promises')).writeFile(path, kc.exportConfig());
    cleanups.push(() => rm(path, { force: true }));
    const can = async (...args: string[]) =>
      (await kubectl(['auth', 'can-i', ...args], { kubeconfig: path })).stdout.trim();
    expect(await can('get', `secret/${SECRET}`, '-n', s.ns)).toBe('yes');
    expect(await can('get', 'secret/other', '-n', s.ns)).toBe('no');
    expect(await can('list', 'secrets', '-n', s.ns)).toBe('no');
    expect(
      await can('patch', `operatingsystemconfignodes.oscar.dev/${s.node}`, '--subresource=status'),
    ).toBe('yes');
    expect(
      await can(
        'patch',
        'operatingsystemconfignodes.oscar.dev/another-node',
        '--subresource=status',
      ),
    ).toBe('no');
    expect(await can('delete', `operatingsystemconfignodes.oscar.dev/${s.node}`)).toBe('no');
    // it reads its own node object (grant mode) but cannot write it: no grant to itself
    expect(await can('get', `operatingsystemconfignodes.oscar.dev/${s.node}`)).toBe('yes');
    expect(await can('get', 'operatingsystemconfignodes.oscar.dev/another-node')).toBe('no');
    expect(await can('patch', `operatingsystemconfignodes.oscar.dev/${s.node}`)).toBe('no');
    expect(await can('update', `operatingsystemconfignodes.oscar.dev/${s.node}`)).toBe('no');
    expect(await can('get', 'operatingsystemconfigs.oscar.dev', '-n', s.ns)).toBe('no');
    // drift Events in its own namespace: create, nothing more, nowhere else
    expect(await can('create', 'events.events.k8s.io', '-n', s.ns)).toBe('yes');
    expect(await can('list', 'events.events.k8s.io', '-n', s.ns)).toBe('no');
    expect(await can('delete', 'events.events.k8s.io', '-n', s.ns)).toBe('no');
    expect(await can('create', 'events.events.k8s.io', '-n', 'default')).toBe('no');
  });

  it('an API server outage of 30 s loses nothing: the pending report lands, later changes converge', async () => {
    const s = await setup(5_000);
    const v1 = version('1');
    await put(s, v1);
    await s.agent.start();
    await appliedIs(s, v1.checksum);
    const env = await testEnv();
    // a change the agent receives just before the server goes away: its report must still land
    const v2 = version('2');
    await put(s, v2);
    await env.stopApiServer();
    try {
      await new Promise((r) => setTimeout(r, 30_000));
    } finally {
      await env.startApiServer();
    }
    await appliedIs(s, v2.checksum);
    const v3 = version('3');
    await put(s, v3);
    await appliedIs(s, v3.checksum);
    expect(await readFile(join(s.root, 'etc/app/app.conf'), 'utf8')).toBe('version 3\n');
    expect(s.logs.join('\n')).toMatch(/reconnecting|retrying/);
  }, 180_000);
});
