// status.nodes — and with --rollout status.rollout — at fleet scale against the real test API
// server (hack/testenv): one reconcile OSC, N OperatingSystemConfigNodes written by this bench (no
// agent processes: what the controllers see of a rollout is the nodes' reports), the controller
// as it ships (dist/, its own process).
// - default: every node reports revision 1; then every node reports the new checksum, 16 reports
//   in flight (a rollout's reports, as fast as the API server takes them; no grants).
// - --rollout: the OSC carries spec.rollout (maxUnavailable, soak); every node follows grants
//   (status.source Grant) and answers them as the grant-mode agent does (support/grant-responder.ts:
//   the apply simulated as --apply-ms; in try mode Verifying, then Confirmed after the soak), 16
//   reports in flight. Every node joins and is granted revision 1; then one change is rolled out
//   by the rollout controller, waves of maxUnavailable.
// Printed: the OSC's status writes (status.nodes and status.rollout: one writer) until the status
// counts every node on the new revision (and with --rollout the rollout is Complete), from the
// API server's own counters, per second; the time from the last report until then; the API
// server's and the controller's CPU in that window; the controller's peak RSS.
//
//   npm run build && flock /tmp/oscar-heavy.lock nice -n 10 node --import tsx hack/bench/node-counts.ts \
//     [--nodes 2000] [--entry dist/cli/oscar.js] \
//     [--rollout [--max-unavailable 10%] [--apply-ms 2000] [--soak 10]]
// Env: OSCAR_TESTENV_STATE attaches to a running test cluster instead of starting one.
import { spawn, type ChildProcess } from 'node:child_process';
import { access, readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import { scaledCount } from '../../api/rollout.js';
import type { OperatingSystemConfigSpec, OperatingSystemConfigStatus } from '../../api/schema.js';
import { CONTENT_MERGE_PATCH, HttpKubeClient } from '../../kube/client.js';
import { attachTestEnv, startTestEnv, type TestEnv } from '../testenv/testenv.js';
import { readState } from '../testenv/state.js';
import { getRaw } from './apiserver-metrics.js';
import { GrantResponder } from './support/grant-responder.js';
import { applyBenchOsc } from './support/osc.js';

const repoRoot = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
const { values: opts } = parseArgs({
  options: {
    nodes: { type: 'string', default: '2000' },
    entry: { type: 'string', default: join(repoRoot, 'dist', 'cli', 'oscar.js') },
    rollout: { type: 'boolean', default: false },
    'max-unavailable': { type: 'string', default: '10%' },
    'apply-ms': { type: 'string', default: '2000' },
    soak: { type: 'string', default: '10' },
  },
});
const N = Number(opts.nodes);
const ROLLOUT = opts.rollout;
const MAX_UNAVAILABLE = /%$/.test(opts['max-unavailable'])
  ? opts['max-unavailable']
  : Number(opts['max-unavailable']);
const APPLY_MS = Number(opts['apply-ms']);
const SOAK_S = Number(opts.soak);
const CLIENTS = 16;
const OSC = 'fleet';
const GROUP = '/apis/oscar.dev/v1alpha1';
const log = (m: string): void => {
  process.stderr.write(`[bench] ${new Date().toISOString().slice(11, 19)} ${m}\n`);
};
const rfc3339 = (): string => new Date().toISOString().replace(/\.\d+Z$/, 'Z');
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function pool<T>(items: T[], n: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < items.length) await fn(items[next++] as T);
    }),
  );
}

