// Drift reported through the real API server: the agent (in process, on a directory root) follows
// its Secret as its own least-privilege identity (deploy/agent-rbac.yaml), a file it applied is
// changed by hand, and its OperatingSystemConfigNode says Drifted=True naming the path with the
// expected and found hashes; an Event regarding the OSC is created under that RBAC; with
// driftPolicy Revert the file is put back and the report says Reverted.
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import type { DriftPolicy } from '../../api/constants.js';
import type { OperatingSystemConfigNode } from '../../api/schema.js';
import { memoryLogger } from '../../log/memory.js';
import { type Agent, logReporter } from '../../agent/agent.js';
import { immediateAgent } from '../../agent/immediate.js';
import { DriftMonitor } from '../../agent/drift/monitor.js';
import { followSecret } from '../../agent/follow-secret.js';
import { LocalSystemd } from '../../agent/systemd.js';
import { config, desiredOf, file, unit } from '../../agent/testing/fixtures.js';
import { HttpKubeClient } from '../../kube/client.js';
import {
  adminKubeConfig,
  createTestNamespace,
  kubeConfigFor,
  kubectl,
  skipWithoutCluster,
  uniqueName,
} from './support/cluster.js';
import { waitFor } from '../support/wait.js';
import { agentIdentity, agentRbacManifest } from '../support/agent-identity.js';
import { putReconcileSecret } from '../support/reconcile-secret.js';

skipWithoutCluster();

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const SECRET = 'oscar-w-reconcile';
const OSC = 'workers';

function version(n: string, policy?: DriftPolicy) {
  const c = config(
    [unit('app.service', { filePaths: ['/etc/app/app.conf'] })],
    [file('/etc/app/app.conf', `version ${n}\n`)],
  );
  return desiredOf(policy ? { ...c, driftPolicy: policy } : c);
}

async function setup() {
  const ns = await createTestNamespace('drift');
  const node = uniqueName('node');
  const rbac = await agentRbacManifest({ node, namespace: ns, osc: 'w' }); // SECRET is w's
  const applied = await kubectl(['apply', '-f', '-'], { input: rbac });
  expect(applied.code, applied.stderr).toBe(0);
  const kc: KubeConfig = await kubeConfigFor(agentIdentity(ns, node));
  const admin = new HttpKubeClient(adminKubeConfig());
  cleanups.push(() => {
    admin.close();
    return Promise.resolve();
  });
  const put = async (d: ReturnType<typeof version>): Promise<void> => {
    await putReconcileSecret(admin, { namespace: ns, name: SECRET, osc: OSC }, d);
  };
  const status = async (): Promise<OperatingSystemConfigNode['status']> =>
    (
      await admin.request<OperatingSystemConfigNode>(
        'GET',
        `/apis/oscar.dev/v1alpha1/operatingsystemconfignodes/${node}`,
      )
    ).status;
  const events = async (): Promise<{ reason: string; note: string; regarding: unknown }[]> =>
    (
      await admin.request<{ items: { reason: string; note: string; regarding: unknown }[] }>(
        'GET',
        `/apis/events.k8s.io/v1/namespaces/${ns}/events`,
      )
    ).items;

  const root = await mkdtemp(join(tmpdir(), 'oscar-drift-it-'));
  const stateDir = join(root, 'var/lib/oscar');
  await mkdir(stateDir, { recursive: true });
  cleanups.push(() => rm(root, { recursive: true, force: true }));
  const { log, lines: logs } = memoryLogger('agent');
  const { source, reporter } = followSecret(kc, {
    namespace: ns,
    secret: SECRET,
    node,
    pollIntervalMs: 60_000,
    log,
  });
  const reporters = [logReporter(log), reporter];
  const late: { agent?: Agent } = {};
  const drift = new DriftMonitor({
    root,
    owners: false,
    auditIntervalMs: 0,
    report: (r) => {
      for (const x of reporters) x.drift?.(r);
    },
    requestRevert: () => late.agent?.revert(),
    log,
  });
  const agent = immediateAgent({
    source,
    deps: {
      root,
      stateDir,
      systemd: new LocalSystemd(root, join(stateDir, 'would-run.log')),
      owners: false,
    },
    reporters,
    log,
    drift,
  });
  late.agent = agent;
  cleanups.push(async () => {
    await agent.stop();
    reporter.stop();
  });
  return { ns, node, root, stateDir, agent, put, status, events, logs };
}

