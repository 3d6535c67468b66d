// What each way of writing the controller's two objects per OSC costs the API server, in its own
// CPU (utime + stime of kube-apiserver from /proc, less what it uses idle over the same wall time),
// against the create of the OSC itself. In R interleaved rounds, each round:
//   create      K bench OSCs (40 files, 10 units, as hack/bench/controller.ts) by server-side apply
//               — the reference: "the create's own" cost;
//   secret-*    K new Secrets holding a ~25 KiB rendering (labels, annotations, owner reference as
//               controller/osc/secret-object.ts): by server-side apply (what the controller did)
//               and by POST (a plain create, what it does now); then each updated with a new
//               rendering, by server-side apply and by the controller's conditional JSON patch;
//   status-*    K status writes of a new OSC, each on its own freshly created OSC: server-side
//               apply (what the controller did), JSON merge patch with the resourceVersion as a
//               precondition, and PUT of the status subresource (the whole object sent back);
//   levers      the controller's writes with one request option changed each (issue 24): the
//               Secret POST and the status apply with fieldValidation=Ignore (no strict decode),
//               the status apply without force, with the smallest body (observedGeneration and
//               conditions only), with the whole object in the response (no metadata-only Accept);
//               each status variant on its own fresh OSCs, their order rotated every round;
// 16 clients in parallel. A watcher of the namespace's OSCs (full objects, as the controller
// watches them) runs throughout, so each write's watch event is part of its cost.
//
//   flock /tmp/oscar-bench.lock node --import tsx hack/bench/write-cost.ts [--count 200] [--rounds 3]
//     [--rows all|levers]   (levers: the create, the controller's writes and their variants only)
// Env: OSCAR_TESTENV_STATE attaches to a running test cluster instead of starting one.
import { parseArgs } from 'node:util';
import { attachCluster } from '../../test/support/cluster.js';
import { API_VERSION, OSC_KIND } from '../../api/schema.js';
import {
  ACCEPT_METADATA,
  CONTENT_APPLY_PATCH,
  CONTENT_JSON,
  CONTENT_JSON_PATCH,
  CONTENT_MERGE_PATCH,
  type Query,
} from '../../kube/client.js';
import { dropManagedFields, httpSource, Informer } from '../../controller/kube/informer.js';
import type { KubeObject } from '../../controller/kube/types.js';
import { oscPath } from '../../controller/osc/writer.js';
import { secretUpdatePatch } from '../../controller/osc/secret-object.js';
import { readState } from '../testenv/state.js';
import { benchOscSpec, benchOscStatus, inPool } from './support/osc.js';

const { values: opts } = parseArgs({
  options: {
    count: { type: 'string', default: '200' },
    rounds: { type: 'string', default: '3' },
    clients: { type: 'string', default: '16' },
    rows: { type: 'string', default: 'all' },
  },
});
if (opts.rows !== 'all' && opts.rows !== 'levers') throw new Error('--rows: all or levers');
const ALL_ROWS = opts.rows === 'all';
const K = Number(opts.count);
const ROUNDS = Number(opts.rounds);
const CLIENTS = Number(opts.clients);
const log = (m: string): void => {
  process.stderr.write(`[write-cost] ${new Date().toISOString().slice(11, 19)} ${m}\n`);
};
type Json = Record<string, unknown>;

const rendering = (v: string): string =>
  Buffer.from(
    Array.from({ length: 600 }, (_, i) => `line ${String(i)} of rendered cloud-config ${v}\n`).join(
      '',
    ),
  ).toString('base64');
const RENDERING = rendering('v1');
const RENDERING_2 = rendering('v2');

