// What the cluster's other Secrets cost the controller (issue 24): the controller watches every
// namespace (no --namespace), the cluster holds N Secrets of 10 KiB in other namespaces that no
// OSC references, and M OSCs reference a Secret each. Per controller build (--entry, repeatable:
// before and after in one run, alternating), a fresh controller process:
//   start until every OSC is Ready (the initial lists included): wall time, kube-apiserver CPU,
//     the controller's CPU;
//   its RSS and V8 heap once settled (VmRSS after the start, VmHWM at the end);
//   churn: C updates of unrelated Secrets at a steady rate, then one referenced Secret changes
//     and its OSC re-renders: kube-apiserver CPU and the controller's CPU over the churn, next to
//     the same churn with no controller running (measured first), and the controller's GETs of
//     referenced Secrets (oscar_controller_referenced_secret_reads_total, when it has it).
//
//   npm run build && flock /tmp/oscar-bench.lock node --import tsx hack/bench/secret-refs.ts \
//     [--secrets 5000] [--namespaces 50] [--oscs 20] [--churn 1000] [--rounds 2] \
//     [--entry dist/cli/oscar.js] [--entry /elsewhere/dist/cli/oscar.js]
// Env: OSCAR_TESTENV_STATE attaches to a running test cluster instead of starting one.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { access, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import type { OperatingSystemConfigSpec } from '../../api/schema.js';
import { CONTENT_APPLY_PATCH, HttpKubeClient } from '../../kube/client.js';
import type { OscObject } from '../../controller/kube/types.js';
import { oscPath } from '../../controller/osc/writer.js';
import { attachTestEnv, startTestEnv, type TestEnv } from '../testenv/testenv.js';
import { readState } from '../testenv/state.js';
import { applyBenchOsc, inPool } from './support/osc.js';

const repoRoot = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
const { values: opts } = parseArgs({
  options: {
    secrets: { type: 'string', default: '5000' },
    namespaces: { type: 'string', default: '50' },
    oscs: { type: 'string', default: '20' },
    churn: { type: 'string', default: '1000' },
    rate: { type: 'string', default: '100' },
    rounds: { type: 'string', default: '2' },
    entry: { type: 'string', multiple: true },
  },
});
const SECRETS = Number(opts.secrets);
const NAMESPACES = Number(opts.namespaces);
const OSCS = Number(opts.oscs);
const CHURN = Number(opts.churn);
const RATE = Number(opts.rate);
const ROUNDS = Number(opts.rounds);
const ENTRIES = opts.entry ?? [join(repoRoot, 'dist', 'cli', 'oscar.js')];
const RUN = Date.now().toString(36);
const CLIENTS = 16;

const log = (m: string): void => {
  process.stderr.write(`[bench] ${new Date().toISOString().slice(11, 19)} ${m}\n`);
};
const out: string[] = [];
const say = (line = ''): void => {
  out.push(line);
  log(line);
};
const mib = (bytes: number): string => `${(bytes / 1048576).toFixed(1)} MiB`;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** utime + stime of a process, in seconds (NaN when it is gone). */
async function cpuOf(pid: number | undefined): Promise<number> {
  if (pid === undefined) return NaN;
  try {
    const stat = await readFile(`/proc/${String(pid)}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return NaN;
  }
}

async function statusKb(pid: number, field: string): Promise<number> {
  const status = await readFile(`/proc/${String(pid)}/status`, 'utf8');
  return Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? NaN) * 1024;
}

function secretBody(ns: string, name: string, value: Buffer): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, namespace: ns },
    data: { blob: value.toString('base64') },
  };
}

/** The controller as its own process, watching every namespace. */
class Controller {
  readonly child: ChildProcess;
  private constructor(
    readonly entry: string,
    readonly port: number,
  ) {
    this.child = spawn(
      process.execPath,
      [
        entry,
        'controller',
        '--kubeconfig',
        kubeconfigPath,
        `--metrics-addr=127.0.0.1:${String(port)}`,
        '--log-level=warn',
      ],
      { stdio: ['ignore', 'inherit', 'inherit'] },
    );
  }

  static async start(entry: string, port: number): Promise<Controller> {
    await access(entry).catch(() => {
      throw new Error(`${entry} is missing: run "npm run build" first`);
    });
    return new Controller(entry, port);
  }

  get pid(): number {
    if (this.child.pid === undefined) throw new Error('could not start the controller');
    return this.child.pid;
  }

  async metric(re: RegExp): Promise<number> {
    try {
      const text = await (await fetch(`http://127.0.0.1:${String(this.port)}/metrics`)).text();
      let sum = 0;
      let found = false;
      for (const m of text.matchAll(re)) {
        sum += Number(m[1]);
        found = true;
      }
      return found ? sum : NaN;
    } catch {
      return NaN;
    }
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise((r) => this.child.once('exit', r));
    this.child.kill('SIGTERM');
    await exited;
  }
}

