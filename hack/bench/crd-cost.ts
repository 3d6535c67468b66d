// What the OperatingSystemConfig CRD's schema costs the API server per write. The same bench
// OSC (as hack/bench/controller.ts creates: 40 files, 10 units, ≈24 KiB) is written to copies of
// the CRD that differ in one thing each, under their own API groups, and — as the floor — as the
// data of a Secret:
//   full          the CRD as deploy/crds ships it
//   no-cel        without its x-kubernetes-validations (CEL) rules
//   no-listmap    list-type map lists made atomic (no x-kubernetes-list-map-keys)
//   no-cel-listmap both
//   open          spec and status without a schema (x-kubernetes-preserve-unknown-fields)
// For each: K creates by server-side apply (what the bench and kubectl apply do), K creates by
// POST, K status writes by server-side apply (as the controller writes them) and by JSON merge
// patch, and K finalizer writes both ways, 16 clients in parallel; prints writes/s (wall clock)
// and the API server's own mean latency per request (apiserver_request_duration_seconds).
// Objects are deleted with their namespace at the end (finalizers "bench/x" are cleared first).
//
//   flock /tmp/oscar-bench.lock node --import tsx hack/bench/crd-cost.ts [--count 300]
// Env: OSCAR_TESTENV_STATE attaches to a running test cluster instead of starting one.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { attachCluster } from '../../test/support/cluster.js';
import { parse, stringify } from 'yaml';
import { CONTENT_APPLY_PATCH, CONTENT_MERGE_PATCH } from '../../kube/client.js';
import { applyCrds } from '../testenv/testenv.js';
import { benchOscSpec, benchOscStatus, inPool } from './support/osc.js';
import { diffHistograms, getRaw, requestLatencies } from './apiserver-metrics.js';

const { values: opts } = parseArgs({
  options: {
    count: { type: 'string', default: '300' },
    clients: { type: 'string', default: '16' },
  },
});
const K = Number(opts.count);
const CLIENTS = Number(opts.clients);
const repoRoot = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
const log = (m: string): void => {
  process.stderr.write(`[crd-cost] ${new Date().toISOString().slice(11, 19)} ${m}\n`);
};

type Json = Record<string, unknown>;

/** Deep copy with fn applied to every object node (after its children). */
function mapSchema(node: unknown, fn: (o: Json) => Json): unknown {
  if (Array.isArray(node)) return node.map((n) => mapSchema(n, fn));
  if (node && typeof node === 'object') {
    const out: Json = {};
    for (const [k, v] of Object.entries(node)) out[k] = mapSchema(v, fn);
    return fn(out);
  }
  return node;
}

const VARIANTS: Record<string, (schema: Json) => Json> = {
  full: (s) => s,
  'no-cel': (s) =>
    mapSchema(s, (o) => {
      delete o['x-kubernetes-validations'];
      return o;
    }) as Json,
  'no-listmap': (s) =>
    mapSchema(s, (o) => {
      if (o['x-kubernetes-list-type'] === 'map') {
        o['x-kubernetes-list-type'] = 'atomic';
        delete o['x-kubernetes-list-map-keys'];
      }
      return o;
    }) as Json,
  'no-cel-listmap': (s) => VARIANTS['no-listmap']?.(VARIANTS['no-cel']?.(s) ?? s) ?? s,
  open: (s) => {
    const props = s.properties as Json;
    return {
      ...s,
      properties: {
        ...props,
        spec: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
        status: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
      },
    };
  },
};

