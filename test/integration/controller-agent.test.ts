// The whole chain on the real API server: the real controller renders an OSC into its reconcile
// Secret; the real agent — as its own least-privilege identity (deploy/agent-rbac.yaml) —
// follows that Secret into a directory root and reports in its OperatingSystemConfigNode, naming
// the OSC it follows; the controller counts the node in the OSC's status.nodes. An OSC change
// reaches the disk and the counts; a change the node cannot apply counts it as degraded until
// the obstacle is gone and the agent's retry converges.
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { memoryLogger } from '../../log/memory.js';
import { logReporter } from '../../agent/agent.js';
import { immediateAgent } from '../../agent/immediate.js';
import { followSecret } from '../../agent/follow-secret.js';
import { LocalSystemd } from '../../agent/systemd.js';
import { secretNameFor } from '../../api/secret.js';
import type { OperatingSystemConfigNode } from '../../api/schema.js';
import {
  Api,
  agentIdentity,
  demoSpec,
  grantAgent,
  spawnOscar,
  stopProcess,
  startController,
  waitFor,
} from './controller-support.js';
import {
  createTestNamespace,
  kubeConfigFor,
  kubeconfigPathFor,
  kubectl,
  skipWithoutCluster,
  uniqueName,
} from './support/cluster.js';

skipWithoutCluster();

const cleanups: (() => Promise<void>)[] = [];
const logs: string[][] = [];
const outputs: (() => string)[] = []; // of processes, read when a test failed
afterEach(async (ctx) => {
  for (const c of cleanups.splice(0).reverse()) await c();
  if (ctx.task.result?.state === 'fail') {
    process.stderr.write(logs.flat().join('') + outputs.map((o) => o()).join(''));
  }
  logs.length = 0;
  outputs.length = 0;
});

const NODES = '/apis/oscar.dev/v1alpha1/operatingsystemconfignodes';

/** A namespace with the controller running in it, and the agent's grants for one node there. */
async function chain(prefix: string) {
  // a short prefix: the agent identity's certificate CN (with namespace and node) must fit 64 bytes
  const ns = await createTestNamespace(prefix);
  const node = uniqueName('node');
  const osc = 'web';
  const secret = secretNameFor(osc, 'reconcile');
  const api = new Api();
  cleanups.push(await grantAgent(api, ns, node, osc));
  const controller = await startController([ns]);
  cleanups.push(controller.stop);
  logs.push(controller.logs);
  return { ns, node, osc, secret, api };
}

async function nodeStatus(api: Api, node: string): Promise<OperatingSystemConfigNode['status']> {
  return (await api.http.request<OperatingSystemConfigNode>('GET', `${NODES}/${node}`)).status;
}

/** The node's status once it reports `checksum` applied (a missing object is waited for). */
function nodeAppliedIs(api: Api, node: string, checksum: string) {
  return waitFor(`oscnode ${node} applied ${checksum.slice(0, 12)}`, async () => {
    const st = await nodeStatus(api, node);
    return st?.appliedChecksum === checksum ? st : undefined;
  });
}

