// From a blank machine to a self-updating node, on real parts (docs/identity.md, "Proof"): the
// cached Debian root, with no Node.js and no oscar file in it, boots in systemd-nspawn with
// cloud-init's NoCloud seed = the `value` of its OscarConfig's Secret. Real cloud-init runs it:
// the agent's single executable is downloaded from a loopback HTTP server the test starts,
// checked against its sha256 and started; it trades the machine's bootstrap token for its own
// certificate (the approver in the real controller, in this process; kube-controller-manager's
// signer), follows its reconcile OSC in grant mode (the rollout controller, in this process,
// grants the joining node the OSC's first revision at once) and reports Applied=True with the
// OSC's checksum. A change of the OSC arrives as a grant in try mode (a short soak) and restarts
// only the unit it changes; a reboot brings the agent back on its stored
// certificate (the token is gone) without applying anything again. A second machine whose user
// data names a wrong sha256 never installs the agent, and says why on its console and journal.
// The node shares the host's network (the API server and the HTTP server are on loopback).
import { X509Certificate } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OperatingSystemConfigSpec } from '../../api/schema.js';
import { AGENT_MALLOC_ENV } from '../../controller/bootstrap/additions.js';
import { type ControllerHandle } from '../../controller/main.js';
import { buildAgent, type BuiltAgent } from '../../hack/agent/build.js';
import { runBootstrapController, serveAgent, type AgentServer } from '../support/agent-server.js';
import { bootNode, persistentRoot, type Node } from '../support/nspawn.js';
import { clusterOrSkip, kubeOps, type Cluster } from '../support/cluster.js';
import { nodeRoot, nodeSuiteGate, repoRoot } from '../support/tools.js';
import { waitFor } from '../support/wait.js';

const OSCS = (ns: string): string =>
  `/apis/oscar.dev/v1alpha1/namespaces/${ns}/operatingsystemconfigs`;
const NODES = '/apis/oscar.dev/v1alpha1/operatingsystemconfignodes';
/** Long enough for a machine that works (p50 5 s to its certificate), short for one that fails. */
const IDENTITY_WAIT_MS = 40_000;

let skipReason: string | undefined;
let cluster: Cluster | undefined;
let controller: ControllerHandle | undefined;
let server: AgentServer | undefined;
let agent: BuiltAgent | undefined;
let agentUrl = '';
let ns = '';
const disks: { cleanup: () => Promise<void> }[] = [];
const nodes: Node[] = [];

const { get, apply } = kubeOps(() => {
  if (!cluster) throw new Error('no API server');
  return cluster.api;
});

const unit = (name: string, conf: string): string => `[Unit]
Description=${name}: reads ${conf}
[Service]
ExecStart=/bin/sh -c 'cat ${conf}; exec sleep infinity'
[Install]
WantedBy=multi-user.target
`;

function reconcileSpec(a: string, b: string): OperatingSystemConfigSpec {
  return {
    type: 'debian',
    purpose: 'reconcile',
    // the agent runs in grant mode: a change is applied in try mode and soaks before it is
    // confirmed (60 s by default); a short soak keeps the suite fast
    rollout: { soakSeconds: 2 },
    files: [
      { path: '/etc/app/a.conf', content: { inline: { data: a } } },
      { path: '/etc/app/b.conf', content: { inline: { data: b } } },
    ],
    units: [
      {
        name: 'app-a.service',
        filePaths: ['/etc/app/a.conf'],
        content: unit('a', '/etc/app/a.conf'),
      },
      {
        name: 'app-b.service',
        filePaths: ['/etc/app/b.conf'],
        content: unit('b', '/etc/app/b.conf'),
      },
    ],
  };
}

async function applyOsc(name: string, spec: OperatingSystemConfigSpec): Promise<void> {
  await apply(`${OSCS(ns)}/${name}`, {
    apiVersion: 'oscar.dev/v1alpha1',
    kind: 'OperatingSystemConfig',
    metadata: { name, namespace: ns },
    spec,
  });
}

async function userData(
  machine: string,
  agentOverride?: { url: string; sha256: string },
): Promise<string> {
  await apply(`/apis/bootstrap.oscar.dev/v1alpha1/namespaces/${ns}/oscarconfigs/${machine}`, {
    apiVersion: 'bootstrap.oscar.dev/v1alpha1',
    kind: 'OscarConfig',
    metadata: { name: machine, namespace: ns },
    spec: {
      provisionRef: { name: 'prov' },
      reconcileRef: { name: 'rec' },
      ...(agentOverride ? { agent: agentOverride } : {}),
    },
  });
  const secret = await waitFor(
    `user data of ${machine}`,
    () => get<{ data?: { value?: string } }>(`/api/v1/namespaces/${ns}/secrets/${machine}`),
    { timeoutMs: 60_000, intervalMs: 500 },
  );
  return Buffer.from(secret.data?.value ?? '', 'base64').toString('utf8');
}

