// Per-machine bootstrap benchmark against the real test API server (hack/testenv), with the
// controller as it ships (dist/, its own process):
//   phase 1, the clients' view: with the controller running, 16 clients create N OscarConfigs
//     (server-side apply); time until every machine's Secret exists, and per machine the time from
//     its create's answer to its Secret's watch event (p50/p99);
//   phase 2, the controller's own cost: N more OscarConfigs created in a namespace no controller
//     watches, then a fresh controller starts on it; time until all Secrets exist, and the API
//     server's CPU over that time per machine (no client requests in it);
//   per phase: the API writes per machine (the API server's own request counts, write verbs on
//     Secrets, OscarConfigs' status and Events, the clients' creates left out), the controller's
//     peak RSS; then an idle window in which the controller must write nothing.
//
//   npm run build && flock /tmp/oscar-heavy.lock nice -n 10 node --import tsx hack/bench/bootstrap.ts \
//     [--machines 1000] [--idle 10] [--phases 1,2]
// Env: OSCAR_TESTENV_STATE attaches to a running test cluster instead of starting one.
import { spawn, type ChildProcess } from 'node:child_process';
import { access, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { API_VERSION, OSC_KIND, type OperatingSystemConfigSpec } from '../../api/schema.js';
import { CONTENT_APPLY_PATCH, HttpKubeClient } from '../../kube/client.js';
import { httpSource, Informer } from '../../controller/kube/informer.js';
import type { KubeObject } from '../../controller/kube/types.js';
import { freePort } from '../testenv/proc.js';
import { readState } from '../testenv/state.js';
import { attachTestEnv, startTestEnv, type TestEnv } from '../testenv/testenv.js';
import {
  getRaw,
  requestLatencies,
  diffHistograms,
  type HistogramSet,
} from './apiserver-metrics.js';
import { sleep } from '../../api/util.js';
import { inPool } from './support/osc.js';

const { values: opts } = parseArgs({
  options: {
    machines: { type: 'string', default: '1000' },
    idle: { type: 'string', default: '10' },
    phases: { type: 'string', default: '1,2' },
  },
});
const N = Number(opts.machines);
const IDLE_S = Number(opts.idle);
const PHASES = new Set(opts.phases.split(','));
const CLIENTS = 16;
const RUN = Date.now().toString(36);
const repoRoot = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
const log = (m: string): void => {
  process.stderr.write(`[bench] ${new Date().toISOString().slice(11, 19)} ${m}\n`);
};
const out: string[] = [];
const say = (line = ''): void => {
  out.push(line);
};

function pct(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}

async function cpuOf(pid: number | undefined): Promise<number> {
  if (pid === undefined) return NaN;
  const stat = await readFile(`/proc/${String(pid)}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

const WRITE_VERBS = new Set(['POST', 'PUT', 'PATCH', 'APPLY', 'DELETE']);

/** Write requests per "VERB resource" in a phase, from the API server's own histograms. */
function writesOf(diff: HistogramSet): Map<string, number> {
  const m = new Map<string, number>();
  for (const [key, h] of diff) {
    const verb = key.split(' ')[0] ?? '';
    if (WRITE_VERBS.has(verb) && h.count > 0) m.set(key, h.count);
  }
  return m;
}

class ControllerProcess {
  readonly child: ChildProcess;
  constructor(
    entry: string,
    kubeconfig: string,
    ns: string,
    readonly port: number,
  ) {
    // The Node.js the project runs on (node_modules/.bin/node, 24), not whichever ran this script.
    const node = join(repoRoot, 'node_modules', '.bin', 'node');
    this.child = spawn(
      node,
      [
        entry,
        'controller',
        '--kubeconfig',
        kubeconfig,
        '--namespace',
        ns,
        `--metrics-addr=127.0.0.1:${String(port)}`,
        '--log-level=warn',
        '--agent-url=http://127.0.0.1:9/oscar-agent',
        `--agent-sha256=${'e'.repeat(64)}`,
        '--cluster-name=bench',
      ],
      { stdio: ['ignore', 'inherit', 'inherit'] },
    );
  }
  get pid(): number {
    if (this.child.pid === undefined) throw new Error('no controller pid');
    return this.child.pid;
  }
  async ready(): Promise<void> {
    for (;;) {
      try {
        if ((await fetch(`http://127.0.0.1:${String(this.port)}/readyz`)).ok) return;
      } catch {
        // not yet
      }
      await sleep(100);
    }
  }
  async hwm(): Promise<number> {
    const status = await readFile(`/proc/${String(this.pid)}/status`, 'utf8');
    return Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? NaN) * 1024;
  }
  async writes(): Promise<number> {
    const text = await (await fetch(`http://127.0.0.1:${String(this.port)}/metrics`)).text();
    let n = 0;
    for (const m of text.matchAll(/^oscar_controller_api_writes_total\{[^}]*\} (\S+)/gm)) {
      n += Number(m[1]);
    }
    return n;
  }
  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise((r) => this.child.once('exit', r));
    this.child.kill('SIGTERM');
    await exited;
  }
}

