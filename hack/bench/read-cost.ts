// What the controller's reads of OSCs cost the API server, next to the create of an OSC: its
// initial list of N OSCs in each way the API offers, and what a watcher adds to every status
// write (the watch event the write causes). API-server CPU from /proc (utime + stime of
// kube-apiserver, less what it uses idle over the same wall time), in R interleaved rounds:
//   list (limit 50)         the controller's list as it ships: pages of 50, consistent reads;
//   list (limit 500)        the same in pages of 500;
//   list (rv=0)             one unpaged list from the watch cache (resourceVersion=0);
//   list (metadata only)    PartialObjectMetadataList, pages of 50 (managedFields included);
//   watch-list              the streaming list: watch with sendInitialEvents=true and
//                           resourceVersionMatch=NotOlderThan until the initial-events bookmark;
//   status, W watchers      K status writes (server-side apply, as the controller's) while W
//                           watchers of the namespace's OSCs (full objects) are open: 0, 1, 3,
//                           and 1 metadata-only watcher;
//   create OSC (apply)      the reference: K creates of the bench OSC (in a namespace of their
//                           own), no watcher open, and with one watcher of that namespace.
//
//   flock /tmp/oscar-bench.lock node --import tsx hack/bench/read-cost.ts [--oscs 500] [--count 200] [--rounds 3]
// Env: OSCAR_TESTENV_STATE attaches to a running test cluster instead of starting one.
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import { API_VERSION, OSC_KIND } from '../../api/schema.js';
import {
  ACCEPT_METADATA,
  ACCEPT_METADATA_LIST,
  CONTENT_APPLY_PATCH,
  HttpKubeClient,
} from '../../kube/client.js';
import { dropManagedFields, httpSource, Informer } from '../../controller/kube/informer.js';
import type { KubeObject } from '../../controller/kube/types.js';
import { oscPath } from '../../controller/osc/writer.js';
import { attachTestEnv, startTestEnv, type TestEnv } from '../testenv/testenv.js';
import { readState } from '../testenv/state.js';
import { benchOscSpec, benchOscStatus, inPool } from './support/osc.js';

const { values: opts } = parseArgs({
  options: {
    oscs: { type: 'string', default: '500' },
    count: { type: 'string', default: '200' },
    rounds: { type: 'string', default: '3' },
  },
});
const N = Number(opts.oscs);
const K = Number(opts.count);
const ROUNDS = Number(opts.rounds);
const CLIENTS = 16;
const log = (m: string): void => {
  process.stderr.write(`[read-cost] ${new Date().toISOString().slice(11, 19)} ${m}\n`);
};
type Json = Record<string, unknown>;

const pool = async (n: number, fn: (i: number) => Promise<void>): Promise<void> => {
  await inPool(n, CLIENTS, fn);
};

async function cpuOf(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${String(pid)}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? ((s[(s.length - 1) >> 1] ?? 0) + (s[s.length >> 1] ?? 0)) / 2 : NaN;
}

