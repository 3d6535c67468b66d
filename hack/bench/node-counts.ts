// status.nodes at fleet scale against the real test API server (hack/testenv): one reconcile OSC,
// N OperatingSystemConfigNodes that report following it (objects written by this bench, no agent
// processes: what the OSC controller sees of a rollout is their reports), the controller as it
// ships (dist/, its own process). Every node reports revision 1; then every node reports the new
// checksum, 16 reports in flight (a rollout's reports, as fast as the API server takes them).
// Printed: the OSC's status writes while the reports arrive (the API server's own counters), per
// second; the time from the last report until status.nodes counts every node updated; the
// controller's CPU and peak RSS.
//
//   npm run build && flock /tmp/oscar-heavy.lock nice -n 10 node --import tsx hack/bench/node-counts.ts \
//     [--nodes 2000] [--entry dist/cli/oscar.js]
// Env: OSCAR_TESTENV_STATE attaches to a running test cluster instead of starting one.
import { spawn, type ChildProcess } from 'node:child_process';
import { access, readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import type { OperatingSystemConfigStatus } from '../../api/schema.js';
import { CONTENT_APPLY_PATCH, CONTENT_MERGE_PATCH, HttpKubeClient } from '../../kube/client.js';
import { attachTestEnv, startTestEnv, type TestEnv } from '../testenv/testenv.js';
import { readState } from '../testenv/state.js';
import { getRaw } from './apiserver-metrics.js';

const repoRoot = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
const { values: opts } = parseArgs({
  options: {
    nodes: { type: 'string', default: '2000' },
    entry: { type: 'string', default: join(repoRoot, 'dist', 'cli', 'oscar.js') },
  },
});
const N = Number(opts.nodes);
const CLIENTS = 16;
const OSC = 'fleet';
const GROUP = '/apis/oscar.dev/v1alpha1';
const log = (m: string): void => {
  process.stderr.write(`[bench] ${new Date().toISOString().slice(11, 19)} ${m}\n`);
};

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
  const apiserverPid = (await readState(env.stateFile)).apiserver.ref?.pid;
  const ns = `bench-counts-${Date.now().toString(36)}`;
  const names = Array.from({ length: N }, (_, i) => `${ns}-n${String(i).padStart(5, '0')}`);
  let controller: ChildProcess | undefined;
  const oscStatus = async (): Promise<OperatingSystemConfigStatus | undefined> =>
    (
      await api.request<{ status?: OperatingSystemConfigStatus }>(
        'GET',
        `${GROUP}/namespaces/${ns}/operatingsystemconfigs/${OSC}`,
      )
    ).status;
  const until = async (what: string, ok: (s: OperatingSystemConfigStatus) => boolean) => {
    for (let i = 0; ; i++) {
      const s = await oscStatus().catch(() => undefined);
      if (s && ok(s)) return s;
      if (i % 20 === 0) log(`${what}: nodes ${JSON.stringify(s?.nodes ?? {})}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const report = (name: string, checksum: string): Promise<unknown> =>
    api.request('PATCH', `${GROUP}/operatingsystemconfignodes/${name}/status`, {
      contentType: CONTENT_MERGE_PATCH,
      body: {
        status: {
          oscRef: { namespace: ns, name: OSC },
          appliedChecksum: checksum,
          lastAppliedTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
          conditions: [
            {
              type: 'Degraded',
              status: 'False',
              reason: 'Applied',
              message: 'simulated',
              lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
            },
          ],
        },
      },
    });
  const applyOsc = (version: number): Promise<unknown> =>
    api.request('PATCH', `${GROUP}/namespaces/${ns}/operatingsystemconfigs/${OSC}`, {
      query: { fieldManager: 'bench', force: true },
      contentType: CONTENT_APPLY_PATCH,
      body: {
        apiVersion: 'oscar.dev/v1alpha1',
        kind: 'OperatingSystemConfig',
        metadata: { name: OSC, namespace: ns },
        spec: {
          type: 'debian',
          purpose: 'reconcile',
          files: [
            { path: '/etc/fleet.conf', content: { inline: { data: `v${String(version)}\n` } } },
          ],
        },
      },
    });
  try {
    await api.request('POST', '/api/v1/namespaces', { body: { metadata: { name: ns } } });
    controller = spawn(
      process.execPath,
      [entry, 'controller', '--kubeconfig', env.kubeconfigPath, '--namespace', ns],
      { stdio: ['ignore', 'ignore', 'inherit'] },
    );
    await applyOsc(1);
    const v1 = (await until('revision 1 rendered', (s) => s.checksum !== undefined)).checksum ?? '';
    log(`creating ${String(N)} node reports`);
    await pool(names, CLIENTS, async (name) => {
      await api.request('POST', `${GROUP}/operatingsystemconfignodes`, {
        body: {
          apiVersion: 'oscar.dev/v1alpha1',
          kind: 'OperatingSystemConfigNode',
          metadata: { name, labels: { 'bench.oscar.dev/run': ns } },
        },
      });
      await report(name, v1);
    });
    await until('every node on revision 1', (s) => s.nodes?.updated === N);
    await applyOsc(2);
    const v2 = (await until('revision 2 rendered', (s) => !!s.checksum && s.checksum !== v1))
      .checksum;
    await new Promise((r) => setTimeout(r, 2000)); // the new rendering's own status writes settle
    const w0 = statusWrites(await getRaw(kc, '/metrics'));
    const c0 = await procStat(controller.pid);
    const a0 = await procStat(apiserverPid);
    log(`${String(N)} nodes report revision 2`);
    const t0 = performance.now();
    await pool(names, CLIENTS, async (name) => {
      await report(name, v2 ?? '');
    });
    const reportsMs = performance.now() - t0;
    await until('every node counted on revision 2', (s) => s.nodes?.updated === N);
    const countedMs = performance.now() - t0;
    const w1 = statusWrites(await getRaw(kc, '/metrics'));
    const c1 = await procStat(controller.pid);
    const a1 = await procStat(apiserverPid);
    const writes = w1 - w0;
    const line = (label: string, value: string, target = ''): void => {
      process.stdout.write(`${label.padEnd(58)} ${value.padEnd(30)} ${target}\n`);
    };
    process.stdout.write(
      `\nstatus.nodes while ${String(N)} nodes report a new revision (${String(CLIENTS)} reports in flight), controller ${entry}\n\n`,
    );
    line(
      'reports (first → last answered)',
      `${(reportsMs / 1000).toFixed(1)} s (${(N / (reportsMs / 1000)).toFixed(0)}/s)`,
    );
    line(
      'OSC status writes, first report → all counted',
      `${String(writes)} (${(writes / (countedMs / 1000)).toFixed(2)} a second)`,
      '≤ ~1 a second, flat in N',
    );
    line(
      'last report answered → status counts every node',
      `${((countedMs - reportsMs) / 1000).toFixed(2)} s`,
    );
    line('kube-apiserver CPU in that window', `${(a1.cpu - a0.cpu).toFixed(1)} s`);
    line('controller CPU in that window', `${(c1.cpu - c0.cpu).toFixed(1)} s`);
    line(
      'controller peak RSS (VmHWM, whole run)',
      `${(c1.hwm / 1048576).toFixed(1)} MiB`,
      '< 300 MB',
    );
  } finally {
    controller?.kill('SIGTERM');
    await api
      .request('DELETE', `${GROUP}/operatingsystemconfignodes`, {
        query: { labelSelector: `bench.oscar.dev/run=${ns}` },
      })
      .catch(() => undefined);
    await api.request('DELETE', `/api/v1/namespaces/${ns}`).catch(() => undefined);
    api.close();
    if (!attach) await env.stop();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
