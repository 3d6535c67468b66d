// Rollout at scale against the real test API server (hack/testenv): N simulated nodes in a few
// processes (hack/bench/rollout-fleet.ts: the real grant source, node reporter and try mode, each
// node with its own connections; the apply simulated as a fixed time into memory), the
// controller as it ships (dist/, its own process). After every node has revision 1, one change
// of the OSC is rolled out at maxUnavailable; printed:
//   total rollout time against the ideal (waves × (apply + soak));
//   grant → apply start p50/p99 (the grant's own timestamp to the agent starting the apply);
//   API requests and HTTP bytes (headers and bodies) per node per rollout (the agents' own; and everything the API
//   server served in the window, per node);
//   the API server's (and etcd's) CPU seconds per node update; the controller's CPU and peak RSS;
//   the OSC's status writes during the rollout (status.nodes and status.rollout together).
//
//   npm run build && flock /tmp/oscar-heavy.lock nice -n 10 npx node --import tsx hack/bench/rollout.ts \
//     [--nodes 2000] [--workers 4] [--max-unavailable 10%] [--apply-ms 2000] [--soak 10]
// Env: OSCAR_TESTENV_STATE attaches to a running test cluster instead of starting one.
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { access, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { scaledCount } from '../../api/rollout.js';
import type { OperatingSystemConfigSpec, RolloutStatus } from '../../api/schema.js';
import { attachCluster } from '../../test/support/cluster.js';
import { waitFor } from '../../test/support/wait.js';
import { writeKubeconfigFor } from '../testenv/testenv.js';
import { readState } from '../testenv/state.js';
import { getRaw } from './apiserver-metrics.js';
import { applyBenchOsc } from './support/osc.js';

const { values: opts } = parseArgs({
  options: {
    nodes: { type: 'string', default: '2000' },
    workers: { type: 'string', default: '4' },
    'max-unavailable': { type: 'string', default: '10%' },
    'apply-ms': { type: 'string', default: '2000' },
    soak: { type: 'string', default: '10' },
  },
});
const N = Number(opts.nodes);
const WORKERS = Number(opts.workers);
const MAX_UNAVAILABLE = /%$/.test(opts['max-unavailable'])
  ? opts['max-unavailable']
  : Number(opts['max-unavailable']);
const APPLY_MS = Number(opts['apply-ms']);
const SOAK_S = Number(opts.soak);
const OSC = 'fleet';
const repoRoot = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
const log = (m: string): void => {
  process.stderr.write(`[bench] ${new Date().toISOString().slice(11, 19)} ${m}\n`);
};

function spec(version: number): OperatingSystemConfigSpec {
  return {
    type: 'debian',
    purpose: 'reconcile',
    files: [
      {
        path: '/etc/fleet/app.conf',
        content: { inline: { data: `version ${String(version)}\n` } },
      },
    ],
    units: [
      {
        name: 'fleet.service',
        filePaths: ['/etc/fleet/app.conf'],
        content:
          '[Unit]\nDescription=fleet\n\n[Service]\nExecStart=/bin/sleep infinity\n\n[Install]\nWantedBy=multi-user.target\n',
      },
    ],
    rollout: {
      maxUnavailable: MAX_UNAVAILABLE,
      soakSeconds: SOAK_S,
      progressDeadlineSeconds: Math.max(600, SOAK_S * 4),
      failureThreshold: '5%',
    },
  };
}

function pct(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}

async function cpuOf(pid: number | undefined): Promise<number> {
  if (pid === undefined) return NaN;
  const stat = await readFile(`/proc/${String(pid)}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
}

async function hwm(pid: number | undefined): Promise<number> {
  if (pid === undefined) return NaN;
  const status = await readFile(`/proc/${String(pid)}/status`, 'utf8');
  return Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? NaN) * 1024;
}

/** apiserver_request_total summed by verb and resource. */
function requestCounts(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    const labels: Record<string, string> = {};
    for (const m of line.matchAll(/([a-z_]+)="([^"]*)"/g)) labels[m[1] ?? ''] = m[2] ?? '';
    const key = `${labels.verb ?? '?'} ${labels.resource ?? '?'}${labels.subresource ? `/${labels.subresource}` : ''}`;
    out.set(key, (out.get(key) ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1)));
  }
  return out;
}

interface FleetStats {
  requests: number;
  bytes: number;
  errors: number;
  latencies: number[];
  rss: number;
}

class Fleet {
  private readonly children: ChildProcess[] = [];

  constructor(kubeconfig: string, ns: string, work: string) {
    const per = Math.ceil(N / WORKERS);
    for (let w = 0; w < WORKERS; w++) {
      const first = w * per;
      const count = Math.min(per, N - first);
      if (count <= 0) break;
      this.children.push(
        fork(
          join(repoRoot, 'hack', 'bench', 'rollout-fleet.ts'),
          [kubeconfig, ns, OSC, 'node', String(first), String(count), String(APPLY_MS), work],
          { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] },
        ),
      );
    }
  }

  started(): Promise<void> {
    return Promise.all(
      this.children.map(
        (c) =>
          new Promise<void>((resolve, reject) => {
            c.once('exit', (code) => {
              reject(new Error(`a fleet process exited (${String(code)})`));
            });
            c.on('message', (m: { kind: string }) => {
              if (m.kind === 'started') resolve();
            });
          }),
      ),
    ).then(() => undefined);
  }

  async stats(revision: number): Promise<FleetStats> {
    const all = await Promise.all(
      this.children.map(
        (c) =>
          new Promise<FleetStats>((resolve) => {
            const on = (m: FleetStats & { kind: string }): void => {
              if (m.kind !== 'stats') return;
              c.off('message', on);
              resolve(m);
            };
            c.on('message', on);
            c.send({ kind: 'stats', revision });
          }),
      ),
    );
    return {
      requests: all.reduce((a, s) => a + s.requests, 0),
      bytes: all.reduce((a, s) => a + s.bytes, 0),
      errors: all.reduce((a, s) => a + s.errors, 0),
      latencies: all.flatMap((s) => s.latencies),
      rss: all.reduce((a, s) => Math.max(a, s.rss), 0),
    };
  }

  async stop(): Promise<void> {
    await Promise.all(
      this.children.map(
        (c) =>
          new Promise<void>((resolve) => {
            if (c.exitCode !== null) {
              resolve();
              return;
            }
            c.once('exit', () => {
              resolve();
            });
            c.send({ kind: 'stop' });
            setTimeout(() => c.kill('SIGKILL'), 30_000).unref();
          }),
      ),
    );
  }
}

async function main(): Promise<void> {
  const entry = join(repoRoot, 'dist', 'cli', 'oscar.js');
  await access(entry).catch(() => {
    throw new Error(`${entry} is missing: run "npm run build" first`);
  });
  const cluster = await attachCluster({ log });
  const { env, api: admin, kubeConfig: kc } = cluster;
  const ns = `bench-rollout-${Date.now().toString(36)}`;
  const work = await mkdtemp(join(tmpdir(), 'oscar-bench-rollout-'));
  const state = await readState(env.stateFile);
  const pids = { apiserver: state.apiserver.ref?.pid, etcd: state.etcd.ref?.pid };
  let controller: ChildProcess | undefined;
  let fleet: Fleet | undefined;
  try {
    await admin.request('POST', '/api/v1/namespaces', {
      body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } },
    });
    // one identity (group oscar:bench-nodes) for the simulated nodes, with grant mode's verbs
    const rbac = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: { name: ${ns}-nodes }
rules:
  - { apiGroups: [oscar.dev], resources: [operatingsystemconfignodes], verbs: [create, get, list, watch] }
  - { apiGroups: [oscar.dev], resources: [operatingsystemconfignodes/status], verbs: [patch] }
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: { name: ${ns}-nodes }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ${ns}-nodes }
subjects: [{ apiGroup: rbac.authorization.k8s.io, kind: Group, name: 'oscar:bench-nodes' }]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: { name: nodes, namespace: ${ns} }
rules: [{ apiGroups: [''], resources: [secrets], resourceNames: [${[0, 1, 2, 3, 4].map((k) => `oscar-${OSC}-rev-${String(k)}`).join(', ')}], verbs: [get] }]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: { name: nodes, namespace: ${ns} }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: Role, name: nodes }
subjects: [{ apiGroup: rbac.authorization.k8s.io, kind: Group, name: 'oscar:bench-nodes' }]
`;
    const kubectl = spawn(
      env.info.kubectlPath,
      ['--kubeconfig', env.kubeconfigPath, 'apply', '-f', '-'],
      {
        stdio: ['pipe', 'ignore', 'inherit'],
      },
    );
    kubectl.stdin.end(rbac);
    await new Promise((r) => kubectl.once('exit', r));
    const nodeKubeconfig = await writeKubeconfigFor(env.info, {
      user: 'bench-nodes',
      groups: ['oscar:bench-nodes'],
    });

    const apply = (version: number): Promise<unknown> =>
      applyBenchOsc(admin, ns, OSC, spec(version));
    const rollout = async (): Promise<RolloutStatus | undefined> =>
      (
        await admin.request<{ status?: { rollout?: RolloutStatus } }>(
          'GET',
          `/apis/oscar.dev/v1alpha1/namespaces/${ns}/operatingsystemconfigs/${OSC}`,
        )
      ).status?.rollout;
    const until = async (
      what: string,
      ok: (r: RolloutStatus) => boolean,
    ): Promise<RolloutStatus> => {
      let last = '';
      return waitFor(
        what,
        async () => {
          const r = await rollout();
          if (r && ok(r)) return r;
          const line = r ? `${r.phase} r${String(r.revision)} ${r.message}` : 'no rollout yet';
          if (line !== last) log(`${what}: ${line}`);
          last = line;
          return undefined;
        },
        { timeoutMs: 3_600_000, intervalMs: 500, onTimeout: () => last },
      );
    };

    controller = spawn(
      process.execPath,
      [
        entry,
        'controller',
        '--kubeconfig',
        env.kubeconfigPath,
        '--namespace',
        ns,
        '--metrics-addr=0',
        '--log-level=warn',
      ],
      { stdio: ['ignore', 'inherit', 'inherit'] },
    );
    await apply(1);
    log(`starting ${String(N)} nodes in ${String(WORKERS)} processes`);
    const t00 = Date.now();
    fleet = new Fleet(nodeKubeconfig, ns, work);
    await fleet.started();
    log(`nodes started in ${((Date.now() - t00) / 1000).toFixed(1)} s`);
    await until(
      'revision 1',
      (r) => r.revision === 1 && r.phase === 'Complete' && r.nodes.total === N,
    );
    log(
      `every node on revision 1 after ${((Date.now() - t00) / 1000).toFixed(1)} s; settling 15 s`,
    );
    await new Promise((r) => setTimeout(r, 15_000));

    const before = {
      fleet: await fleet.stats(2),
      api: await cpuOf(pids.apiserver),
      etcd: await cpuOf(pids.etcd),
      controller: await cpuOf(controller.pid),
      requests: requestCounts(await getRaw(kc, '/metrics')),
    };
    const t0 = Date.now();
    await apply(2);
    const done = await until('revision 2', (r) => r.revision === 2 && r.phase === 'Complete');
    const total = (Date.now() - t0) / 1000;
    const after = {
      fleet: await fleet.stats(2),
      api: await cpuOf(pids.apiserver),
      etcd: await cpuOf(pids.etcd),
      controller: await cpuOf(controller.pid),
      requests: requestCounts(await getRaw(kc, '/metrics')),
    };
    const controllerHwm = await hwm(controller.pid);

    const maxU = scaledCount(MAX_UNAVAILABLE, N, 'down');
    const waves = Math.ceil(N / maxU);
    const ideal = waves * (APPLY_MS / 1000 + SOAK_S);
    const lat = [...after.fleet.latencies].sort((a, b) => a - b);
    const agentRequests = after.fleet.requests - before.fleet.requests;
    const agentBytes = after.fleet.bytes - before.fleet.bytes;
    // oscar's own traffic in the window (agents and controller), from the API server's counters:
    // not the bench's polling of the OSC, not kube-controller-manager's
    const oscars =
      /^(\S+ operatingsystemconfignodes|GET secrets|APPLY secrets|\S+ operatingsystemconfigs\/status|POST events)/;
    let served = 0;
    const byKind: string[] = [];
    for (const [k, v] of after.requests) {
      const d = v - (before.requests.get(k) ?? 0);
      if (d <= 0 || !oscars.test(k)) continue;
      served += d;
      byKind.push(`${k} ${String(d)}`);
    }
    byKind.sort((a, b) => Number(b.split(' ').pop()) - Number(a.split(' ').pop()));
    const line = (label: string, value: string, target = ''): void => {
      process.stdout.write(`${label.padEnd(52)} ${value.padEnd(28)} ${target}\n`);
    };
    process.stdout.write(
      `\nrollout of revision 2 to ${String(N)} nodes, maxUnavailable ${String(MAX_UNAVAILABLE)} (${String(maxU)}), apply ${String(APPLY_MS)} ms (simulated), soak ${String(SOAK_S)} s, ${String(WORKERS)} node processes, controller ${entry}\n\n`,
    );
    line('figure', 'measured', 'target');
    line('total rollout time (OSC change → Complete observed)', `${total.toFixed(1)} s`);
    line(`ideal: ${String(waves)} waves × (apply + soak)`, `${ideal.toFixed(1)} s`);
    line('total / ideal', `${((total / ideal - 1) * 100).toFixed(1)} % over`, '≤ 20 %');
    line(
      'grant → apply start p50 / p99 / max',
      `${String(pct(lat, 50))} / ${String(pct(lat, 99))} / ${String(lat.at(-1) ?? NaN)} ms`,
      'p99 ≤ 2 s',
    );
    line('  samples', String(lat.length));
    line('agent API requests per node per rollout', (agentRequests / N).toFixed(2), '≤ 5');
    line('agent HTTP bytes per node per rollout', `${(agentBytes / N / 1024).toFixed(2)} KiB`);
    line('oscar requests (agents + controller) per node', (served / N).toFixed(2));
    line(
      'API server CPU per node update',
      `${(((after.api - before.api) / N) * 1000).toFixed(1)} ms`,
    );
    line('etcd CPU per node update', `${(((after.etcd - before.etcd) / N) * 1000).toFixed(1)} ms`);
    line(
      'controller CPU during the rollout',
      `${(after.controller - before.controller).toFixed(1)} s`,
    );
    line('controller CPU in all (start, join, rollout)', `${after.controller.toFixed(1)} s`);
    line('controller peak RSS (VmHWM)', `${(controllerHwm / 1048576).toFixed(1)} MiB`, '< 250 MB');
    line(
      'node process peak RSS (largest of them)',
      `${(after.fleet.rss / 1048576).toFixed(1)} MiB`,
    );
    line(
      'agent errors logged during the rollout',
      String(after.fleet.errors - before.fleet.errors),
    );
    line('waves (status)', `${String(done.wave)} of ${String(done.waves)}`);
    // status.nodes (OSC controller) and status.rollout (rollout controller), every writer's
    const statusWrites = [...after.requests]
      .filter(([k]) => /^\S+ operatingsystemconfigs\/status$/.test(k))
      .reduce((n, [k, v]) => n + v - (before.requests.get(k) ?? 0), 0);
    line(
      'OSC status writes during the rollout',
      `${String(statusWrites)} (${(statusWrites / total).toFixed(2)} a second)`,
      '≤ ~1 a second, flat in N',
    );
    process.stdout.write(
      `\noscar's requests during the rollout, as the API server counted them:\n  ${byKind.slice(0, 12).join('\n  ')}\n`,
    );
  } finally {
    await fleet?.stop();
    controller?.kill('SIGTERM');
    await admin.request('DELETE', `/api/v1/namespaces/${ns}`).catch(() => undefined);
    await admin
      .request('DELETE', '/apis/oscar.dev/v1alpha1/operatingsystemconfignodes')
      .catch(() => undefined);
    admin.close();
    await rm(work, { recursive: true, force: true });
    await cluster.stop();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