describe('controller and agent (real API server)', () => {
  it('an OSC change reaches the node, its report and the OSC status.nodes', async () => {
    const { ns, node, osc, secret, api } = await chain('chain');
    await api.applyOsc(ns, osc, demoSpec('reconcile', 'v1\n'));
    const v1 = await api.waitReady(ns, osc);
    expect(v1.status?.nodes).toEqual({ total: 0, updated: 0, degraded: 0, drifted: 0 });

    // The agent, wired by the same followSecret as `oscar agent --secret`.
    const kc = await kubeConfigFor(agentIdentity(ns, node));
    const root = await mkdtemp(join(tmpdir(), 'oscar-chain-'));
    const stateDir = join(root, 'var/lib/oscar');
    await mkdir(stateDir, { recursive: true });
    const { log, lines: agentLogs } = memoryLogger('agent');
    logs.push(agentLogs);
    const { source, reporter } = followSecret(kc, {
      namespace: ns,
      secret,
      node,
      pollIntervalMs: 60_000,
      log,
      backoffMaxMs: 2_000,
    });
    const agent = immediateAgent({
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
      retryMaxMs: 2_000,
    });
    cleanups.push(async () => {
      await agent.stop();
      reporter.stop();
      await rm(root, { recursive: true, force: true });
    });
    await agent.start();

    const nodeApplied = (checksum: string) => nodeAppliedIs(api, node, checksum);
    const nodesCount = (checksum: string, want: { updated: number; degraded: number }) =>
      waitFor(`${ns}/${osc} status.nodes ${JSON.stringify(want)}`, async () => {
        const o = await api.getOsc(ns, osc);
        const n = o?.status?.nodes;
        return o?.status?.checksum === checksum &&
          n?.total === 1 &&
          n.updated === want.updated &&
          n.degraded === want.degraded
          ? o
          : undefined;
      });
    const appConf = (): Promise<string> => readFile(join(root, 'etc/demo/app.conf'), 'utf8');

    // First apply: the file on disk, the report names the OSC, the OSC counts the node.
    const c1 = v1.status?.checksum ?? '';
    expect(c1).toMatch(/^[0-9a-f]{64}$/);
    const st1 = await nodeApplied(c1);
    expect(st1.oscRef).toEqual({ namespace: ns, name: osc, secretName: secret });
    expect(await appConf()).toBe('v1\n');
    await nodesCount(c1, { updated: 1, degraded: 0 });

    // The OSC changes: the controller re-renders, the agent applies it in place (the unit that
    // lists the file is restarted), the report carries the new checksum, the counts follow.
    await api.applyOsc(ns, osc, demoSpec('reconcile', 'v2\n'));
    const v2 = await api.waitReady(ns, osc);
    const c2 = v2.status?.checksum ?? '';
    expect(c2).not.toBe(c1);
    const st2 = await nodeApplied(c2);
    expect(await appConf()).toBe('v2\n');
    expect(st2.restartedUnits?.map((u) => `${u.action} ${u.name}`)).toEqual([
      'restart demo.service',
    ]);
    expect(st2.conditions?.find((c) => c.type === 'Degraded')?.status).toBe('False');
    const after = await nodesCount(c2, { updated: 1, degraded: 0 });
    expect(after.status?.nodes).toEqual({ total: 1, updated: 1, degraded: 0, drifted: 0 });

    // A change this node cannot apply (a directory sits where a new file must go): the node
    // reports Degraded and keeps v2 as applied; the OSC counts it degraded and not updated.
    const obstacle = join(root, 'etc/demo/extra.conf');
    await mkdir(obstacle, { recursive: true });
    await writeFile(join(obstacle, 'not-oscars'), 'x');
    const v3spec = demoSpec('reconcile', 'v3\n');
    v3spec.files?.push({ path: '/etc/demo/extra.conf', content: { inline: { data: 'extra\n' } } });
    await api.applyOsc(ns, osc, v3spec);
    const c3 = (await api.waitReady(ns, osc)).status?.checksum ?? '';
    expect(c3).not.toBe(c2);
    await nodesCount(c3, { updated: 0, degraded: 1 });
    const failed = await nodeStatus(api, node);
    expect(failed?.appliedChecksum).toBe(c2);
    expect(failed?.conditions?.find((c) => c.type === 'Degraded')).toMatchObject({
      status: 'True',
      reason: 'ApplyFailed',
    });
    expect(failed?.lastError?.message).toContain('extra.conf');

    // The obstacle goes; the agent's retry applies v3: updated, healthy, counted.
    await rm(obstacle, { recursive: true });
    await nodeApplied(c3);
    expect(await appConf()).toBe('v3\n');
    expect(await readFile(join(root, 'etc/demo/extra.conf'), 'utf8')).toBe('extra\n');
    await nodesCount(c3, { updated: 1, degraded: 0 });
  });

  it('`oscar agent --secret` as its own process applies the Secret and names its OSC', async () => {
    const { ns, node, osc, secret, api } = await chain('cli');
    await api.applyOsc(ns, osc, demoSpec('reconcile', 'cli\n'));
    const checksum = (await api.waitReady(ns, osc)).status?.checksum ?? '';

    const root = await mkdtemp(join(tmpdir(), 'oscar-chain-cli-'));
    const agent = spawnOscar('agent', [
      '--kubeconfig',
      await kubeconfigPathFor(agentIdentity(ns, node)),
      '--namespace',
      ns,
      '--secret',
      secret,
      '--node',
      node,
      '--root',
      root,
    ]);
    cleanups.push(async () => {
      await stopProcess(agent);
      await rm(root, { recursive: true, force: true });
    });
    outputs.push(agent.output);
    const st = await nodeAppliedIs(api, node, checksum);
    expect(st.oscRef, agent.output()).toEqual({ namespace: ns, name: osc, secretName: secret });
    expect(await readFile(join(root, 'etc/demo/app.conf'), 'utf8')).toBe('cli\n');
    // The OSC counts the node as updated: the controller found it by the name the agent reported.
    const counted = await waitFor(`${ns}/${osc} status.nodes`, async () => {
      const o = await api.getOsc(ns, osc);
      return o?.status?.nodes?.updated === 1 ? o.status.nodes : undefined;
    });
    expect(counted).toEqual({ total: 1, updated: 1, degraded: 0, drifted: 0 });

    // What an operator sees: the rollout counts and short checksums in kubectl's columns.
    const columns = async (args: string[]): Promise<Record<string, string>> => {
      const r = await kubectl(['get', ...args]);
      expect(r.code, r.stderr).toBe(0);
      // kubectl aligns each column under its header, and leaves a cell blank when the field is
      // unset (ROLLOUT, for an OSC no grant-mode node follows): cut the row at the headers' offsets.
      const [head = '', row = ''] = r.stdout.trimEnd().split('\n');
      const starts = [...head.matchAll(/\S+/g)].map((m) => ({ name: m[0], at: m.index }));
      return Object.fromEntries(
        starts.map((c, i) => [c.name, row.slice(c.at, starts[i + 1]?.at ?? row.length).trim()]),
      );
    };
    const short = checksum.slice(0, 12);
    expect(await columns(['osc', '-n', ns, osc])).toMatchObject({
      NAME: osc,
      TYPE: 'ubuntu',
      PURPOSE: 'reconcile',
      CHECKSUM: short,
      READY: 'True',
      NODES: '1',
      UPDATED: '1',
      DEGRADED: '0',
      DRIFTED: '0',
    });
    expect(await columns(['osc', '-n', ns, osc, '-o', 'wide'])).toMatchObject({
      REASON: 'Rendered',
      FORMAT: 'cloud-config',
      SECRET: secret,
    });
    expect(await columns(['oscnode', node])).toMatchObject({
      NAME: node,
      OSC: osc,
      DESIRED: short,
      APPLIED: short,
      DEGRADED: 'False',
      DRIFTED: 'False',
    });
    expect(await columns(['oscnode', node, '-o', 'wide'])).toMatchObject({
      NAMESPACE: ns,
      REASON: 'Applied',
      SECRET: secret,
    });

    // Someone edits the file on the node: the agent (drift detection on by default) reports
    // Drifted=True, and the OSC counts the node as drifted; put back by hand, it counts 0 again.
    const drifted = (n: number) =>
      waitFor(`${ns}/${osc} status.nodes.drifted ${String(n)}`, async () => {
        const o = await api.getOsc(ns, osc);
        return o?.status?.nodes?.drifted === n ? o.status.nodes : undefined;
      });
    await writeFile(join(root, 'etc/demo/app.conf'), 'edited by hand\n');
    expect(await drifted(1)).toEqual({ total: 1, updated: 1, degraded: 0, drifted: 1 });
    expect((await nodeStatus(api, node))?.drift?.items?.[0]?.path).toBe('/etc/demo/app.conf');
    expect(await columns(['osc', '-n', ns, osc])).toMatchObject({ DRIFTED: '1' });
    expect(await columns(['oscnode', node])).toMatchObject({ DRIFTED: 'True' });
    await writeFile(join(root, 'etc/demo/app.conf'), 'cli\n');
    await drifted(0);
  });
});
