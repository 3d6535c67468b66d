// Try mode on real systemd: a Debian node booted in systemd-nspawn, on a network of its own (two
// network namespaces the test makes, a veth pair, a forwarder to the test API server on the
// host's loopback; TLS verified end to end), runs `oscar agent --osc` as a systemd service. The
// real controller, in this process, rolls out revisions of an OSC to it. Each bad revision must be
// rolled back by the node itself:
// - one whose service fails its HTTP health check (files byte-identical afterwards, the unit
//   running the old version again);
// - one whose /etc/hosts sends the API server's name nowhere (the file restored byte for byte);
// - one whose unit blackholes the route to the API server;
// - one still unconfirmed when the machine reboots.
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import type {
  OperatingSystemConfigNode,
  OperatingSystemConfigSpec,
  RevisionReport,
  RolloutPolicy,
} from '../../api/schema.js';
import { runController, type ControllerHandle } from '../../controller/main.js';
import { createLogger } from '../../log/logger.js';
import { CONTENT_APPLY_PATCH, isNotFound, type HttpKubeClient } from '../../kube/client.js';
import { writeKubeconfigFor } from '../../hack/testenv/testenv.js';
import { nodeSuiteCluster, type Cluster } from '../support/cluster.js';
import { nodeNetwork, type NodeNetwork } from '../support/netns.js';
import {
  bootNode,
  nodeRuntimeBind,
  persistentRoot,
  readNodeFile,
  type Node,
} from '../support/nspawn.js';
import { repoRoot } from '../support/tools.js';
import { agentUser, applyAgentRbac } from '../support/agent-identity.js';
import { bundleCli } from '../support/bundle.js';
import { waitFor } from '../support/wait.js';

const API_NAME = 'apiserver.oscar.test';
const API_PORT = 6443;
const OSC = 'w';
const REPO_IN_NODE = '/opt/oscar';
const NODES = '/apis/oscar.dev/v1alpha1/operatingsystemconfignodes';

let skipReason: string | undefined;
let testCluster: Cluster | undefined;
let net: NodeNetwork | undefined;
let disk: { root: string; cleanup: () => Promise<void> } | undefined;
let node: Node | undefined;
let controller: ControllerHandle | undefined;
let nodeName: string;
let ns: string;
let bundleRel: string;
let configDir: string;

const appUnit = (dir: string): string => `[Unit]
Description=app: serves ${dir} on 127.0.0.1:8080
[Service]
ExecStart=/usr/bin/python3 -m http.server 8080 --bind 127.0.0.1 --directory ${dir}
[Install]
WantedBy=multi-user.target
`;

const policy = (over: RolloutPolicy = {}): RolloutPolicy => ({
  maxUnavailable: 1,
  soakSeconds: 3,
  progressDeadlineSeconds: 25,
  healthChecks: [
    {
      name: 'app',
      httpGet: { port: 8080, path: '/health' },
      periodSeconds: 1,
      timeoutSeconds: 2,
      failureThreshold: 3,
    },
  ],
  ...over,
});

interface Version {
  conf: string;
  appDir?: string;
  extraFiles?: OperatingSystemConfigSpec['files'];
  extraUnits?: OperatingSystemConfigSpec['units'];
  rollout?: RolloutPolicy;
}

function spec(v: Version): OperatingSystemConfigSpec {
  return {
    type: 'debian',
    purpose: 'reconcile',
    files: [
      { path: '/etc/app/health', content: { inline: { data: 'ok\n' } } },
      { path: '/etc/app/app.conf', permissions: '0640', content: { inline: { data: v.conf } } },
      ...(v.extraFiles ?? []),
    ],
    units: [
      {
        name: 'app.service',
        filePaths: ['/etc/app/app.conf'],
        content: appUnit(v.appDir ?? '/etc/app'),
      },
      ...(v.extraUnits ?? []),
    ],
    rollout: v.rollout ?? policy(),
  };
}

function api(): HttpKubeClient {
  if (!testCluster) throw new Error('no API server');
  return testCluster.api;
}

async function applyOsc(v: Version): Promise<void> {
  await api().request(
    'PATCH',
    `/apis/oscar.dev/v1alpha1/namespaces/${ns}/operatingsystemconfigs/${OSC}`,
    {
      query: { fieldManager: 'e2e', force: true },
      contentType: CONTENT_APPLY_PATCH,
      body: {
        apiVersion: 'oscar.dev/v1alpha1',
        kind: 'OperatingSystemConfig',
        metadata: { name: OSC, namespace: ns },
        spec: spec(v),
      },
    },
  );
}