async function boot(name: string, root: string, seed: string): Promise<Node> {
  const node = await bootNode({ root, name, volatile: false, seed: { userData: seed } });
  nodes.push(node);
  return node;
}

interface NodeReport {
  status?: {
    appliedChecksum?: string;
    source?: string;
    revision?: { checksum?: string; phase?: string };
    conditions?: { type: string; status: string }[];
  };
}

async function appliedWith(machine: string, checksum: string, node: Node, timeoutMs = 240_000) {
  return waitFor(
    `${machine} Applied=True with ${checksum.slice(0, 12)}`,
    async () => {
      const r = await get<NodeReport>(`${NODES}/${machine}`);
      const applied = r?.status?.conditions?.find((c) => c.type === 'Applied');
      return applied?.status === 'True' && r?.status?.appliedChecksum === checksum ? r : undefined;
    },
    {
      timeoutMs,
      intervalMs: 500,
      onTimeout: async () =>
        [
          '--- oscar-agent-install.service',
          (await node.journal('oscar-agent-install.service')).split('\n').slice(-20).join('\n'),
          '--- oscar-agent.service',
          (await node.journal('oscar-agent.service')).split('\n').slice(-40).join('\n'),
          '--- cloud-init',
          (await node.journal('cloud-final.service')).split('\n').slice(-20).join('\n'),
        ].join('\n'),
    },
  );
}

/** The node's try of the revision ended: it stayed healthy for the soak and confirmed it. */
async function confirmedWith(machine: string, checksum: string, node: Node) {
  return waitFor(
    `${machine} confirmed ${checksum.slice(0, 12)}`,
    async () => {
      const r = await get<NodeReport>(`${NODES}/${machine}`);
      return r?.status?.revision?.checksum === checksum && r.status.revision.phase === 'Confirmed'
        ? r
        : undefined;
    },
    {
      timeoutMs: 60_000,
      intervalMs: 500,
      onTimeout: async () =>
        (await node.journal('oscar-agent.service')).split('\n').slice(-40).join('\n'),
    },
  );
}

async function oscChecksum(name: string, previous?: string): Promise<string> {
  return waitFor(
    `${name} rendered`,
    async () => {
      const o = await get<{ status?: { checksum?: string } }>(`${OSCS(ns)}/${name}`);
      const c = o?.status?.checksum;
      return c && c !== previous ? c : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 500 },
  );
}

beforeAll(async () => {
  const gate = nodeSuiteGate(['systemd-nspawn', 'nsenter', 'pgrep', 'mount']);
  if (gate.skip !== undefined) {
    skipReason = gate.skip;
    return;
  }
  const attached = await clusterOrSkip();
  if ('skip' in attached) {
    skipReason = attached.skip;
    return;
  }
  cluster = attached.cluster;
  const applied = await cluster.kubectl(['apply', '-k', join(repoRoot, 'deploy', 'identity')]);
  if (applied.code !== 0) throw new Error(applied.stderr);
  // the agent as machines get it: one executable, served over loopback HTTP
  agent = await buildAgent({ log: (m) => process.stderr.write(`[build:agent] ${m}\n`) });
  server = await serveAgent(agent.path);
  agentUrl = server.url;
  ns = `e2e-bn-${process.pid.toString(36)}`;
  await apply(`/api/v1/namespaces/${ns}`, {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: ns },
  });
  await applyOsc('prov', { type: 'debian', purpose: 'provision' });
  await applyOsc('rec', reconcileSpec('a1\n', 'b1\n'));
  controller = await runBootstrapController({
    env: cluster.env,
    namespace: ns,
    agentUrl,
    agentSha256: agent.sha256,
    identityWaitMs: IDENTITY_WAIT_MS,
  });
}, 900_000);

afterAll(async () => {
  for (const n of nodes) await n.stop().catch(() => undefined);
  for (const d of disks) await d.cleanup().catch(() => undefined);
  await controller?.stop();
  await server?.close();
  if (ns) await cluster?.kubectl(['delete', 'namespace', ns, '--wait=false']);
  await cluster?.stop();
}, 120_000);