async function main(): Promise<void> {
  const attach = process.env.OSCAR_TESTENV_STATE;
  const env: TestEnv = attach ? await attachTestEnv(attach) : await startTestEnv({ log });
  const kc = new KubeConfig();
  kc.loadFromFile(env.kubeconfigPath);
  const http = new HttpKubeClient(kc);
  const state = await readState(env.stateFile);
  const apiserverPid = state.apiserver.ref?.pid;
  const entry = join(repoRoot, 'dist', 'cli', 'oscar.js');
  await access(entry).catch(() => {
    throw new Error(`${entry} is missing: run "npm run build" first`);
  });
  const provisionDoc = parse(
    await readFile(join(repoRoot, 'examples', 'ubuntu-provision.yaml'), 'utf8'),
  ) as { spec: OperatingSystemConfigSpec };
  const provision: OperatingSystemConfigSpec = {
    ...provisionDoc.spec,
    files: [
      ...(provisionDoc.spec.files ?? []),
      {
        path: '/etc/oscar/machine.env',
        content: {
          inline: {
            data: 'MACHINE={{ machine.name }}\nCLUSTER={{ cluster.name }}\nRACK={{ values.rack }}\n',
          },
        },
      },
    ],
  };

  const apply = (path: string, body: unknown): Promise<unknown> =>
    http.request('PATCH', path, {
      query: { fieldManager: 'bench', force: true },
      contentType: CONTENT_APPLY_PATCH,
      body,
      accept: 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1',
    });
  const prepare = async (ns: string): Promise<void> => {
    await apply(`/api/v1/namespaces/${ns}`, {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: ns },
    });
    for (const [name, spec] of [
      ['prov', provision],
      ['rec', { type: 'ubuntu', purpose: 'reconcile' } as OperatingSystemConfigSpec],
    ] as const) {
      await apply(`/apis/${API_VERSION}/namespaces/${ns}/operatingsystemconfigs/${name}`, {
        apiVersion: API_VERSION,
        kind: OSC_KIND,
        metadata: { name, namespace: ns },
        spec,
      });
    }
  };
  const createConfigs = async (ns: string, answered: Map<string, number>): Promise<number> => {
    const names = Array.from({ length: N }, (_, i) => `m-${String(i).padStart(5, '0')}`);
    const t0 = performance.now();
    await inPool(N, CLIENTS, async (i) => {
      const name = names[i] ?? '';
      await apply(`/apis/bootstrap.oscar.dev/v1alpha1/namespaces/${ns}/oscarconfigs/${name}`, {
        apiVersion: 'bootstrap.oscar.dev/v1alpha1',
        kind: 'OscarConfig',
        metadata: { name, namespace: ns },
        spec: {
          provisionRef: { name: 'prov' },
          reconcileRef: { name: 'rec' },
          values: { rack: `r${name.slice(-2)}` },
        },
      });
      answered.set(name, performance.now());
    });
    return performance.now() - t0;
  };
  /** Watches the user data Secrets of a namespace; resolves when N exist. */
  const watchSecrets = (
    ns: string,
    seen: Map<string, number>,
  ): { all: Promise<number>; stop: () => Promise<void> } => {
    let resolveAll: (t: number) => void = () => undefined;
    const all = new Promise<number>((r) => (resolveAll = r));
    const informer = new Informer<KubeObject>(
      httpSource(http, {
        path: `/api/v1/namespaces/${ns}/secrets`,
        labelSelector: 'bootstrap.oscar.dev/config',
        metadataOnly: true,
      }),
      {
        onAdd: (s) => {
          if (!seen.has(s.metadata.name)) seen.set(s.metadata.name, performance.now());
          if (seen.size === N) resolveAll(performance.now());
        },
      },
      { name: `bench secrets ${ns}` },
    );
    informer.start();
    return { all, stop: () => informer.stop() };
  };
  const metrics = async (): Promise<HistogramSet> =>
    requestLatencies(await getRaw(kc, '/metrics'), ['secrets', 'oscarconfigs', 'events']);

  const report = async (
    controller: ControllerProcess,
    before: HistogramSet,
    cpu0: { api: number; ctl: number },
    wallMs: number,
    clientCreates: boolean,
  ): Promise<void> => {
    const writes = writesOf(diffHistograms(before, await metrics()));
    let total = 0;
    const rows: string[] = [];
    for (const [k, n] of [...writes].sort()) {
      const client = clientCreates && k === 'APPLY oscarconfigs';
      if (!client) total += n;
      rows.push(
        `    ${k.padEnd(28)} ${String(n).padStart(6)}${client ? "  (the clients' creates, not counted)" : ''}`,
      );
    }
    const apiCpu = (await cpuOf(apiserverPid)) - cpu0.api;
    const ctlCpu = (await cpuOf(controller.pid)) - cpu0.ctl;
    say(
      `  API writes per machine: ${(total / N).toFixed(2)} (the API server's request counts, write verbs):`,
    );
    for (const r of rows) say(r);
    say(`  controller's own count of its writes: ${String(await controller.writes())}`);
    say(
      `  kube-apiserver CPU: ${apiCpu.toFixed(1)} s over ${(wallMs / 1000).toFixed(1)} s = ${((apiCpu / N) * 1000).toFixed(1)} ms per machine${clientCreates ? " (the clients' creates included)" : ''}`,
    );
    say(
      `  controller CPU: ${ctlCpu.toFixed(1)} s = ${((ctlCpu / N) * 1000).toFixed(1)} ms per machine`,
    );
    say(`  controller peak RSS (VmHWM): ${((await controller.hwm()) / 1048576).toFixed(1)} MiB`);
    // Idle: nothing changes; the controller must write nothing.
    const idleBefore = await metrics();
    const w0 = await controller.writes();
    await sleep(IDLE_S * 1000);
    const idleWrites = writesOf(diffHistograms(idleBefore, await metrics()));
    const idleTotal = [...idleWrites.values()].reduce((a, b) => a + b, 0);
    say(
      `  idle ${String(IDLE_S)} s afterwards: ${String(idleTotal)} write requests at the API server, ${String((await controller.writes()) - w0)} by the controller`,
    );
  };

  say(
    `oscar per-machine bootstrap benchmark, ${String(N)} OscarConfigs (${new Date().toISOString()})`,
  );
  const t = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

  if (PHASES.has('1')) {
    const ns = `bench-bs-${RUN}-a`;
    await prepare(ns);
    const controller = new ControllerProcess(
      entry,
      env.kubeconfigPath,
      ns,
      await freePort('127.0.0.1'),
    );
    await controller.ready();
    await sleep(2000); // the OSCs' own Secrets and status
    const seen = new Map<string, number>();
    const answered = new Map<string, number>();
    const w = watchSecrets(ns, seen);
    const before = await metrics();
    const cpu0 = { api: await cpuOf(apiserverPid), ctl: await cpuOf(controller.pid) };
    const t0 = performance.now();
    const createMs = await createConfigs(ns, answered);
    const allAt = await w.all;
    const per = [...answered]
      .map(([name, at]) => (seen.get(name) ?? NaN) - at)
      .sort((a, b) => a - b);
    say();
    say("phase 1 — the clients' view (controller running while 16 clients create the configs):");
    say(`  creates alone: ${t(createMs)} (${(N / (createMs / 1000)).toFixed(0)}/s)`);
    say(`  first create → all ${String(N)} Secrets: ${t(allAt - t0)}`);
    say(
      `  create answered → its Secret (per machine): p50 ${pct(per, 50).toFixed(0)} ms, p99 ${pct(per, 99).toFixed(0)} ms, max ${pct(per, 100).toFixed(0)} ms`,
    );
    await report(controller, before, cpu0, allAt - t0, true);
    await w.stop();
    await controller.stop();
  }

  if (PHASES.has('2')) {
    const ns = `bench-bs-${RUN}-b`;
    await prepare(ns);
    const answered = new Map<string, number>();
    const createMs = await createConfigs(ns, answered);
    log(
      `phase 2: ${String(N)} configs created in ${t(createMs)} (${String(answered.size)} answered); starting a fresh controller`,
    );
    const seen = new Map<string, number>();
    const w = watchSecrets(ns, seen);
    await sleep(1000);
    const before = await metrics();
    const t0 = performance.now();
    const controller = new ControllerProcess(
      entry,
      env.kubeconfigPath,
      ns,
      await freePort('127.0.0.1'),
    );
    const cpu0 = { api: await cpuOf(apiserverPid), ctl: 0 };
    const allAt = await w.all;
    const first = Math.min(...seen.values());
    const per = [...seen.values()].map((v) => v - first).sort((a, b) => a - b);
    say();
    say("phase 2 — the controller's own throughput (configs exist, a fresh controller starts):");
    say(
      `  controller start → all ${String(N)} Secrets: ${t(allAt - t0)} (${(N / ((allAt - t0) / 1000)).toFixed(0)} machines/s)`,
    );
    say(
      `  first Secret → each Secret: p50 ${pct(per, 50).toFixed(0)} ms, p99 ${pct(per, 99).toFixed(0)} ms`,
    );
    await report(controller, before, cpu0, allAt - t0, false);
    await w.stop();
    // Deleting the configs: the controller deletes each token, the garbage collector each Secret.
    const td = performance.now();
    const delBefore = await metrics();
    await http.request(
      'DELETE',
      `/apis/bootstrap.oscar.dev/v1alpha1/namespaces/${ns}/oscarconfigs`,
    );
    for (;;) {
      const list = await http.request<{ items: KubeObject[] | null }>(
        'GET',
        '/api/v1/namespaces/kube-system/secrets',
        {
          query: { labelSelector: 'bootstrap.oscar.dev/config-uid', limit: 5000 },
          accept: 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1',
        },
      );
      const ours = (list.items ?? []).filter((x) =>
        (x.metadata.annotations?.['bootstrap.oscar.dev/config'] ?? '').startsWith(`${ns}/`),
      );
      if (ours.length === 0) break;
      await sleep(250);
    }
    const delWrites = writesOf(diffHistograms(delBefore, await metrics()));
    say(
      `  delete all configs → all tokens gone: ${t(performance.now() - td)}; DELETE secrets ${String(delWrites.get('DELETE secrets') ?? 0)} (tokens by the controller, Secrets by the garbage collector)`,
    );
    await controller.stop();
  }

  if (!attach) await env.stop();
  http.close();
  process.stdout.write(`${out.join('\n')}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