async function report(): Promise<RevisionReport | undefined> {
  try {
    return (await api().request<OperatingSystemConfigNode>('GET', `${NODES}/${nodeName}`)).status
      ?.revision;
  } catch (error) {
    if (isNotFound(error)) return undefined;
    throw error;
  }
}

/** Waits for the node's answer to revision `number` to reach `phase`. */
async function answered(
  number: number,
  phase: string,
  timeoutMs = 120_000,
): Promise<RevisionReport> {
  let last: RevisionReport | undefined;
  return waitFor(
    `the node to report ${phase} for revision ${String(number)}`,
    async () => {
      last = (await report()) ?? last;
      return last?.number === number && last.phase === phase ? last : undefined;
    },
    {
      timeoutMs,
      intervalMs: 500,
      onTimeout: async () => {
        const journal = node ? await node.journal('oscar-agent.service') : '';
        return `last: ${JSON.stringify(last)}\n--- agent journal (tail)\n${journal.split('\n').slice(-60).join('\n')}`;
      },
    },
  );
}

/** The revision the OSC's current rendering got. */
async function renderedRevision(previous: number): Promise<number> {
  return waitFor(
    `a revision after ${String(previous)}`,
    async () => {
      const osc = await api().request<{ status?: { rollout?: { revision: number } } }>(
        'GET',
        `/apis/oscar.dev/v1alpha1/namespaces/${ns}/operatingsystemconfigs/${OSC}`,
      );
      const r = osc.status?.rollout?.revision;
      return r !== undefined && r > previous ? r : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 300 },
  );
}

async function sha(paths: string[]): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  if (!node) return out;
  for (const p of paths) {
    const bytes = await readFile(node.hostPath(p));
    out[p] = createHash('sha256').update(bytes).digest('hex');
  }
  return out;
}

async function appProcess(): Promise<string> {
  if (!node) return '';
  const { MainPID } = await node.show('app.service', ['MainPID']);
  return (await node.exec(['cat', `/proc/${MainPID ?? '0'}/cmdline`])).stdout.replaceAll('\0', ' ');
}

async function boot(): Promise<Node> {
  if (!disk || !net) throw new Error('no root or network');
  const n = await bootNode({
    root: disk.root,
    name: nodeName,
    volatile: false,
    disableCloudInit: true,
    networkNamespacePath: net.nodeNsPath,
    capabilities: ['CAP_NET_ADMIN'], // a node may change its own routes (its own namespace)
    binds: [
      { src: repoRoot, dst: REPO_IN_NODE },
      nodeRuntimeBind(),
      { src: configDir, dst: '/etc/oscar' },
    ],
  });
  await n.waitRunning();
  return n;
}

/**
 * The agent's least-privilege identity, and a kubeconfig (in configDir) that reaches the API
 * server by its name, through the node's own network.
 */
async function agentKubeconfig(cluster: Cluster): Promise<void> {
  await applyAgentRbac(cluster, { node: nodeName, namespace: ns, osc: OSC });
  const kcPath = await writeKubeconfigFor(cluster.env.info, {
    user: agentUser(ns, nodeName),
    groups: ['system:serviceaccounts', 'system:authenticated'],
  });
  const doc = parse(await readFile(kcPath, 'utf8')) as {
    clusters: { cluster: Record<string, string> }[];
  };
  const server = doc.clusters[0]?.cluster;
  if (!server) throw new Error('kubeconfig without a cluster');
  server.server = `https://${API_NAME}:${String(API_PORT)}`;
  server['tls-server-name'] = 'localhost'; // in the serving certificate; the name above is not
  configDir = await mkdtemp(join(tmpdir(), 'oscar-e2e-rollout-'));
  await writeFile(join(configDir, 'kubeconfig'), stringify(doc), { mode: 0o600 });
}

/** The node's network (the API server forwarded to API_PORT) and its persistent root. */
async function nodeNetworkAndDisk(lower: string, cluster: Cluster): Promise<NodeNetwork> {
  const made = await nodeNetwork(process.pid.toString(36), 40 + (process.pid % 200));
  net = made;
  await made.forward(API_PORT, Number(new URL(cluster.env.info.server).port));
  disk = await persistentRoot(lower);
  return made;
}