type Setup = Awaited<ReturnType<typeof setup>>;

const appliedIs = (s: Setup, checksum: string) =>
  waitFor(`appliedChecksum ${checksum.slice(0, 12)}`, async () => {
    const st = await s.status();
    return st?.appliedChecksum === checksum ? st : undefined;
  });

const drifted = (s: Setup, want: 'True' | 'False', reason?: string) =>
  waitFor(`Drifted=${want}${reason ? ` (${reason})` : ''}`, async () => {
    const st = await s.status();
    const c = st?.conditions?.find((x) => x.type === 'Drifted');
    return c?.status === want && (reason === undefined || c.reason === reason) ? st : undefined;
  });

describe('drift, reported through the real API server', () => {
  it('Report: Drifted=True names the path with expected and found hashes; an Event regarding the OSC; restored by hand: NoDrift', async () => {
    const s = await setup();
    const v1 = version('1');
    await s.put(v1);
    await s.agent.start();
    await appliedIs(s, v1.checksum);
    const clean = await drifted(s, 'False', 'NoDrift');
    expect(clean.drift).toEqual({ count: 0, items: [] });

    await writeFile(join(s.root, 'etc/app/app.conf'), 'edited by hand\n');
    const st = await drifted(s, 'True', 'DriftDetected');
    expect(st.drift?.count).toBe(1);
    expect(st.drift?.items?.[0]).toMatchObject({
      path: '/etc/app/app.conf',
      reason: 'content',
      policy: 'Report',
      expected: expect.stringMatching(/^sha256:[0-9a-f]{12} 0644 root:root$/) as string,
      found: expect.stringMatching(/^sha256:[0-9a-f]{12} 0644 /) as string,
    });
    const condition = st.conditions?.find((c) => c.type === 'Drifted');
    expect(condition?.message).toContain('/etc/app/app.conf: content (expected sha256:');
    // the Event, created by the agent's own identity, regards the OSC it follows
    const event = await waitFor(`a DriftDetected Event (${s.logs.join('\n')})`, async () =>
      (await s.events()).find((e) => e.reason === 'DriftDetected'),
    );
    expect(event.regarding).toMatchObject({
      apiVersion: 'oscar.dev/v1alpha1',
      kind: 'OperatingSystemConfig',
      namespace: s.ns,
      name: OSC,
    });
    expect(event.note).toContain('/etc/app/app.conf');
    // Report changes nothing on the node
    expect(await readFile(join(s.root, 'etc/app/app.conf'), 'utf8')).toBe('edited by hand\n');

    await writeFile(join(s.root, 'etc/app/app.conf'), 'version 1\n');
    const back = await drifted(s, 'False', 'NoDrift');
    expect(back.drift).toEqual({ count: 0, items: [] });
    expect(s.logs.join('\n')).not.toMatch(/drift Event not sent/);
  });

  it('Revert: the file is put back, the unit listing it restarted, the report says Reverted with a DriftReverted Event', async () => {
    const s = await setup();
    const v1 = version('1', 'Revert');
    await s.put(v1);
    await s.agent.start();
    await appliedIs(s, v1.checksum);
    await writeFile(join(s.root, 'etc/app/app.conf'), 'edited by hand\n');
    const st = await drifted(s, 'False', 'Reverted');
    expect(await readFile(join(s.root, 'etc/app/app.conf'), 'utf8')).toBe('version 1\n');
    expect(st.restartedUnits?.map((u) => `${u.action} ${u.name}`)).toEqual(['restart app.service']);
    const reasons = await waitFor('both Events', async () => {
      const r = (await s.events()).map((e) => e.reason).sort();
      return r.includes('DriftReverted') ? r : undefined;
    });
    expect(reasons).toEqual(['DriftDetected', 'DriftReverted']);
    expect(s.logs.join('\n')).not.toMatch(/drift Event not sent/);
  });
});