let kubeconfigPath = '';

interface Figures {
  startMs: number;
  startApiCpu: number;
  startCtlCpu: number;
  rss: number;
  heapUsed: number;
  churnApiCpu: number;
  churnCtlCpu: number;
  churnMs: number;
  hwm: number;
  reads: number;
}

async function main(): Promise<void> {
  const attach = process.env.OSCAR_TESTENV_STATE;
  const env: TestEnv = attach ? await attachTestEnv(attach) : await startTestEnv({ log });
  kubeconfigPath = env.kubeconfigPath;
  const kc = new KubeConfig();
  kc.loadFromFile(env.kubeconfigPath);
  const http = new HttpKubeClient(kc);
  const state = await readState(env.stateFile);
  const apiPid = state.apiserver.ref?.pid;
  const controllers: Controller[] = [];
  const createNs = (ns: string): Promise<unknown> =>
    http.request('POST', '/api/v1/namespaces', { body: { metadata: { name: ns } } });
  const putSecret = (ns: string, name: string, value: Buffer): Promise<unknown> =>
    http.request('PATCH', `/api/v1/namespaces/${ns}/secrets/${name}`, {
      query: { fieldManager: 'bench', force: true },
      contentType: CONTENT_APPLY_PATCH,
      body: secretBody(ns, name, value),
    });
  const otherNs = (i: number): string => `other-${RUN}-${String(i % NAMESPACES)}`;
  const churn = async (): Promise<number> => {
    const t0 = performance.now();
    const gap = 1000 / RATE;
    await inPool(CHURN, 4, async (i) => {
      const due = t0 + i * gap;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      await putSecret(otherNs(i), `unrelated-${String(i % SECRETS)}`, randomBytes(10 * 1024));
    });
    return performance.now() - t0;
  };
  try {
    log(
      `creating ${String(SECRETS)} unrelated Secrets of 10 KiB in ${String(NAMESPACES)} namespaces`,
    );
    for (let i = 0; i < NAMESPACES; i++) await createNs(otherNs(i));
    const blob = randomBytes(10 * 1024);
    await inPool(SECRETS, CLIENTS, async (i) => {
      await putSecret(otherNs(i), `unrelated-${String(i)}`, blob);
    });
    // The same churn with nothing watching but the API server's own components.
    const b0 = await cpuOf(apiPid);
    const baseMs = await churn();
    const baseCpu = (await cpuOf(apiPid)) - b0;
    say(
      `churn of ${String(CHURN)} unrelated Secret updates at ${String(RATE)}/s, no controller: ${(baseMs / 1000).toFixed(1)} s, kube-apiserver CPU ${baseCpu.toFixed(2)} s`,
    );
    const results = new Map<string, Figures[]>();
    let run = 0;
    for (let round = 0; round < ROUNDS; round++) {
      for (const entry of ENTRIES) {
        const f = await measure(entry, run++);
        results.set(entry, [...(results.get(entry) ?? []), f]);
      }
    }
    report(results, baseCpu);
    console.log(['', ...out].join('\n'));
  } catch (error) {
    console.log(['', ...out].join('\n'));
    throw error;
  } finally {
    for (const c of controllers) await c.stop().catch(() => undefined);
    http.close();
    if (!attach) await env.stop();
  }

  /** One fresh controller: start until M OSCs (in a namespace of their own) are Ready, then churn. */
  async function measure(entry: string, run: number): Promise<Figures> {
    const ns = `refs-${RUN}-${String(run)}`;
    await createNs(ns);
    await inPool(OSCS, CLIENTS, async (i) => {
      await putSecret(ns, `ref-${String(i)}`, randomBytes(64));
      await applyBenchOsc(http, ns, `osc-${String(i)}`, refSpec(i));
    });
    const a0 = await cpuOf(apiPid);
    const t0 = performance.now();
    const c = await Controller.start(entry, 20000 + Math.floor(Math.random() * 20000));
    controllers.push(c);
    await waitReady(ns, () => true);
    const startMs = performance.now() - t0;
    const startApiCpu = (await cpuOf(apiPid)) - a0;
    const startCtlCpu = await cpuOf(c.pid);
    await sleep(5000); // the first lists' garbage collected, as a running controller would be
    const rss = await statusKb(c.pid, 'VmRSS');
    const heapUsed = await c.metric(/^nodejs_heap_size_used_bytes (\S+)/gm);
    const readsBefore = await c.metric(
      /^oscar_controller_referenced_secret_reads_total\{[^}]*\} (\S+)/gm,
    );
    const c0 = await cpuOf(c.pid);
    const a1 = await cpuOf(apiPid);
    const churnMs = await churn();
    // A referenced Secret changes last: once its OSC re-renders, the controller has seen the churn.
    const before = (await http.request<OscObject>('GET', oscPath(ns, 'osc-0'))).status?.checksum;
    await putSecret(ns, 'ref-0', randomBytes(64));
    await waitReady(ns, (o) => o.metadata.name !== 'osc-0' || o.status?.checksum !== before);
    const churnApiCpu = (await cpuOf(apiPid)) - a1;
    const churnCtlCpu = (await cpuOf(c.pid)) - c0;
    const hwm = await statusKb(c.pid, 'VmHWM');
    const reads =
      (await c.metric(/^oscar_controller_referenced_secret_reads_total\{[^}]*\} (\S+)/gm)) -
      readsBefore;
    await c.stop();
    const f = {
      startMs,
      startApiCpu,
      startCtlCpu,
      rss,
      heapUsed,
      churnApiCpu,
      churnCtlCpu,
      churnMs,
      hwm,
      reads,
    };
    log(`${entry}: ${JSON.stringify(f)}`);
    return f;
  }

  async function waitReady(ns: string, extra: (o: OscObject) => boolean): Promise<void> {
    for (;;) {
      const list = await http.request<{ items: OscObject[] }>('GET', oscPath(ns));
      const ready = list.items.filter(
        (o) =>
          o.status?.observedGeneration === o.metadata.generation &&
          o.status?.conditions?.some((x) => x.type === 'Ready' && x.status === 'True') &&
          extra(o),
      );
      if (ready.length >= OSCS) return;
      await sleep(200);
    }
  }
}