async function main(): Promise<void> {
  const attach = process.env.OSCAR_TESTENV_STATE;
  const env: TestEnv = attach ? await attachTestEnv(attach) : await startTestEnv({ log });
  const kc = new KubeConfig();
  kc.loadFromFile(env.kubeconfigPath);
  const http = new HttpKubeClient(kc);
  const pid = (await readState(env.stateFile)).apiserver.ref?.pid;
  if (pid === undefined) throw new Error('no kube-apiserver pid in the test cluster state');
  const ns = `read-cost-${Date.now().toString(36)}`;
  const path = `/apis/${API_VERSION}/namespaces/${ns}/operatingsystemconfigs`;
  const samples = new Map<string, number[]>();
  const watchers: Informer<KubeObject>[] = [];
  try {
    await http.request('POST', '/api/v1/namespaces', { body: { metadata: { name: ns } } });
    const c0 = await cpuOf(pid);
    const t0 = performance.now();
    await new Promise((r) => setTimeout(r, 10_000));
    const idlePerSecond = ((await cpuOf(pid)) - c0) / ((performance.now() - t0) / 1000);
    log(`idle kube-apiserver: ${(idlePerSecond * 1000).toFixed(1)} ms of CPU a second`);

    /** CPU per `per` items of what fn does, less the idle API server's share. */
    const measure = async (label: string, per: number, fn: () => Promise<void>): Promise<void> => {
      const c = await cpuOf(pid);
      const t = performance.now();
      await fn();
      const wall = (performance.now() - t) / 1000;
      const used = (await cpuOf(pid)) - c - idlePerSecond * wall;
      const each = (1000 * used) / per;
      samples.set(label, [...(samples.get(label) ?? []), each]);
      log(`${label.padEnd(30)} ${each.toFixed(3)} ms CPU per item (${wall.toFixed(1)} s)`);
    };
    const apply = (name: string, body: Json, sub = ''): Promise<unknown> =>
      http.request('PATCH', `${oscPath(ns, name)}${sub}`, {
        query: { fieldManager: sub ? 'oscar-controller' : 'bench', force: true },
        contentType: CONTENT_APPLY_PATCH,
        accept: ACCEPT_METADATA,
        body: {
          apiVersion: API_VERSION,
          kind: OSC_KIND,
          metadata: { name, namespace: ns },
          ...body,
        },
      });
    log(`creating ${String(N)} OSCs`);
    await pool(N, (i) =>
      apply(`osc-${String(i)}`, { spec: benchOscSpec(i) }).then(() => undefined),
    );

    const pagedList = async (limit: number, accept?: string): Promise<void> => {
      let token: string | undefined;
      let n = 0;
      do {
        const page = await http.request<{
          items: unknown[] | null;
          metadata: { continue?: string };
        }>('GET', path, { query: { limit, continue: token }, accept, timeoutMs: 120_000 });
        n += page.items?.length ?? 0;
        token = page.metadata.continue || undefined;
      } while (token);
      if (n !== N) throw new Error(`listed ${String(n)} of ${String(N)}`);
    };
    const watchList = async (): Promise<void> => {
      const abort = new AbortController();
      let n = 0;
      await http
        .stream(
          path,
          {
            query: {
              watch: 1,
              sendInitialEvents: true,
              resourceVersionMatch: 'NotOlderThan',
              allowWatchBookmarks: true,
            },
            signal: abort.signal,
            timeoutMs: 120_000,
          },
          (line) => {
            const e = JSON.parse(line) as {
              type: string;
              object: { metadata?: { annotations?: Record<string, string> } };
            };
            if (e.type === 'ADDED') n++;
            const end = e.object.metadata?.annotations?.['k8s.io/initial-events-end'] === 'true';
            if (e.type === 'BOOKMARK' && end) abort.abort();
          },
        )
        .catch((error: unknown) => {
          if (!abort.signal.aborted) throw error;
        });
      if (n !== N) throw new Error(`watch-list delivered ${String(n)} of ${String(N)}`);
    };
    const watch = (metadataOnly: boolean): Informer<KubeObject> => {
      const w = new Informer<KubeObject>(
        httpSource(http, { path, metadataOnly, pageSize: 50 }),
        {},
        { name: 'bench-watch', transform: dropManagedFields },
      );
      w.start();
      watchers.push(w);
      return w;
    };
    const stopWatchers = async (): Promise<void> => {
      await Promise.all(watchers.splice(0).map((w) => w.stop()));
    };
    const statusWrites = async (label: string, watch: () => Informer<KubeObject>[]) => {
      const open = watch();
      await Promise.all(open.map((w) => w.waitForSync()));
      await measure(label, K, () =>
        pool(K, (i) =>
          apply(`osc-${String(i)}`, { status: benchOscStatus(label) }, '/status').then(
            () => undefined,
          ),
        ),
      );
      await stopWatchers();
    };

    // The reference creates go to a namespace of their own (the lists above stay at N), with no
    // watcher and with one (as the controller's, or the controller bench's tracker).
    await http.request('POST', '/api/v1/namespaces', { body: { metadata: { name: `${ns}-new` } } });
    const creates = async (label: string, into: string, r: number, watched: boolean) => {
      if (watched) {
        const w = new Informer<KubeObject>(
          httpSource(http, {
            path: `/apis/${API_VERSION}/namespaces/${into}/operatingsystemconfigs`,
            pageSize: 50,
          }),
          {},
          { name: 'bench-watch', transform: dropManagedFields },
        );
        w.start();
        watchers.push(w);
        await w.waitForSync();
      }
      await measure(label, K, () =>
        pool(K, (i) =>
          http
            .request(
              'PATCH',
              oscPath(into, `new-${label.length.toString(36)}-${String(r)}-${String(i)}`),
              {
                query: { fieldManager: 'bench', force: true },
                contentType: CONTENT_APPLY_PATCH,
                accept: ACCEPT_METADATA,
                body: {
                  apiVersion: API_VERSION,
                  kind: OSC_KIND,
                  metadata: {
                    name: `new-${label.length.toString(36)}-${String(r)}-${String(i)}`,
                    namespace: into,
                  },
                  spec: benchOscSpec(i),
                },
              },
            )
            .then(() => undefined),
        ),
      );
      await stopWatchers();
    };
    for (let r = 0; r < ROUNDS; r++) {
      await measure('list (limit 50)', N, () => pagedList(50));
      await measure('list (limit 500)', N, () => pagedList(500));
      await measure('list (rv=0)', N, async () => {
        const list = await http.request<{ items: unknown[] }>('GET', path, {
          query: { resourceVersion: '0' },
          timeoutMs: 120_000,
        });
        if (list.items.length !== N) throw new Error('rv=0 list incomplete');
      });
      await measure('list (metadata only)', N, () => pagedList(50, ACCEPT_METADATA_LIST));
      await measure('watch-list', N, watchList);
      await statusWrites('status, no watcher', () => []);
      await statusWrites('status, 1 watcher', () => [watch(false)]);
      await statusWrites('status, 3 watchers', () => [watch(false), watch(false), watch(false)]);
      await statusWrites('status, 1 metadata watcher', () => [watch(true)]);
      await creates('create OSC (apply)', `${ns}-new`, r, false);
      await creates('create OSC (apply), 1 watcher', `${ns}-new`, r, true);
    }
    const ref = median(samples.get('create OSC (apply)') ?? []);
    const lines = [
      '',
      `API-server CPU per item: lists of ${String(N)} OSCs, ${String(K)} writes, ${String(ROUNDS)} rounds, ${String(CLIENTS)} clients (idle ${(idlePerSecond * 1000).toFixed(1)} ms/s taken out)`,
    ];
    for (const [label, xs] of samples) {
      const m = median(xs);
      lines.push(
        `  ${label.padEnd(30)} median ${m.toFixed(3).padStart(7)} ms (${xs.map((x) => x.toFixed(3)).join(', ')}) = ${(m / ref).toFixed(3)}× the create`,
      );
    }
    console.log(lines.join('\n'));
  } finally {
    await Promise.all(watchers.map((w) => w.stop()));
    await http.request('DELETE', `/api/v1/namespaces/${ns}`).catch(() => undefined);
    await http.request('DELETE', `/api/v1/namespaces/${ns}-new`).catch(() => undefined);
    http.close();
    if (!attach) await env.stop();
  }
}

await main();