function secret(
  ns: string,
  name: string,
  owner: { name: string; uid: string },
  data = RENDERING,
): Json {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name,
      namespace: ns,
      labels: { 'oscar.dev/osc': owner.name, 'oscar.dev/purpose': 'reconcile' },
      annotations: {
        'oscar.dev/checksum': 'a'.repeat(64),
        'oscar.dev/data-checksum': 'b'.repeat(64),
      },
      ownerReferences: [
        {
          apiVersion: API_VERSION,
          kind: OSC_KIND,
          ...owner,
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    type: 'Opaque',
    data: { 'cloud-config': data },
  };
}

/** A status write of the controller's (server-side apply) with one request option changed. */
interface StatusVariant {
  label: string;
  query: Query;
  accept: string;
  status: () => Json;
}

const CONTROLLER_APPLY: Query = { fieldManager: 'oscar-controller', force: true };
const IGNORE: Query = { fieldValidation: 'Ignore' };

/** The smallest status the controller could write: what a client waits for, nothing else. */
function minimalStatus(): Json {
  const { observedGeneration, conditions } = benchOscStatus();
  return { observedGeneration, conditions };
}

/** What the controller sends (controller/osc/writer.ts). */
const CONTROLLER_STATUS: StatusVariant = {
  label: 'status (apply)',
  query: CONTROLLER_APPLY,
  accept: ACCEPT_METADATA,
  status: benchOscStatus,
};

const STATUS_VARIANTS: StatusVariant[] = [
  {
    label: 'status (apply, Ignore)',
    query: { ...CONTROLLER_APPLY, ...IGNORE },
    accept: ACCEPT_METADATA,
    status: benchOscStatus,
  },
  {
    label: 'status (apply, no force)',
    query: { fieldManager: 'oscar-controller' },
    accept: ACCEPT_METADATA,
    status: benchOscStatus,
  },
  {
    label: 'status (apply, minimal)',
    query: CONTROLLER_APPLY,
    accept: ACCEPT_METADATA,
    status: minimalStatus,
  },
  {
    label: 'status (apply, min+Ign)',
    query: { ...CONTROLLER_APPLY, ...IGNORE },
    accept: ACCEPT_METADATA,
    status: minimalStatus,
  },
  {
    label: 'status (apply, full resp)',
    query: CONTROLLER_APPLY,
    accept: CONTENT_JSON,
    status: benchOscStatus,
  },
];

async function cpuOf(pid: number): Promise<number> {
  const { readFile } = await import('node:fs/promises');
  const stat = await readFile(`/proc/${String(pid)}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

interface Created {
  name: string;
  uid: string;
  resourceVersion: string;
  object: Json;
}

async function main(): Promise<void> {
  const cluster = await attachCluster({ log });
  const { env, api: http } = cluster;
  const pid = (await readState(env.stateFile)).apiserver.ref?.pid;
  if (pid === undefined) throw new Error('no kube-apiserver pid in the test cluster state');
  const ns = `write-cost-${Date.now().toString(36)}`;
  const samples = new Map<string, number[]>();
  let idlePerSecond = 0;
  let watcher: Informer<KubeObject> | undefined;
  try {
    await http.request('POST', '/api/v1/namespaces', { body: { metadata: { name: ns } } });
    watcher = new Informer<KubeObject>(
      httpSource(http, { path: `/apis/${API_VERSION}/namespaces/${ns}/operatingsystemconfigs` }),
      {},
      { name: 'osc-watch', transform: dropManagedFields },
    );
    watcher.start();
    const c0 = await cpuOf(pid);
    const t0 = performance.now();
    await new Promise((r) => setTimeout(r, 10_000));
    idlePerSecond = (await cpuOf(pid)) - c0;
    idlePerSecond /= (performance.now() - t0) / 1000;
    log(`idle kube-apiserver: ${(idlePerSecond * 1000).toFixed(1)} ms of CPU a second`);

    const measure = async (label: string, fn: (i: number) => Promise<void>): Promise<void> => {
      const c = await cpuOf(pid);
      const t = performance.now();
      await inPool(K, CLIENTS, fn);
      const wall = (performance.now() - t) / 1000;
      const used = (await cpuOf(pid)) - c - idlePerSecond * wall;
      const perWrite = (1000 * used) / K;
      samples.set(label, [...(samples.get(label) ?? []), perWrite]);
      log(`${label.padEnd(24)} ${perWrite.toFixed(2)} ms CPU per write (${wall.toFixed(1)} s)`);
    };
    const createOscs = async (prefix: string, into: Created[], label?: string): Promise<void> => {
      const create = async (i: number): Promise<void> => {
        const name = `${prefix}-${String(i)}`;
        const stored = await http.request<Json & { metadata: Json }>('PATCH', oscPath(ns, name), {
          query: { fieldManager: 'bench', force: true },
          contentType: CONTENT_APPLY_PATCH,
          body: {
            apiVersion: API_VERSION,
            kind: OSC_KIND,
            metadata: { name, namespace: ns },
            spec: benchOscSpec(i),
          },
        });
        into[i] = {
          name,
          uid: String(stored.metadata.uid),
          resourceVersion: String(stored.metadata.resourceVersion),
          object: stored,
        };
      };
      if (label) await measure(label, create);
      else await inPool(K, CLIENTS, create);
    };

    for (let r = 0; r < ROUNDS; r++) {
      const base: Created[] = [];
      const forMerge: Created[] = [];
      const forPut: Created[] = [];
      await createOscs(`r${String(r)}-a`, base, 'create OSC (apply)');
      if (ALL_ROWS) {
        await createOscs(`r${String(r)}-m`, forMerge);
        await createOscs(`r${String(r)}-p`, forPut);
      }
      const forVariant: Created[][] = [];
      for (const [v] of STATUS_VARIANTS.entries()) {
        const into: Created[] = [];
        await createOscs(`r${String(r)}-v${String(v)}`, into);
        forVariant.push(into);
      }
      if (ALL_ROWS)
        await measure('secret (apply)', async (i) => {
          const o = base[i] as Created;
          await http.request('PATCH', `/api/v1/namespaces/${ns}/secrets/${o.name}-sa`, {
            query: { fieldManager: 'oscar-controller', force: true },
            contentType: CONTENT_APPLY_PATCH,
            accept: ACCEPT_METADATA,
            body: secret(ns, `${o.name}-sa`, { name: o.name, uid: o.uid }),
          });
        });
      // The controller's Secret create with and without fieldValidation=Ignore, in turn first, so
      // that neither always inherits the API server's leftover work from the batch before it.
      const posted: KubeObject[] = [];
      const postRuns = [
        { label: 'secret (POST)', suffix: 'post', query: {} },
        { label: 'secret (POST, Ignore)', suffix: 'posti', query: IGNORE },
      ];
      for (let k = 0; k < postRuns.length; k++) {
        const run = postRuns[(k + r) % postRuns.length] as (typeof postRuns)[0];
        await measure(run.label, async (i) => {
          const o = base[i] as Created;
          const stored = await http.request<KubeObject>(
            'POST',
            `/api/v1/namespaces/${ns}/secrets`,
            {
              query: { fieldManager: 'oscar-controller', ...run.query },
              accept: ACCEPT_METADATA,
              body: secret(ns, `${o.name}-${run.suffix}`, { name: o.name, uid: o.uid }),
            },
          );
          if (run.suffix === 'post') posted[i] = stored;
        });
      }
      if (ALL_ROWS)
        await measure('secret update (apply)', async (i) => {
          const o = base[i] as Created;
          await http.request('PATCH', `/api/v1/namespaces/${ns}/secrets/${o.name}-sa`, {
            query: { fieldManager: 'oscar-controller', force: true },
            contentType: CONTENT_APPLY_PATCH,
            accept: ACCEPT_METADATA,
            body: secret(ns, `${o.name}-sa`, { name: o.name, uid: o.uid }, RENDERING_2),
          });
        });
      if (ALL_ROWS)
        await measure('secret update (JSON patch)', async (i) => {
          const o = base[i] as Created;
          const existing = posted[i] as KubeObject;
          await http.request('PATCH', `/api/v1/namespaces/${ns}/secrets/${o.name}-post`, {
            query: { fieldManager: 'oscar-controller' },
            contentType: CONTENT_JSON_PATCH,
            accept: ACCEPT_METADATA,
            body: secretUpdatePatch(
              existing,
              secret(ns, `${o.name}-post`, { name: o.name, uid: o.uid }, RENDERING_2),
            ),
          });
        });
      // The controller's status write and its variants, in an order rotated every round.
      const statusRuns = [
        { variant: CONTROLLER_STATUS, oscs: base },
        ...STATUS_VARIANTS.map((variant, v) => ({ variant, oscs: forVariant[v] ?? [] })),
      ];
      for (let k = 0; k < statusRuns.length; k++) {
        const { variant, oscs } = statusRuns[(k + r) % statusRuns.length] as (typeof statusRuns)[0];
        await measure(variant.label, async (i) => {
          const o = oscs[i] as Created;
          await http.request('PATCH', `${oscPath(ns, o.name)}/status`, {
            query: variant.query,
            contentType: CONTENT_APPLY_PATCH,
            accept: variant.accept,
            body: {
              apiVersion: API_VERSION,
              kind: OSC_KIND,
              metadata: { name: o.name, namespace: ns },
              status: variant.status(),
            },
          });
        });
      }
      if (!ALL_ROWS) continue;
      await measure('status (merge patch)', async (i) => {
        const o = forMerge[i] as Created;
        await http.request('PATCH', `${oscPath(ns, o.name)}/status`, {
          query: { fieldManager: 'oscar-controller' },
          contentType: CONTENT_MERGE_PATCH,
          accept: ACCEPT_METADATA,
          body: { metadata: { resourceVersion: o.resourceVersion }, status: benchOscStatus() },
        });
      });
      await measure('status (PUT)', async (i) => {
        const o = forPut[i] as Created;
        await http.request('PUT', `${oscPath(ns, o.name)}/status`, {
          query: { fieldManager: 'oscar-controller' },
          accept: ACCEPT_METADATA,
          body: { ...o.object, status: benchOscStatus() },
        });
      });
    }
    const lines = [
      '',
      `API-server CPU per write, ${String(K)} writes × ${String(ROUNDS)} rounds, ${String(CLIENTS)} clients (idle ${(idlePerSecond * 1000).toFixed(1)} ms/s taken out)`,
    ];
    const ref = median(samples.get('create OSC (apply)') ?? []);
    for (const [label, xs] of samples) {
      const m = median(xs);
      lines.push(
        `  ${label.padEnd(24)} median ${m.toFixed(2).padStart(6)} ms (${xs.map((x) => x.toFixed(2)).join(', ')}) = ${(m / ref).toFixed(2)}× the create`,
      );
    }
    console.log(lines.join('\n'));
  } finally {
    await watcher?.stop();
    await http.request('DELETE', `/api/v1/namespaces/${ns}`).catch(() => undefined);
    http.close();
    await cluster.stop();
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? ((s[(s.length - 1) >> 1] ?? 0) + (s[s.length >> 1] ?? 0)) / 2 : NaN;
}

await main();