/** A small OSC that references Secret ref-i. */
function refSpec(i: number): OperatingSystemConfigSpec {
  return {
    type: 'ubuntu',
    purpose: 'reconcile',
    files: [
      { path: '/etc/bench/plain.conf', content: { inline: { data: `pool ${String(i)}\n` } } },
      {
        path: '/etc/bench/secret',
        permissions: '0600',
        content: { secretRef: { name: `ref-${String(i)}`, key: 'blob' } },
      },
    ],
  };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) / 2)] ?? NaN;
}

function report(results: Map<string, Figures[]>, baseCpu: number): void {
  say();
  say(
    `controller watching all namespaces; ${String(SECRETS)} unrelated Secrets of 10 KiB in ${String(NAMESPACES)} namespaces; ${String(OSCS)} OSCs referencing a Secret each (medians of ${String(ROUNDS)} fresh starts per build)`,
  );
  for (const [entry, fs] of results) {
    const m = (k: keyof Figures): number => median(fs.map((f) => f[k]));
    say(`  ${entry}:`);
    say(
      `    start → all Ready: ${(m('startMs') / 1000).toFixed(1)} s; kube-apiserver CPU ${m('startApiCpu').toFixed(2)} s, controller CPU ${m('startCtlCpu').toFixed(2)} s`,
    );
    say(
      `    settled RSS ${mib(m('rss'))} (V8 heap used ${mib(m('heapUsed'))}); peak RSS (VmHWM) over the run ${mib(m('hwm'))}`,
    );
    say(
      `    churn (${String(CHURN)} unrelated updates, ${(m('churnMs') / 1000).toFixed(1)} s): kube-apiserver CPU ${m('churnApiCpu').toFixed(2)} s (${(m('churnApiCpu') - baseCpu).toFixed(2)} s above no controller), controller CPU ${m('churnCtlCpu').toFixed(2)} s; referenced-Secret GETs ${Number.isNaN(m('reads')) ? 'n/a' : m('reads').toFixed(0)}`,
    );
    say(
      `    every run: ${fs.map((f) => `${mib(f.rss)}/${f.churnApiCpu.toFixed(1)} s`).join(', ')}`,
    );
  }
}

await main();
