// Controller benchmark against the real test API server (hack/testenv):
//   phase 1, the clients' view: with the controller running, create N OperatingSystemConfigs
//     (~40 files, ~10 units each); time the creates alone, and until every Secret exists and every
//     OSC is Ready for its generation (from the first create);
//   then change one file in M of them, one at a time; per change, the latency from the update
//     request to the Secret's checksum annotation changing (watch timestamps in this process), and
//     the API server's own share: the update request until its OSC watch event arrives here;
//   phase 2, the controller's own throughput: N more OSCs created in a second namespace with no
//     controller watching it, then a fresh controller starts; time from its start until all are
//     Ready (so the clients' create rate is not part of it);
//   the headline, from the same run: phase 2's creates alone (no controller) against the controller
//     converging them (time, API-server CPU, writes per OSC) and against phase 1's clients' view;
//   per phase, the controller's peak RSS (VmHWM) and its V8 heap at the highest RSS sample, and
//   the API server's own request latency per verb and resource (apiserver_request_duration_seconds
//   from its /metrics, the phase's requests only).
//
//   npm run build && flock /tmp/oscar-bench.lock node --import tsx hack/bench/controller.ts \
//     [--oscs 1000] [--changes 100] [--concurrency 16] [--phases 1,2] [--secret-refs K]
// --secret-refs K: K Secrets per namespace, each OSC references one (i mod K) from an extra file.
// Env: OSCAR_TESTENV_STATE attaches to a running test cluster instead of starting one;
//      OSCAR_BENCH_CONTROLLER_NODE_ARGS adds node flags to the controller process (experiments);
//      OSCAR_BENCH_CONTROLLER_ARGS adds controller flags (e.g. --osc-finalizer);
//      OSCAR_BENCH_CONTROLLER_ENTRY runs another build's oscar.js (before/after in one session).
import { spawn, type ChildProcess } from 'node:child_process';
import { access, readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import { API_VERSION, type OperatingSystemConfigSpec } from '../../api/schema.js';
import { ANNOTATION_CHECKSUM, LABEL_OSC } from '../../api/secret.js';
import { HttpKubeClient } from '../../kube/client.js';
import { dropManagedFields, httpSource, Informer } from '../../controller/kube/informer.js';
import type { KubeObject, OscObject } from '../../controller/kube/types.js';
import { attachTestEnv, startTestEnv, type TestEnv } from '../testenv/testenv.js';
import { readState } from '../testenv/state.js';
import {
  diffHistograms,
  etcdLatencies,
  formatLatencies,
  getRaw,
  requestLatencies,
  writeCounts,
  type HistogramSet,
} from './apiserver-metrics.js';
import { applyBenchOsc, benchOscSpec, inPool } from './support/osc.js';

const { values: opts } = parseArgs({
  options: {
    oscs: { type: 'string', default: '1000' },
    changes: { type: 'string', default: '100' },
    concurrency: { type: 'string', default: '16' },
    files: { type: 'string', default: '40' },
    units: { type: 'string', default: '10' },
    phases: { type: 'string', default: '1,2' },
    'secret-refs': { type: 'string', default: '0' },
  },
});
const N = Number(opts.oscs);
const M = Math.min(N, Number(opts.changes));
const FILES = Number(opts.files);
const UNITS = Number(opts.units);
const CLIENTS = 16;
const PHASES = new Set(opts.phases.split(','));
const SECRET_REFS = Number(opts['secret-refs']);
const RUN = Date.now().toString(36);
const repoRoot = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
const log = (m: string): void => {
  process.stderr.write(`[bench] ${new Date().toISOString().slice(11, 19)} ${m}\n`);
};
const out: string[] = [];
const say = (line = ''): void => {
  out.push(line);
};

const spec = (i: number, generation = 0): OperatingSystemConfigSpec =>
  benchOscSpec(i, {
    files: FILES,
    units: UNITS,
    generation,
    ...(SECRET_REFS > 0 ? { secretRef: `bench-ref-${String(i % SECRET_REFS)}` } : {}),
  });

function pct(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}

const sec = (ms: number): string => `${(ms / 1000).toFixed(2)} s`;
const mib = (bytes: number): string => `${(bytes / 1048576).toFixed(1)} MiB`;

/** Watches one namespace's OSCs and owned Secrets, timestamped in this process. */
class Tracker {
  readonly ready = new Set<string>();
  readonly secrets = new Map<string, { checksum: string; at: number }>();
  readonly secretChanged = new Map<string, (at: number) => void>();
  readonly oscSeen = new Map<string, (at: number) => void>();
  private waiters: (() => void)[] = [];
  private readonly informers: Informer<KubeObject>[];

  constructor(
    http: HttpKubeClient,
    readonly ns: string,
  ) {
    // Informers (relist/reconnect built in): a plain watch can be dropped by a busy API server,
    // and the bench would wait forever.
    const onOsc = (o: OscObject): void => {
      this.oscSeen.get(`${o.metadata.name}@${String(o.metadata.generation)}`)?.(performance.now());
      const r = o.status?.conditions?.find((c) => c.type === 'Ready');
      if (r?.status === 'True' && o.status?.observedGeneration === o.metadata.generation) {
        this.ready.add(o.metadata.name);
      } else this.ready.delete(o.metadata.name);
      this.check();
    };
    const onSecret = (obj: KubeObject): void => {
      const at = performance.now();
      const osc = obj.metadata.labels?.[LABEL_OSC] ?? '';
      const checksum = obj.metadata.annotations?.[ANNOTATION_CHECKSUM] ?? '';
      const before = this.secrets.get(osc);
      this.secrets.set(osc, { checksum, at });
      if (before && before.checksum !== checksum) this.secretChanged.get(osc)?.(at);
      this.check();
    };
    const oscs = new Informer<OscObject>(
      httpSource(http, { path: `/apis/${API_VERSION}/namespaces/${ns}/operatingsystemconfigs` }),
      {
        onAdd: onOsc,
        onUpdate: (_, o) => {
          onOsc(o);
        },
      },
      { name: `bench-oscs(${ns})`, transform: dropManagedFields },
    );
    const secrets = new Informer<KubeObject>(
      httpSource(http, {
        path: `/api/v1/namespaces/${ns}/secrets`,
        labelSelector: LABEL_OSC,
        metadataOnly: true,
      }),
      {
        onAdd: onSecret,
        onUpdate: (_, o) => {
          onSecret(o);
        },
      },
      { name: `bench-secrets(${ns})`, transform: dropManagedFields },
    );
    this.informers = [oscs, secrets];
    for (const i of this.informers) i.start();
  }

  private check(): void {
    if (this.ready.size >= N && this.secrets.size >= N) {
      const w = this.waiters;
      this.waiters = [];
      for (const f of w) f();
    }
  }

  /** Resolves when all N OSCs are Ready and all N Secrets exist. */
  allReady(): Promise<void> {
    return new Promise((resolve) => {
      this.waiters.push(resolve);
      this.check();
    });
  }

  async stop(): Promise<void> {
    await Promise.all(this.informers.map((i) => i.stop()));
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      const port = typeof a === 'object' && a ? a.port : 0;
      s.close(() => {
        resolve(port);
      });
    });
  });
}