async function procStat(pid: number | undefined): Promise<{ cpu: number; hwm: number }> {
  if (pid === undefined) return { cpu: NaN, hwm: NaN };
  const stat = await readFile(`/proc/${String(pid)}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const status = await readFile(`/proc/${String(pid)}/status`, 'utf8');
  return {
    cpu: (Number(f[11]) + Number(f[12])) / 100,
    hwm: Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? NaN) * 1024,
  };
}

/** apiserver_request_total for the OSCs' status subresource, every verb. */
function statusWrites(text: string): number {
  let n = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    if (!line.includes('resource="operatingsystemconfigs"')) continue;
    if (!line.includes('subresource="status"') || /verb="(GET|LIST|WATCH)"/.test(line)) continue;
    n += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return n;
}

function oscSpec(version: number): OperatingSystemConfigSpec {
  const spec: OperatingSystemConfigSpec = {
    type: 'debian',
    purpose: 'reconcile',
    files: [{ path: '/etc/fleet.conf', content: { inline: { data: `v${String(version)}\n` } } }],
  };
  if (ROLLOUT) {
    spec.rollout = {
      maxUnavailable: MAX_UNAVAILABLE,
      soakSeconds: SOAK_S,
      progressDeadlineSeconds: Math.max(600, SOAK_S * 4),
      failureThreshold: '5%',
    };
  }
  return spec;
}

/** The bench's cluster, namespace, nodes and controller, and the requests every phase makes. */
class Bench {
  readonly ns = `bench-counts-${Date.now().toString(36)}`;
  readonly names = Array.from({ length: N }, (_, i) => `${this.ns}-n${String(i).padStart(5, '0')}`);
  readonly selector = `bench.oscar.dev/run=${this.ns}`;
  controller: ChildProcess | undefined;

  constructor(
    readonly env: TestEnv,
    readonly kc: KubeConfig,
    readonly api: HttpKubeClient,
    readonly apiserverPid: number | undefined,
  ) {}

  async oscStatus(): Promise<OperatingSystemConfigStatus | undefined> {
    const osc = await this.api.request<{ status?: OperatingSystemConfigStatus }>(
      'GET',
      `${GROUP}/namespaces/${this.ns}/operatingsystemconfigs/${OSC}`,
    );
    return osc.status;
  }

  async until(
    what: string,
    ok: (s: OperatingSystemConfigStatus) => boolean,
  ): Promise<OperatingSystemConfigStatus> {
    for (let i = 0; ; i++) {
      const exit = this.controller?.exitCode;
      if (exit !== null && exit !== undefined) {
        throw new Error(`the controller exited (${String(exit)}) while waiting for: ${what}`);
      }
      const s = await this.oscStatus().catch(() => undefined);
      if (s && ok(s)) return s;
      if (i % 50 === 0) {
        const r = s?.rollout;
        const rollout = r
          ? ` rollout r${String(r.revision)} ${r.phase} ${JSON.stringify(r.nodes)}`
          : '';
        log(`${what}: nodes ${JSON.stringify(s?.nodes ?? {})}${rollout}`);
      }
      await sleep(100);
    }
  }

  /** A node's status as the bench's simulated agent writes it (merge patch). */
  patchNode(name: string, status: Record<string, unknown>): Promise<unknown> {
    return this.api.request('PATCH', `${GROUP}/operatingsystemconfignodes/${name}/status`, {
      contentType: CONTENT_MERGE_PATCH,
      body: { status: { oscRef: { namespace: this.ns, name: OSC }, ...status } },
    });
  }

  /** A report of an applied checksum, as a Secret-following agent sends it. */
  report(name: string, checksum: string): Promise<unknown> {
    return this.patchNode(name, {
      appliedChecksum: checksum,
      lastAppliedTime: rfc3339(),
      conditions: [
        {
          type: 'Degraded',
          status: 'False',
          reason: 'Applied',
          message: 'simulated',
          lastTransitionTime: rfc3339(),
        },
      ],
    });
  }

  /** Every node's object, and its first report: `first(name)`. */
  async createNodes(first: (name: string) => Promise<unknown>): Promise<void> {
    log(`creating ${String(N)} nodes`);
    await pool(this.names, CLIENTS, async (name) => {
      await this.api.request('POST', `${GROUP}/operatingsystemconfignodes`, {
        body: {
          apiVersion: 'oscar.dev/v1alpha1',
          kind: 'OperatingSystemConfigNode',
          metadata: { name, labels: { 'bench.oscar.dev/run': this.ns } },
        },
      });
      await first(name);
    });
  }

  applyOsc(version: number): Promise<unknown> {
    return applyBenchOsc(this.api, this.ns, OSC, oscSpec(version));
  }

  startController(entry: string): void {
    this.controller = spawn(
      process.execPath,
      // metrics on a free port: another bench's controller may hold the default one
      [
        entry,
        'controller',
        '--kubeconfig',
        this.env.kubeconfigPath,
        '--namespace',
        this.ns,
        '--metrics-addr=0',
      ],
      { stdio: ['ignore', 'ignore', 'inherit'] },
    );
  }

  /** The counters, read between `begin` and `end`. */
  async sample(): Promise<Sample> {
    const begin = performance.now();
    const writes = statusWrites(await getRaw(this.kc, '/metrics'));
    const controller = await procStat(this.controller?.pid);
    const apiserver = await procStat(this.apiserverPid);
    return { begin, end: performance.now(), writes, controller, apiserver };
  }
}

interface Sample {
  begin: number;
  end: number;
  writes: number;
  controller: { cpu: number; hwm: number };
  apiserver: { cpu: number; hwm: number };
}

interface Window {
  title: string;
  from: Sample;
  /** The last report answered. */
  lastReportAt: number;
  reports: number;
  to: Sample;
}

function print(w: Window): void {
  const line = (label: string, value: string, target = ''): void => {
    process.stdout.write(`${label.padEnd(58)} ${value.padEnd(30)} ${target}\n`);
  };
  const s = (ms: number): number => ms / 1000;
  const writes = w.to.writes - w.from.writes;
  // the window: from the change (after the first sample) to all counted (before the last one)
  const windowS = s(w.to.begin - w.from.end);
  const reportsS = s(w.lastReportAt - w.from.end);
  process.stdout.write(`\n${w.title}\n\n`);
  line(
    'reports (first → last answered)',
    `${String(w.reports)} in ${reportsS.toFixed(1)} s (${(w.reports / reportsS).toFixed(0)}/s)`,
  );
  line(
    'OSC status writes, change → all counted',
    `${String(writes)} (${(writes / windowS).toFixed(2)} a second)`,
    '≤ ~1 a second, flat in N',
  );
  line('change → all counted', `${windowS.toFixed(1)} s`);
  line('last report answered → all counted', `${s(w.to.begin - w.lastReportAt).toFixed(2)} s`);
  line(
    'kube-apiserver CPU in that window',
    `${(w.to.apiserver.cpu - w.from.apiserver.cpu).toFixed(1)} s`,
  );
  line(
    'controller CPU in that window',
    `${(w.to.controller.cpu - w.from.controller.cpu).toFixed(1)} s`,
  );
  line(
    'controller peak RSS (VmHWM, whole run)',
    `${(w.to.controller.hwm / 1048576).toFixed(1)} MiB`,
    '< 300 MB',
  );
}

/** Every node reports revision 2 by itself (no grants): status.nodes alone. */
async function countsScenario(b: Bench, entry: string): Promise<Window> {
  await b.applyOsc(1);
  const v1 = (await b.until('revision 1 rendered', (s) => s.checksum !== undefined)).checksum ?? '';
  await b.createNodes((name) => b.report(name, v1));
  await b.until('every node on revision 1', (s) => s.nodes?.updated === N);
  await b.applyOsc(2);
  const v2 = (await b.until('revision 2 rendered', (s) => !!s.checksum && s.checksum !== v1))
    .checksum;
  await sleep(2000); // the new rendering's own status writes settle
  const from = await b.sample();
  log(`${String(N)} nodes report revision 2`);
  await pool(b.names, CLIENTS, async (name) => {
    await b.report(name, v2 ?? '');
  });
  const lastReportAt = performance.now();
  await b.until('every node counted on revision 2', (s) => s.nodes?.updated === N);
  const title = `status.nodes while ${String(N)} nodes report a new revision (${String(CLIENTS)} reports in flight), controller ${entry}`;
  return { title, from, lastReportAt, reports: N, to: await b.sample() };
}

/** Nodes that follow grants: revision 1 granted to every node, then a rollout of revision 2. */
async function rolloutScenario(b: Bench, entry: string): Promise<Window> {
  const responder = new GrantResponder({
    http: b.api,
    labelSelector: b.selector,
    applyMs: APPLY_MS,
    inFlight: CLIENTS,
  });
  await responder.start();
  try {
    await b.applyOsc(1);
    const v1 = (await b.until('revision 1 rendered', (s) => s.checksum !== undefined)).checksum;
    const joined = { source: 'Grant', conditions: [degradedFalse()] };
    await b.createNodes((name) => b.patchNode(name, joined));
    const done = (s: OperatingSystemConfigStatus, revision: number): boolean =>
      s.nodes?.updated === N &&
      s.rollout?.revision === revision &&
      s.rollout.phase === 'Complete' &&
      s.rollout.nodes.updated === N;
    await b.until('every node granted and on revision 1', (s) => done(s, 1));
    await sleep(3000); // the last writes of the joins settle
    const from = await b.sample();
    const reports0 = responder.reports;
    log(`rolling out revision 2 to ${String(N)} nodes`);
    await b.applyOsc(2);
    await b.until('revision 2 rolled out and counted', (s) => s.checksum !== v1 && done(s, 2));
    const to = await b.sample();
    if (responder.errors > 0) log(`${String(responder.errors)} reports failed (retried)`);
    const maxU = scaledCount(MAX_UNAVAILABLE, N, 'down');
    const title = `status.nodes and status.rollout while revision 2 is rolled out to ${String(N)} nodes that follow grants: maxUnavailable ${String(MAX_UNAVAILABLE)} (${String(maxU)}, ${String(Math.ceil(N / maxU))} waves), apply ${String(APPLY_MS)} ms, soak ${String(SOAK_S)} s (simulated; ${String(CLIENTS)} reports in flight), controller ${entry}`;
    return {
      title,
      from,
      lastReportAt: responder.lastReportAt,
      reports: responder.reports - reports0,
      to,
    };
  } finally {
    await responder.stop();
  }
}

function degradedFalse(): Record<string, string> {
  return {
    type: 'Degraded',
    status: 'False',
    reason: 'Applied',
    message: 'simulated',
    lastTransitionTime: rfc3339(),
  };
}

async function main(): Promise<void> {
  const entry = resolve(opts.entry);
  await access(entry).catch(() => {
    throw new Error(`${entry} is missing: run "npm run build" first`);
  });
  const attach = process.env.OSCAR_TESTENV_STATE;
  const env: TestEnv = attach ? await attachTestEnv(attach) : await startTestEnv({ log });
  const kc = new KubeConfig();
  kc.loadFromFile(env.kubeconfigPath);
  const api = new HttpKubeClient(kc);
  const b = new Bench(env, kc, api, (await readState(env.stateFile)).apiserver.ref?.pid);
  try {
    await api.request('POST', '/api/v1/namespaces', { body: { metadata: { name: b.ns } } });
    b.startController(entry);
    print(ROLLOUT ? await rolloutScenario(b, entry) : await countsScenario(b, entry));
  } finally {
    b.controller?.kill('SIGTERM');
    await api
      .request('DELETE', `${GROUP}/operatingsystemconfignodes`, {
        query: { labelSelector: b.selector },
      })
      .catch(() => undefined);
    await api.request('DELETE', `/api/v1/namespaces/${b.ns}`).catch(() => undefined);
    api.close();
    if (!attach) await env.stop();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