/** The agent in grant mode as a systemd service of the node, enabled and started. */
async function startAgentService(n: Node): Promise<void> {
  const agentUnit = `[Unit]
Description=oscar agent (grant mode)
[Service]
ExecStart=/usr/local/bin/node ${REPO_IN_NODE}/${bundleRel} agent --namespace ${ns} --osc ${OSC} --node ${nodeName} --kubeconfig /etc/oscar/kubeconfig --poll-interval 30
Restart=always
RestartSec=1
[Install]
WantedBy=multi-user.target
`;
  await writeFile(n.hostPath('/etc/systemd/system/oscar-agent.service'), agentUnit);
  await n.execOk(['systemctl', 'daemon-reload']);
  await n.execOk(['systemctl', 'enable', '--now', 'oscar-agent.service']);
}

beforeAll(async () => {
  const suite = await nodeSuiteCluster(['systemd-nspawn', 'nsenter', 'pgrep', 'ip', 'mount']);
  if ('skip' in suite) {
    skipReason = suite.skip;
    return;
  }
  testCluster = suite.cluster;
  ns = `e2e-ro-${process.pid.toString(36)}`; // short: the identity's CN holds at most 64 bytes
  await testCluster.api.request('POST', '/api/v1/namespaces', {
    body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } },
  });
  nodeName = `tryme-${process.pid.toString(36)}`;
  await agentKubeconfig(testCluster);
  bundleRel = await bundleCli(`oscar-rollout-${String(process.pid)}`);
  const { gatewayIp } = await nodeNetworkAndDisk(suite.root, testCluster);
  node = await boot();
  // the API server's name, as a node's resolver would know it
  await node.execOk(['sh', '-c', `echo '${gatewayIp} ${API_NAME}' >> /etc/hosts`]);
  await startAgentService(node);
  controller = await runController({
    kubeconfig: testCluster.env.kubeconfigPath,
    namespaces: [ns],
    metricsAddr: '0',
    leaderElect: false,
    leaseDurationMs: 15_000,
    log: createLogger({ component: 'controller', level: 'warn' }),
  });
}, 600_000);

afterAll(async () => {
  await controller?.stop();
  await node?.stop();
  await disk?.cleanup();
  await net?.cleanup();
  if (configDir) await rm(configDir, { recursive: true, force: true });
  if (bundleRel) await rm(join(repoRoot, bundleRel), { force: true });
  const admin = testCluster?.api;
  if (admin) {
    await admin.request('DELETE', `/api/v1/namespaces/${ns}`).catch(() => undefined);
    await admin.request('DELETE', `${NODES}/${nodeName}`).catch(() => undefined);
    admin.close();
  }
  await testCluster?.stop();
});

const v1: Version = { conf: 'version 1\n' };
const watched = [
  '/etc/app/health',
  '/etc/app/app.conf',
  '/etc/systemd/system/app.service',
  '/etc/hosts',
];
let revision = 0;
let before: Record<string, string> = {};

