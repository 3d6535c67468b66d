// Controller benchmark against the real test API server (hack/testenv):
//   1. create N OperatingSystemConfigs (~40 files, ~10 units each); time until every Secret
//      exists and every OSC is Ready for its generation;
//   2. change one file in M of them; per change, the latency from the update request to the
//      Secret's checksum annotation changing (both from watch timestamps in this process);
//   3. the controller process's peak RSS (VmHWM).
// Also times the creates alone, to show when the API server rather than the controller is the limit.
//
//   npm run build && node --import tsx hack/bench/controller.ts [--oscs 1000] [--changes 100] [--concurrency 8]
// Env: OSCAR_TESTENV_STATE attaches to a running test cluster instead of starting one.
import { spawn } from 'node:child_process';
import { access, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import { API_VERSION, OSC_KIND, type OperatingSystemConfigSpec } from '../../api/schema.js';
import { ANNOTATION_CHECKSUM, LABEL_OSC } from '../../api/secret.js';
import { CONTENT_APPLY_PATCH, HttpKubeClient } from '../../kube/client.js';
import { dropManagedFields, httpSource, Informer } from '../../controller/kube/informer.js';
import type { KubeObject, OscObject } from '../../controller/kube/types.js';
import { oscPath } from '../../controller/kube/writer.js';
import { attachTestEnv, startTestEnv, type TestEnv } from '../testenv/testenv.js';

const { values: opts } = parseArgs({
  options: {
    oscs: { type: 'string', default: '1000' },
    changes: { type: 'string', default: '100' },
    concurrency: { type: 'string', default: '16' },
    files: { type: 'string', default: '40' },
    units: { type: 'string', default: '10' },
  },
});
const N = Number(opts.oscs);
const M = Math.min(N, Number(opts.changes));
const FILES = Number(opts.files);
const UNITS = Number(opts.units);
const NS = `bench-${Date.now().toString(36)}`;
const repoRoot = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
const log = (m: string): void => {
  process.stderr.write(`[bench] ${m}\n`);
};

function spec(i: number, generation = 0): OperatingSystemConfigSpec {
  const files = Array.from({ length: FILES }, (_, f) => ({
    path: `/etc/bench/app-${String(f)}.conf`,
    permissions: '0644',
    content: {
      inline: {
        data: `# config ${String(f)} of node pool ${String(i)}\n${'key=value\n'.repeat(40)}gen=${f === 0 ? String(generation) : '0'}\n`,
      },
    },
  }));
  const units = Array.from({ length: UNITS }, (_, u) => ({
    name: `bench-${String(u)}.service`,
    content: `[Unit]\nDescription=bench ${String(u)}\n\n[Service]\nExecStart=/bin/sleep infinity\n\n[Install]\nWantedBy=multi-user.target\n`,
    filePaths: [`/etc/bench/app-${String(u)}.conf`],
  }));
  return { type: 'ubuntu', purpose: 'reconcile', files, units };
}

async function pool<T>(items: T[], n: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < items.length) {
        const item = items[next++] as T;
        await fn(item);
      }
    }),
  );
}

function pct(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}