interface MemSample {
  rss: number;
  /** VmRSS split: anonymous (heap, malloc) and file-backed (the node binary, libraries). */
  anon: number;
  file: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  newSpace: number;
  oldSpace: number;
}

/** The controller as its own process (compiled, as it ships), with its memory sampled. */
class ControllerProcess {
  private readonly child: ChildProcess;
  private sampler: NodeJS.Timeout | undefined;
  /** The sample with the highest RSS (what the heap looked like at the peak). */
  peak: MemSample | undefined;

  private constructor(
    entry: string,
    ns: string,
    private readonly port: number,
  ) {
    const extra = (process.env.OSCAR_BENCH_CONTROLLER_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
    this.child = spawn(
      process.execPath,
      [
        ...extra,
        entry,
        'controller',
        '--kubeconfig',
        kubeconfigPath,
        '--namespace',
        ns,
        `--metrics-addr=127.0.0.1:${String(port)}`,
        `--concurrency=${opts.concurrency}`,
        '--log-level=warn',
        ...(process.env.OSCAR_BENCH_CONTROLLER_ARGS ?? '').split(/\s+/).filter(Boolean),
      ],
      { stdio: ['ignore', 'inherit', 'inherit'] },
    );
    this.sampler = setInterval(() => {
      void this.sample();
    }, 250);
  }

  static async start(ns: string): Promise<ControllerProcess> {
    const entry =
      process.env.OSCAR_BENCH_CONTROLLER_ENTRY ?? join(repoRoot, 'dist', 'cli', 'oscar.js');
    try {
      await access(entry);
    } catch {
      throw new Error(`${entry} is missing: run "npm run build" first`);
    }
    return new ControllerProcess(entry, ns, await freePort());
  }

  get pid(): number {
    if (this.child.pid === undefined) throw new Error('could not start the controller');
    return this.child.pid;
  }

  private async sample(): Promise<void> {
    try {
      const status = await readFile(`/proc/${String(this.pid)}/status`, 'utf8');
      const kb = (re: RegExp): number => Number(re.exec(status)?.[1] ?? NaN) * 1024;
      const rss = kb(/VmRSS:\s+(\d+)/);
      if (this.peak && rss <= this.peak.rss) return;
      const res = await fetch(`http://127.0.0.1:${String(this.port)}/metrics`);
      const text = await res.text();
      const num = (re: RegExp): number => Number(re.exec(text)?.[1] ?? NaN);
      this.peak = {
        rss,
        anon: kb(/RssAnon:\s+(\d+)/),
        file: kb(/RssFile:\s+(\d+)/),
        heapUsed: num(/^nodejs_heap_size_used_bytes (\S+)/m),
        heapTotal: num(/^nodejs_heap_size_total_bytes (\S+)/m),
        external: num(/^nodejs_external_memory_bytes (\S+)/m),
        newSpace: num(/^nodejs_heap_space_size_total_bytes\{space="new"\} (\S+)/m),
        oldSpace: num(/^nodejs_heap_space_size_used_bytes\{space="old"\} (\S+)/m),
      };
    } catch {
      // Not listening yet, or gone: the next sample will tell.
    }
  }

  async hwm(): Promise<number> {
    const status = await readFile(`/proc/${String(this.pid)}/status`, 'utf8');
    return Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? NaN) * 1024;
  }