describe('try mode on real systemd (nspawn, a network of its own)', () => {
  it('revision 1 reaches the node through its own network and the gateway, and is confirmed', async (ctx) => {
    if (!node) return ctx.skip(skipReason);
    await applyOsc(v1);
    revision = await renderedRevision(0);
    await answered(revision, 'Confirmed');
    expect((await node.show('app.service', ['ActiveState'])).ActiveState).toBe('active');
    expect(await appProcess()).toContain('--directory /etc/app');
    expect(await readNodeFile(node, '/etc/app/app.conf')).toBe('version 1\n');
    before = await sha(watched);
  });

  it('grant mode watches for drift too: a hand edit is reported on the node object (Report), and clears when put back', async (ctx) => {
    if (!node) return ctx.skip(skipReason);
    const drifted = async (status: 'True' | 'False') => {
      let s: OperatingSystemConfigNode['status'];
      return waitFor(
        `Drifted=${status}`,
        async () => {
          s = (await api().request<OperatingSystemConfigNode>('GET', `${NODES}/${nodeName}`))
            .status;
          return s?.conditions?.find((c) => c.type === 'Drifted')?.status === status
            ? s
            : undefined;
        },
        { timeoutMs: 30_000, intervalMs: 200, onTimeout: () => `last: ${JSON.stringify(s)}` },
      );
    };
    await writeFile(node.hostPath('/etc/app/app.conf'), 'edited by hand\n');
    const s = await drifted('True');
    expect(s.drift?.items?.[0]).toMatchObject({
      path: '/etc/app/app.conf',
      reason: 'content',
      policy: 'Report',
    });
    expect(await readNodeFile(node, '/etc/app/app.conf')).toBe('edited by hand\n'); // Report
    await writeFile(node.hostPath('/etc/app/app.conf'), 'version 1\n');
    await drifted('False');
    expect(await sha(watched)).toEqual(before);
  });

  it('a service that fails its health check is rolled back within the deadline: same files, old version running', async (ctx) => {
    if (!node) return ctx.skip(skipReason);
    const t0 = Date.now();
    await applyOsc({
      conf: 'version 2\n',
      appDir: '/etc/app-v2',
      extraFiles: [
        { path: '/etc/app-v2/README', content: { inline: { data: 'no health here\n' } } },
      ],
    });
    revision = await renderedRevision(revision);
    const r = await answered(revision, 'RolledBack');
    expect(r.reason).toBe('HealthCheckFailed');
    expect(r.message).toMatch(
      /health check app: GET http:\/\/127.0.0.1:8080\/health: HTTP 404 \(3 times in a row\)/,
    );
    expect(Date.now() - t0).toBeLessThan(25_000 + 20_000);
    expect(await sha(watched)).toEqual(before);
    await expect(readFile(node.hostPath('/etc/app-v2/README'))).rejects.toThrow(/ENOENT/);
    expect((await node.show('app.service', ['ActiveState'])).ActiveState).toBe('active');
    expect(await appProcess()).toContain('--directory /etc/app');
    expect(
      (
        await node.exec([
          'python3',
          '-c',
          'import urllib.request;print(urllib.request.urlopen("http://127.0.0.1:8080/health").read().decode())',
        ])
      ).stdout,
    ).toBe('ok\n\n');
  });

  it('an /etc/hosts that loses the API server is rolled back: the node cannot confirm, restores the file byte for byte', async (ctx) => {
    if (!node) return ctx.skip(skipReason);
    await applyOsc({
      ...v1,
      extraFiles: [
        {
          path: '/etc/hosts',
          content: { inline: { data: `127.0.0.1 localhost\n192.0.2.1 ${API_NAME}\n` } },
        },
      ],
    });
    revision = await renderedRevision(revision);
    const r = await answered(revision, 'RolledBack', 180_000);
    expect(r.reason, r.message).toBe('APIUnreachable');
    expect(await sha(watched)).toEqual(before);
    expect(await readNodeFile(node, '/etc/hosts')).toContain(
      `${net?.gatewayIp ?? '?'} ${API_NAME}`,
    );
  });

  it('a unit that blackholes the route to the API server is rolled back: unit stopped, route gone', async (ctx) => {
    if (!node || !net) return ctx.skip(skipReason);
    const gw = net.gatewayIp;
    await applyOsc({
      ...v1,
      extraUnits: [
        {
          name: 'blackhole.service',
          content: `[Unit]\nDescription=route the API server nowhere\n[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/sbin/ip route add blackhole ${gw}/32\nExecStop=/sbin/ip route del blackhole ${gw}/32\n[Install]\nWantedBy=multi-user.target\n`,
        },
      ],
    });
    revision = await renderedRevision(revision);
    const r = await answered(revision, 'RolledBack', 180_000);
    expect(r.reason, `${r.message}\n${await node.journal('blackhole.service')}`).toBe(
      'APIUnreachable',
    );
    expect((await node.exec(['ip', 'route', 'show', 'type', 'blackhole'])).stdout.trim()).toBe('');
    expect((await node.show('blackhole.service', ['LoadState'])).LoadState).toBe('not-found');
    expect(await sha(watched)).toEqual(before);
  });

  it('a revision still unconfirmed when the machine reboots is reverted at boot', async (ctx) => {
    if (!node) return ctx.skip(skipReason);
    await applyOsc({
      conf: 'version 5\n',
      rollout: policy({ soakSeconds: 600, progressDeadlineSeconds: 900 }),
    });
    revision = await renderedRevision(revision);
    await answered(revision, 'Verifying');
    expect(await readNodeFile(node, '/etc/app/app.conf')).toBe('version 5\n');
    const t0 = Date.now();
    // reboot: the node halts, its /run is gone; the disk (and try.json on it) stays
    await node.stop();
    node = await boot();
    const r = await answered(revision, 'RolledBack', 120_000);
    console.log(`reboot → RolledBack in ${String(Date.now() - t0)} ms: ${r.message}`);
    expect(r.reason, r.message).toBe('Reboot');
    expect(await readNodeFile(node, '/etc/app/app.conf')).toBe('version 1\n');
    expect(await sha(watched)).toEqual(before);
    expect((await node.show('app.service', ['ActiveState'])).ActiveState).toBe('active');
  });
});