describe('a blank machine bootstraps itself into a node that follows its OSC', () => {
  it('boots, installs the agent, gets its identity, applies, updates in place, survives a reboot', async (ctx) => {
    if (skipReason) {
      ctx.skip(skipReason);
      return;
    }
    const lower = nodeRoot() ?? '';
    // the root has no Node.js and no oscar file
    for (const p of ['usr/bin/node', 'usr/local/bin/node', 'opt/oscar', 'etc/oscar']) {
      await expect(stat(join(lower, p))).rejects.toThrow();
    }
    const machine = `bn-${process.pid.toString(36)}`;
    const seed = await userData(machine);
    const disk = await persistentRoot(lower);
    disks.push(disk);
    const t0 = Date.now();
    let node = await boot(machine, disk.root, seed);
    const checksum1 = await oscChecksum('rec');
    const first = await appliedWith(machine, checksum1, node);
    process.stderr.write(`[e2e] boot → Applied=True: ${String(Date.now() - t0)} ms\n`);
    // grant mode: the node takes part in rollouts (Cluster API's in-place update grants it too)
    expect(first.status?.source).toBe('Grant');
    expect(
      await readFile(node.hostPath('/etc/systemd/system/oscar-agent.service'), 'utf8'),
    ).toContain(` --namespace ${ns} --osc rec --node ${machine} --config-uid `);

    // its identity: the token is gone, the config says so, the agent runs on its certificate
    const config = await get<{
      status?: {
        bootstrapTokenID?: string;
        conditions?: { type: string; status: string; reason: string }[];
      };
    }>(`/apis/bootstrap.oscar.dev/v1alpha1/namespaces/${ns}/oscarconfigs/${machine}`);
    expect(
      config?.status?.conditions?.find((c) => c.type === 'BootstrapTokenAvailable'),
    ).toMatchObject({
      status: 'False',
      reason: 'IdentityIssued',
    });
    expect(config?.status?.conditions?.find((c) => c.type === 'NodeIdentity')).toMatchObject({
      status: 'True',
    });
    expect(
      await get(
        `/api/v1/namespaces/kube-system/secrets/bootstrap-token-${config?.status?.bootstrapTokenID ?? ''}`,
      ),
    ).toBeUndefined();
    const pem = await readFile(node.hostPath('/var/lib/oscar/pki/node.pem'), 'utf8');
    expect(pem).toContain('BEGIN CERTIFICATE');
    expect((await stat(node.hostPath('/var/lib/oscar/pki/node.pem'))).mode & 0o777).toBe(0o600);
    expect(await readFile(node.hostPath('/etc/app/a.conf'), 'utf8')).toBe('a1\n');

    // a certificate renewal under the running agent (what its timer does at 70-90 % of the
    // certificate's life; the API server's shortest certificate lives 10 minutes, so the test asks
    // for it with systemctl reload): a new certificate, the same agent process, no unit restarted,
    // and the change below still arrives through its watch
    const serialOf = async (): Promise<string> =>
      new X509Certificate(await readFile(node.hostPath('/var/lib/oscar/pki/node.pem')))
        .serialNumber;
    const serial1 = await serialOf();
    const agentPid = (await node.show('oscar-agent.service', ['MainPID'])).MainPID;
    // the unit's malloc settings reach the agent's process (glibc reads them when it starts)
    const environ = await node.exec(['cat', `/proc/${String(agentPid)}/environ`]);
    expect(environ.stdout.split('\0')).toEqual(
      expect.arrayContaining(Object.entries(AGENT_MALLOC_ENV).map(([k, v]) => `${k}=${v}`)),
    );
    const appPids = await node.show('app-a.service', ['MainPID']);
    const reload = await node.exec(['systemctl', 'reload', 'oscar-agent.service']);
    expect(reload.code, reload.stderr).toBe(0);
    await waitFor(
      'a renewed node certificate',
      async () => ((await serialOf()) !== serial1 ? true : undefined),
      { timeoutMs: 60_000, intervalMs: 500, onTimeout: () => node.journal('oscar-agent.service') },
    );
    expect((await node.show('oscar-agent.service', ['MainPID'])).MainPID).toBe(agentPid);
    expect(await node.show('app-a.service', ['MainPID'])).toEqual(appPids);
    expect(await node.journal('oscar-agent.service')).toMatch(/renewed the node certificate/);

    // a change is applied in place: only the unit whose file changed restarts
    const pidA = (await node.show('app-a.service', ['MainPID'])).MainPID;
    const pidB = (await node.show('app-b.service', ['MainPID'])).MainPID;
    await applyOsc('rec', reconcileSpec('a2\n', 'b1\n'));
    const checksum2 = await oscChecksum('rec', checksum1);
    await appliedWith(machine, checksum2, node, 120_000);
    expect(await readFile(node.hostPath('/etc/app/a.conf'), 'utf8')).toBe('a2\n');
    expect((await node.show('app-a.service', ['MainPID'])).MainPID).not.toBe(pidA);
    expect((await node.show('app-b.service', ['MainPID'])).MainPID).toBe(pidB);
    // the change came as a grant in try mode: the node confirms it after the soak (a reboot
    // before that would revert it, as try mode must)
    await confirmedWith(machine, checksum2, node);
    expect((await node.show('app-a.service', ['MainPID'])).MainPID).not.toBe(pidA);
    expect((await node.show('app-b.service', ['MainPID'])).MainPID).toBe(pidB);

    // reboot: the agent comes back on its stored certificate and applies nothing
    const mtime = (await stat(node.hostPath('/etc/app/a.conf'))).mtimeMs;
    await node.stop();
    node = await boot(machine, disk.root, seed);
    await node.waitRunning(120_000).catch(() => 'degraded');
    // (the node's journal is per boot: what follows is this boot's agent only)
    const afterReboot = await waitFor(
      'the agent to restore its state after the reboot',
      async () => {
        const j = await node.journal('oscar-agent.service');
        return /using the stored node certificate[\s\S]*restored from the state directory[\s\S]*"msg":"granted"/.test(
          j,
        )
          ? j
          : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 500, onTimeout: () => node.journal('oscar-agent.service') },
    );
    expect(afterReboot).not.toMatch(/requested a node certificate|bootstrap token/);
    // the confirmed revision is granted again: nothing to do (no action, no revert)
    await appliedWith(machine, checksum2, node, 60_000);
    const journal = await node.journal('oscar-agent.service');
    expect(journal).not.toMatch(/"actions":[1-9]|reverting/);
    expect((await stat(node.hostPath('/etc/app/a.conf'))).mtimeMs).toBe(mtime);
  }, 900_000);

  it('a machine whose user data names a wrong sha256 never runs the agent, and says why', async (ctx) => {
    if (skipReason) {
      ctx.skip(skipReason);
      return;
    }
    const machine = `bad-${process.pid.toString(36)}`;
    const seed = await userData(machine, { url: agentUrl, sha256: '0'.repeat(64) });
    const disk = await persistentRoot(nodeRoot() ?? '');
    disks.push(disk);
    const node = await boot(machine, disk.root, seed);
    const journal = await waitFor(
      'the install unit to refuse the download',
      async () => {
        const j = await node.journal('oscar-agent-install.service');
        return /is not sha256/.test(j) ? j : undefined;
      },
      {
        timeoutMs: 240_000,
        intervalMs: 500,
        onTimeout: () => node.journal('oscar-agent-install.service'),
      },
    );
    expect(journal).toContain(`${agentUrl} is not sha256 ${'0'.repeat(64)}`);
    await expect(stat(node.hostPath('/opt/oscar/bin/oscar-agent'))).rejects.toThrow();
    await expect(stat(node.hostPath('/opt/oscar/bin/oscar-agent.new'))).rejects.toThrow();
    expect(await get(`${NODES}/${machine}`)).toBeUndefined();
    // …and the cluster says so: the config's NodeIdentity=False and a Warning Event
    const config = `/apis/bootstrap.oscar.dev/v1alpha1/namespaces/${ns}/oscarconfigs/${machine}`;
    const said = await waitFor(
      'NodeIdentity=False on the config',
      async () => {
        const c = await get<{
          status?: {
            conditions?: { type: string; status: string; reason: string; message: string }[];
          };
        }>(config);
        return c?.status?.conditions?.find(
          (x) => x.type === 'NodeIdentity' && x.status === 'False',
        );
      },
      { timeoutMs: IDENTITY_WAIT_MS + 60_000, intervalMs: 500 },
    );
    expect(said.reason).toBe('NotRequested');
    const events = await get<{ items: { reason: string; involvedObject: { name: string } }[] }>(
      `/api/v1/namespaces/${ns}/events`,
    );
    expect(
      events?.items.some(
        (e) => e.reason === 'IdentityNotRequested' && e.involvedObject.name === machine,
      ),
    ).toBe(true);
  }, 600_000);
});