  async cpuSeconds(): Promise<number> {
    const stat = await readFile(`/proc/${String(this.pid)}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100; // utime + stime, in clock ticks
  }

  async report(label: string): Promise<void> {
    await this.sample();
    const hwm = await this.hwm();
    say(`  ${label} peak RSS (VmHWM):  ${mib(hwm)}   (target 200 MB = ${mib(200e6)})`);
    const p = this.peak;
    if (p) {
      say(
        `    at the highest RSS sample (${mib(p.rss)}: anonymous ${mib(p.anon)}, file-backed ${mib(p.file)}): V8 heap used ${mib(p.heapUsed)} of ${mib(p.heapTotal)} committed (old space used ${mib(p.oldSpace)}, new space ${mib(p.newSpace)}), external ${mib(p.external)}`,
      );
    }
    say(`    controller CPU time so far: ${(await this.cpuSeconds()).toFixed(1)} s`);
  }

  async stop(): Promise<void> {
    clearInterval(this.sampler);
    this.sampler = undefined;
    if (this.child.exitCode !== null) return;
    const exited = new Promise((r) => this.child.once('exit', r));
    this.child.kill('SIGTERM');
    await exited;
  }
}

let kubeconfigPath = '';
/** kube-apiserver CPU seconds per second with nothing to do (measured at the start). */
let idleCpuPerSecond = 0;

/** utime + stime of a process, in seconds (NaN when it is gone). */
async function cpuOf(pid: number | undefined): Promise<number> {
  if (pid === undefined) return NaN;
  try {
    const stat = await readFile(`/proc/${String(pid)}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100; // clock ticks (USER_HZ 100)
  } catch {
    return NaN;
  }
}

/** One stretch of the run: wall time, kube-apiserver CPU, API-server write requests. */
interface SpanFigures {
  ms: number;
  cpu: number;
  writes: number;
  byKey: Map<string, number>;
}

/**
 * The issue's goal in one block: the controller's cost next to the cost of the creates it reacts
 * to, both measured in this run (all Ready within 1.5x the creates' time; oscar's API-server CPU
 * per OSC at most the create's own).
 */
function headline(spans: {
  clients?: SpanFigures;
  createsAlone?: SpanFigures;
  controller?: SpanFigures;
}): void {
  const base = spans.createsAlone;
  if (!base) return;
  const perOsc = (cpu: number): string => `${((1000 * cpu) / N).toFixed(1)} ms`;
  // CPU beyond what the idle API server would have used in the same wall time
  const net = (s: SpanFigures): number => s.cpu - idleCpuPerSecond * (s.ms / 1000);
  const x = (a: number, b: number): string => `${(a / b).toFixed(2)}×`;
  const writes = (s: SpanFigures): string =>
    `${(s.writes / N).toFixed(2)} writes per OSC (${[...s.byKey].map(([k, n]) => `${k} ${String(n)}`).join(', ')})`;
  say();
  say(`headline — ${String(N)} OSCs, every figure from this run (kube-apiserver CPU from /proc)`);
  say(
    `  creates alone, no controller:            ${sec(base.ms)}, kube-apiserver CPU ${net(base).toFixed(1)} s (${perOsc(net(base))} per OSC), ${writes(base)}`,
  );
  const c = spans.controller;
  if (c) {
    say(
      `  fresh controller → all Ready:            ${sec(c.ms)} = ${x(c.ms, base.ms)} the creates' time; kube-apiserver CPU ${net(c).toFixed(1)} s (${perOsc(net(c))} per OSC) = ${x(net(c), net(base))} the creates' own (goal ≤ 1×); ${writes(c)}`,
    );
  }
  const v = spans.clients;
  if (v) {
    const own = net(v) - net(base);
    say(
      `  clients' view, first create → all Ready: ${sec(v.ms)} = ${x(v.ms, base.ms)} the creates alone (goal ≤ 1.5×); kube-apiserver CPU ${net(v).toFixed(1)} s, less the creates' ${net(base).toFixed(1)} s: oscar's ${own.toFixed(1)} s (${perOsc(own)} per OSC) = ${x(own, net(base))} the creates' own`,
    );
  }
}

async function main(): Promise<void> {
  const attach = process.env.OSCAR_TESTENV_STATE;
  const env: TestEnv = attach ? await attachTestEnv(attach) : await startTestEnv({ log });
  kubeconfigPath = env.kubeconfigPath;
  const kc = new KubeConfig();
  kc.loadFromFile(env.kubeconfigPath);
  const http = new HttpKubeClient(kc);
  const trackers: Tracker[] = [];
  const controllers: ControllerProcess[] = [];
  const RESOURCES = ['operatingsystemconfigs', 'secrets', 'events'];
  const state = await readState(env.stateFile);
  const pids = { apiserver: state.apiserver.ref?.pid, etcd: state.etcd.ref?.pid };
  const scrape = async (): Promise<{
    req: HistogramSet;
    etcd: HistogramSet;
    at: number;
    cpu: { apiserver: number; etcd: number };
  }> => {
    const text = await getRaw(kc, '/metrics');
    return {
      req: requestLatencies(text, RESOURCES),
      etcd: etcdLatencies(text, ['operatingsystemconfigs', 'secrets']),
      at: performance.now(),
      cpu: { apiserver: await cpuOf(pids.apiserver), etcd: await cpuOf(pids.etcd) },
    };
  };
  const apiReport = (
    label: string,
    a: Awaited<ReturnType<typeof scrape>>,
    b: Awaited<ReturnType<typeof scrape>>,
  ): void => {
    const wall = (b.at - a.at) / 1000;
    const cpu = (k: 'apiserver' | 'etcd'): string => {
      const used = b.cpu[k] - a.cpu[k];
      return `${used.toFixed(1)} s (${((100 * used) / wall).toFixed(0)} % of one core)`;
    };
    say(
      `  ${label}, ${wall.toFixed(1)} s: CPU of kube-apiserver ${cpu('apiserver')}, of etcd ${cpu('etcd')} (the machine has 2 cores)`,
    );
    say(
      `  API server's own latency, ${label} (apiserver_request_duration_seconds; p50/p99 from buckets):`,
    );
    for (const l of formatLatencies(diffHistograms(a.req, b.req))) say(l);
    const etcd = diffHistograms(a.etcd, b.etcd);
    if (etcd.size > 0) {
      say(
        `  etcd round trips as the API server sees them, ${label} (etcd_request_duration_seconds):`,
      );
      for (const l of formatLatencies(etcd)) say(l);
    }
  };
  const createNs = async (ns: string): Promise<void> => {
    await http.request('POST', '/api/v1/namespaces', { body: { metadata: { name: ns } } });
    for (let j = 0; j < SECRET_REFS; j++) {
      await http.request('POST', `/api/v1/namespaces/${ns}/secrets`, {
        body: {
          metadata: { name: `bench-ref-${String(j)}` },
          data: { token: Buffer.from(`token ${String(j)}`).toString('base64') },
        },
      });
    }
  };
  const apply = (ns: string, name: string, s: OperatingSystemConfigSpec): Promise<unknown> =>
    applyBenchOsc(http, ns, name, s);
  const names = Array.from({ length: N }, (_, i) => `pool-${String(i).padStart(4, '0')}`);
  const createAll = async (ns: string): Promise<void> => {
    await inPool(N, CLIENTS, async (i) => {
      await apply(ns, names[i] ?? '', spec(i));
    });
  };

  const span = (
    a: Awaited<ReturnType<typeof scrape>>,
    b: Awaited<ReturnType<typeof scrape>>,
    ms: number,
  ): SpanFigures => ({ ms, cpu: b.cpu.apiserver - a.cpu.apiserver, ...spanWrites(a, b) });
  const spanWrites = (
    a: Awaited<ReturnType<typeof scrape>>,
    b: Awaited<ReturnType<typeof scrape>>,
  ): { writes: number; byKey: Map<string, number> } => {
    const w = writeCounts(diffHistograms(a.req, b.req));
    return { writes: w.total, byKey: w.byKey };
  };
  const spans: { clients?: SpanFigures; createsAlone?: SpanFigures; controller?: SpanFigures } = {};

  try {
    const objSize = Buffer.byteLength(JSON.stringify(spec(0)));
    say(
      `controller benchmark — ${String(N)} OSCs × ${String(FILES)} files / ${String(UNITS)} units (spec ≈ ${(objSize / 1024).toFixed(1)} KiB each), controller --concurrency ${opts.concurrency}`,
    );
    if (process.env.OSCAR_BENCH_CONTROLLER_NODE_ARGS) {
      say(`  controller node flags: ${process.env.OSCAR_BENCH_CONTROLLER_NODE_ARGS}`);
    }

    // The API server's CPU when nobody writes (its own housekeeping, the test cluster's
    // kube-controller-manager): taken out of the headline's figures, pro rata of their wall time,
    // so a stretch made slow by other jobs on the machine is not charged for that time.
    const i0 = await scrape();
    await new Promise((r) => setTimeout(r, 10_000));
    const i1 = await scrape();
    idleCpuPerSecond = (i1.cpu.apiserver - i0.cpu.apiserver) / ((i1.at - i0.at) / 1000);
    say(
      `  kube-apiserver CPU with nothing to do: ${(idleCpuPerSecond * 1000).toFixed(1)} ms a second (10 s sample), taken out of the headline's CPU figures`,
    );

    if (PHASES.has('1')) {
      // Phase 1: the controller runs while the clients create.
      const ns1 = `bench-${RUN}-a`;
      await createNs(ns1);
      const t1 = new Tracker(http, ns1);
      trackers.push(t1);
      const c1 = await ControllerProcess.start(ns1);
      controllers.push(c1);
      await new Promise((r) => setTimeout(r, 3000)); // let it list (nothing yet) and watch

      log(`phase 1: creating ${String(N)} OSCs with the controller running`);
      const m0 = await scrape();
      const t0 = performance.now();
      await createAll(ns1);
      const createdMs = performance.now() - t0;
      const m1 = await scrape();
      log(`created in ${sec(createdMs)}; waiting for Secrets and Ready`);
      await t1.allReady();
      const convergeMs = performance.now() - t0;
      const m2 = await scrape();
      spans.clients = span(m0, m2, convergeMs);

      say();
      say(
        `phase 1 — ${String(N)} OSCs created by ${String(CLIENTS)} parallel clients (server-side apply) while the controller runs`,
      );
      say(
        `  creates alone (clients' last create answered):        ${sec(createdMs)}   (${(N / (createdMs / 1000)).toFixed(0)} OSCs/s)`,
      );
      say(
        `  all Secrets exist and all Ready (from first create):   ${sec(convergeMs)}   (target 10 s)`,
      );
      apiReport('during the creates', m0, m1);
      apiReport('after the creates, until all Ready', m1, m2);

      // Changes, one at a time, spaced so each latency is its own.
      log(`changing ${String(M)} OSCs one at a time`);
      const latencies: number[] = [];
      const apiLatencies: number[] = [];
      for (const name of names.slice(0, M)) {
        const i = names.indexOf(name);
        // The API server's own share: the update request until its watch event arrives here.
        const seen = new Promise<number>((resolve) => {
          t1.oscSeen.set(`${name}@2`, resolve);
        });
        const changed = new Promise<number>((resolve) => {
          t1.secretChanged.set(name, resolve);
        });
        const start = performance.now();
        await apply(ns1, name, spec(i, 1));
        const at = await changed;
        latencies.push(at - start);
        apiLatencies.push((await seen) - start);
        t1.secretChanged.delete(name);
        t1.oscSeen.delete(`${name}@2`);
      }
      latencies.sort((a, b) => a - b);
      apiLatencies.sort((a, b) => a - b);
      const m3 = await scrape();
      say(
        `  update → Secret updated, ${String(M)} changes one at a time:  p50 ${pct(latencies, 50).toFixed(1)} ms   p99 ${pct(latencies, 99).toFixed(1)} ms   max ${(latencies.at(-1) ?? NaN).toFixed(1)} ms   (target p99 250 ms)`,
      );
      say(
        `    of which the API server alone (update request → its OSC watch event here):  p50 ${pct(apiLatencies, 50).toFixed(1)} ms   p99 ${pct(apiLatencies, 99).toFixed(1)} ms`,
      );
      apiReport('during the changes', m2, m3);
      await c1.report('controller (phase 1: running during creates and changes)');
      await c1.stop();
      await t1.stop();
    }

    if (PHASES.has('2')) {
      // Phase 2: the OSCs exist before the controller starts.
      const ns2 = `bench-${RUN}-b`;
      await createNs(ns2);
      const t2 = new Tracker(http, ns2);
      trackers.push(t2);
      log(`phase 2: creating ${String(N)} OSCs with no controller watching`);
      const mc = await scrape();
      const c0 = performance.now();
      await createAll(ns2);
      const created2Ms = performance.now() - c0;
      const m4 = await scrape();
      spans.createsAlone = span(mc, m4, created2Ms);
      log(`created in ${sec(created2Ms)}; starting a fresh controller`);
      const s0 = performance.now();
      const c2 = await ControllerProcess.start(ns2);
      controllers.push(c2);
      await t2.allReady();
      const ownMs = performance.now() - s0;
      const m5 = await scrape();
      spans.controller = span(m4, m5, ownMs);
      say();
      say(
        `phase 2 — ${String(N)} OSCs already exist (created in ${sec(created2Ms)} with no controller), then a fresh controller starts`,
      );
      say(
        `  controller start → all Secrets exist and all Ready:    ${sec(ownMs)}   (${(N / (ownMs / 1000)).toFixed(0)} OSCs/s; process start and initial list included)`,
      );
      apiReport('the creates alone (no controller)', mc, m4);
      apiReport('controller start until all Ready', m4, m5);
      await c2.report('controller (phase 2: fresh start on existing OSCs)');
      await c2.stop();
      await t2.stop();
    }
    headline(spans);
    console.log(['', ...out].join('\n'));
  } catch (error) {
    console.log(['', ...out].join('\n'));
    throw error;
  } finally {
    for (const c of controllers) await c.stop().catch(() => undefined);
    for (const t of trackers) await t.stop().catch(() => undefined);
    http.close();
    if (!attach) await env.stop();
  }
}

await main();