async function main(): Promise<void> {
  const attach = process.env.OSCAR_TESTENV_STATE;
  const env: TestEnv = attach ? await attachTestEnv(attach) : await startTestEnv({ log });
  const kc = new KubeConfig();
  kc.loadFromFile(env.kubeconfigPath);
  const http = new HttpKubeClient(kc);
  let stopInformers = (): Promise<void> => Promise.resolve();
  let child: ReturnType<typeof spawn> | undefined;
  try {
    await http
      .request('POST', '/api/v1/namespaces', { body: { metadata: { name: NS } } })
      .catch(() => undefined);

    // Watch state, timestamped in this process.
    const ready = new Set<string>();
    const secrets = new Map<string, { checksum: string; at: number }>();
    const secretChanged = new Map<string, (at: number, checksum: string) => void>();
    let allDone: () => void = () => undefined;
    const done = new Promise<void>((r) => (allDone = r));
    const check = (): void => {
      if (ready.size >= N && secrets.size >= N) allDone();
    };
    // Informers (relist/reconnect built in): a plain watch can be dropped by a busy API server,
    // and the bench would wait forever.
    const oscSeen = new Map<string, (at: number) => void>();
    const onOsc = (o: OscObject): void => {
      oscSeen.get(`${o.metadata.name}@${String(o.metadata.generation)}`)?.(performance.now());
      const r = o.status?.conditions?.find((c) => c.type === 'Ready');
      if (r?.status === 'True' && o.status?.observedGeneration === o.metadata.generation) {
        ready.add(o.metadata.name);
      } else ready.delete(o.metadata.name);
      check();
    };
    const oscInformer = new Informer<OscObject>(
      httpSource(http, { path: `/apis/${API_VERSION}/namespaces/${NS}/operatingsystemconfigs` }),
      {
        onAdd: onOsc,
        onUpdate: (_, o) => {
          onOsc(o);
        },
      },
      { name: 'bench-oscs', transform: dropManagedFields },
    );
    const onSecret = (obj: KubeObject): void => {
      const at = performance.now();
      const osc = obj.metadata.labels?.[LABEL_OSC] ?? '';
      const checksum = obj.metadata.annotations?.[ANNOTATION_CHECKSUM] ?? '';
      const before = secrets.get(osc);
      secrets.set(osc, { checksum, at });
      if (before && before.checksum !== checksum) secretChanged.get(osc)?.(at, checksum);
      check();
    };
    const secretInformer = new Informer<KubeObject>(
      httpSource(http, {
        path: `/api/v1/namespaces/${NS}/secrets`,
        labelSelector: LABEL_OSC,
        metadataOnly: true,
      }),
      {
        onAdd: onSecret,
        onUpdate: (_, o) => {
          onSecret(o);
        },
      },
      { name: 'bench-secrets', transform: dropManagedFields },
    );
    oscInformer.start();
    secretInformer.start();
    stopInformers = async () => {
      await Promise.all([oscInformer.stop(), secretInformer.stop()]);
    };

    // The controller as its own process, so its memory is its own, compiled as it ships (tsx
    // would add its transpiler to the RSS).
    const entry = join(repoRoot, 'dist', 'cli', 'oscar.js');
    try {
      await access(entry);
    } catch {
      throw new Error(`${entry} is missing: run "npm run build" first`);
    }
    child = spawn(
      process.execPath,
      [
        entry,
        'controller',
        '--kubeconfig',
        env.kubeconfigPath,
        '--namespace',
        NS,
        '--metrics-addr=0',
        `--concurrency=${opts.concurrency}`,
        '--log-level=warn',
      ],
      { stdio: ['ignore', 'inherit', 'inherit'] },
    );
    const pid = child.pid;
    if (pid === undefined) throw new Error('could not start the controller');
    await new Promise((r) => setTimeout(r, 3000)); // let it list (nothing yet) and watch

    const names = Array.from({ length: N }, (_, i) => `pool-${String(i).padStart(4, '0')}`);
    const apply = (name: string, s: OperatingSystemConfigSpec): Promise<unknown> =>
      http.request('PATCH', oscPath(NS, name), {
        query: { fieldManager: 'bench', force: true },
        contentType: CONTENT_APPLY_PATCH,
        body: {
          apiVersion: API_VERSION,
          kind: OSC_KIND,
          metadata: { name, namespace: NS },
          spec: s,
        },
      });

    log(`creating ${String(N)} OSCs (${String(FILES)} files, ${String(UNITS)} units each)`);
    const t0 = performance.now();
    await pool(names, 16, async (name) => {
      await apply(name, spec(names.indexOf(name)));
    });
    const createdMs = performance.now() - t0;
    log(`created in ${(createdMs / 1000).toFixed(1)} s; waiting for Secrets and Ready`);
    await done;
    const convergeMs = performance.now() - t0;

    // Changes, one at a time, spaced so each latency is its own.
    const latencies: number[] = [];
    const apiLatencies: number[] = [];
    for (const name of names.slice(0, M)) {
      const i = names.indexOf(name);
      // The API server's own share: the update request until its watch event arrives here.
      const seen = new Promise<number>((resolve) => {
        oscSeen.set(`${name}@2`, resolve);
      });
      const changed = new Promise<number>((resolve) => {
        secretChanged.set(name, (at) => {
          resolve(at);
        });
      });
      const start = performance.now();
      await apply(name, spec(i, 1));
      const at = await changed;
      latencies.push(at - start);
      apiLatencies.push((await seen) - start);
      secretChanged.delete(name);
      oscSeen.delete(`${name}@2`);
    }
    latencies.sort((a, b) => a - b);
    apiLatencies.sort((a, b) => a - b);

    const status = await readFile(`/proc/${String(pid)}/status`, 'utf8');
    const hwmKb = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? NaN);

    const objSize = Buffer.byteLength(JSON.stringify(spec(0)));
    console.log('');
    console.log(
      `controller benchmark — ${String(N)} OSCs × ${String(FILES)} files / ${String(UNITS)} units (spec ≈ ${(objSize / 1024).toFixed(1)} KiB each)`,
    );
    console.log(
      `  create ${String(N)} OSCs (API only, 16 parallel):     ${(createdMs / 1000).toFixed(2)} s`,
    );
    console.log(
      `  all Secrets exist and all Ready (from first create): ${(convergeMs / 1000).toFixed(2)} s   (target 10 s)`,
    );
    console.log(
      `  update → Secret updated, ${String(M)} changes:  p50 ${pct(latencies, 50).toFixed(1)} ms   p99 ${pct(latencies, 99).toFixed(1)} ms   max ${(latencies.at(-1) ?? NaN).toFixed(1)} ms   (target p99 250 ms)`,
    );
    console.log(
      `  (API server alone: update → OSC watch event  p50 ${pct(apiLatencies, 50).toFixed(1)} ms   p99 ${pct(apiLatencies, 99).toFixed(1)} ms)`,
    );
    console.log(
      `  controller peak RSS (VmHWM):                           ${(hwmKb / 1024).toFixed(1)} MiB   (target 200 MB)`,
    );
  } finally {
    await stopInformers();
    child?.kill('SIGTERM');
    http.close();
    if (!attach) await env.stop();
  }
}

await main();