async function main(): Promise<void> {
  const cluster = await attachCluster({ log });
  const { env, api: http, kubeConfig: kc } = cluster;
  const dir = await mkdtemp(join(tmpdir(), 'oscar-crd-cost-'));
  const ns = `crd-cost-${Date.now().toString(36)}`;
  const lines: string[] = [];
  try {
    const base = parse(
      await readFile(
        join(repoRoot, 'deploy', 'crds', 'oscar.dev_operatingsystemconfigs.yaml'),
        'utf8',
      ),
    ) as Json;
    const groups: Record<string, string> = {};
    for (const [variant, fn] of Object.entries(VARIANTS)) {
      const crd = structuredClone(base);
      const group = `${variant}.bench.oscar.dev`;
      groups[variant] = group;
      const s = crd.spec as Json;
      s.group = group;
      (crd.metadata as Json).name = `operatingsystemconfigs.${group}`;
      for (const v of s.versions as Json[]) {
        const schema = v.schema as Json;
        schema.openAPIV3Schema = fn(schema.openAPIV3Schema as Json);
      }
      await writeFile(join(dir, `${variant}.yaml`), stringify(crd));
    }
    await applyCrds(env, dir, log);
    await http.request('POST', '/api/v1/namespaces', { body: { metadata: { name: ns } } });

    const row = (label: string, ms: number, mean: number): void => {
      lines.push(
        `  ${label.padEnd(40)} ${(K / (ms / 1000)).toFixed(1).padStart(7)} writes/s   API server mean ${(mean * 1000).toFixed(1).padStart(6)} ms`,
      );
    };
    const measure = async (
      label: string,
      resource: string,
      fn: (i: number) => Promise<unknown>,
    ): Promise<void> => {
      const before = requestLatencies(await getRaw(kc, '/metrics'), [resource]);
      const ms = await inPool(K, CLIENTS, async (i) => {
        await fn(i);
      });
      const d = diffHistograms(before, requestLatencies(await getRaw(kc, '/metrics'), [resource]));
      let sum = 0;
      let count = 0;
      for (const h of d.values()) {
        sum += h.sum;
        count += h.count;
      }
      row(label, ms, count ? sum / count : NaN);
      log(lines.at(-1) ?? '');
    };

    for (const [variant, group] of Object.entries(groups)) {
      const base = `/apis/${group}/v1alpha1/namespaces/${ns}/operatingsystemconfigs`;
      const apiVersion = `${group}/v1alpha1`;
      const kind = 'OperatingSystemConfig';
      await measure(`${variant}: create (server-side apply)`, 'operatingsystemconfigs', (i) =>
        http.request('PATCH', `${base}/apply-${String(i)}`, {
          query: { fieldManager: 'bench', force: true },
          contentType: CONTENT_APPLY_PATCH,
          body: {
            apiVersion,
            kind,
            metadata: { name: `apply-${String(i)}`, namespace: ns },
            spec: benchOscSpec(i),
          },
        }),
      );
      await measure(`${variant}: create (POST)`, 'operatingsystemconfigs', (i) =>
        http.request('POST', base, {
          body: {
            apiVersion,
            kind,
            metadata: { name: `post-${String(i)}`, namespace: ns },
            spec: benchOscSpec(i),
          },
        }),
      );
      await measure(`${variant}: status (server-side apply)`, 'operatingsystemconfigs', (i) =>
        http.request('PATCH', `${base}/apply-${String(i)}/status`, {
          query: { fieldManager: 'bench-status', force: true },
          contentType: CONTENT_APPLY_PATCH,
          body: {
            apiVersion,
            kind,
            metadata: { name: `apply-${String(i)}`, namespace: ns },
            status: benchOscStatus(),
          },
        }),
      );
      await measure(`${variant}: status (JSON merge patch)`, 'operatingsystemconfigs', (i) =>
        http.request('PATCH', `${base}/post-${String(i)}/status`, {
          contentType: CONTENT_MERGE_PATCH,
          body: { status: benchOscStatus() },
        }),
      );
      await measure(`${variant}: finalizer (server-side apply)`, 'operatingsystemconfigs', (i) =>
        http.request('PATCH', `${base}/apply-${String(i)}`, {
          query: { fieldManager: 'bench-finalizer', force: true },
          contentType: CONTENT_APPLY_PATCH,
          body: {
            apiVersion,
            kind,
            metadata: { name: `apply-${String(i)}`, namespace: ns, finalizers: ['bench/x'] },
          },
        }),
      );
      await measure(`${variant}: finalizer (JSON merge patch)`, 'operatingsystemconfigs', (i) =>
        http.request('PATCH', `${base}/post-${String(i)}`, {
          contentType: CONTENT_MERGE_PATCH,
          body: { metadata: { finalizers: ['bench/x'] } },
        }),
      );
      // Not measured: clear the finalizers so the namespace can go.
      await inPool(K, CLIENTS, async (i) => {
        await http.request('PATCH', `${base}/post-${String(i)}`, {
          contentType: CONTENT_MERGE_PATCH,
          body: { metadata: { finalizers: null } },
        });
        await http.request('PATCH', `${base}/apply-${String(i)}`, {
          contentType: CONTENT_MERGE_PATCH,
          body: { metadata: { finalizers: null } },
        });
      });
    }
    await measure('Secret holding the same JSON: create (POST)', 'secrets', (i) =>
      http.request('POST', `/api/v1/namespaces/${ns}/secrets`, {
        body: {
          metadata: { name: `post-${String(i)}`, namespace: ns },
          stringData: { 'spec.json': JSON.stringify(benchOscSpec(i)) },
        },
      }),
    );
    await measure('Secret holding the same JSON: create (apply)', 'secrets', (i) =>
      http.request('PATCH', `/api/v1/namespaces/${ns}/secrets/apply-${String(i)}`, {
        query: { fieldManager: 'bench', force: true },
        contentType: CONTENT_APPLY_PATCH,
        body: {
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: { name: `apply-${String(i)}`, namespace: ns },
          stringData: { 'spec.json': JSON.stringify(benchOscSpec(i)) },
        },
      }),
    );
    console.log(
      [
        '',
        `CRD schema cost — ${String(K)} writes each of the bench OSC (${(JSON.stringify(benchOscSpec(0)).length / 1024).toFixed(1)} KiB spec), ${String(CLIENTS)} clients`,
        ...lines,
      ].join('\n'),
    );
  } finally {
    await http.request('DELETE', `/api/v1/namespaces/${ns}`).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
    http.close();
    await cluster.stop();
  }
}

await main();
