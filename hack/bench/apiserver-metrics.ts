/**
 * The API server's own request latency, for benchmarks that need to show where time goes:
 * scrape its /metrics (Prometheus text) before and after a phase, subtract, and summarise the
 * apiserver_request_duration_seconds histogram per verb and resource. Quantiles come from the
 * histogram's buckets (linear interpolation inside the bucket, as Prometheus'
 * histogram_quantile does), so they are estimates bounded by the bucket edges; the mean is exact
 * (sum / count).
 */
import { request } from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';

/** One histogram series: cumulative bucket counts by upper bound, sum, count. */
export interface Histogram {
  buckets: Map<number, number>;
  sum: number;
  count: number;
}

/** Histograms of one metric by a key built from chosen labels. */
export type HistogramSet = Map<string, Histogram>;

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

function labelsOf(text: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!text) return out;
  for (const m of text.matchAll(LABEL)) out[m[1] as string] = m[2] as string;
  return out;
}

/**
 * Collects histogram `name` from Prometheus text, summing series whose key (from keyOf) is equal;
 * keyOf returns undefined to leave a series out.
 */
export function parseHistograms(
  text: string,
  name: string,
  keyOf: (labels: Record<string, string>) => string | undefined,
): HistogramSet {
  const out: HistogramSet = new Map();
  const get = (key: string): Histogram => {
    let h = out.get(key);
    if (!h) {
      h = { buckets: new Map(), sum: 0, count: 0 };
      out.set(key, h);
    }
    return h;
  };
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = LINE.exec(line);
    if (!m) continue;
    const [, metric, labelText, valueText] = m;
    const labels = labelsOf(labelText);
    const value = Number(valueText);
    const key = keyOf(labels);
    if (key === undefined) continue;
    if (metric === `${name}_bucket`) {
      const le = labels.le === '+Inf' ? Infinity : Number(labels.le);
      const h = get(key);
      h.buckets.set(le, (h.buckets.get(le) ?? 0) + value);
    } else if (metric === `${name}_sum`) get(key).sum += value;
    else if (metric === `${name}_count`) get(key).count += value;
  }
  return out;
}

/** after − before, per key (a key absent before counts from zero); empty series dropped. */
export function diffHistograms(before: HistogramSet, after: HistogramSet): HistogramSet {
  const out: HistogramSet = new Map();
  for (const [key, a] of after) {
    const b = before.get(key);
    const count = a.count - (b?.count ?? 0);
    if (count <= 0) continue;
    const buckets = new Map<number, number>();
    for (const [le, n] of a.buckets) buckets.set(le, n - (b?.buckets.get(le) ?? 0));
    out.set(key, { buckets, sum: a.sum - (b?.sum ?? 0), count });
  }
  return out;
}

/** The q-quantile (0..1) estimated from cumulative buckets, interpolating inside a bucket. */
export function histogramQuantile(h: Histogram, q: number): number {
  if (h.count === 0) return NaN;
  const bounds = [...h.buckets.keys()].sort((a, b) => a - b);
  const rank = q * h.count;
  let prevBound = 0;
  let prevCount = 0;
  for (const le of bounds) {
    const n = h.buckets.get(le) ?? 0;
    if (n >= rank) {
      // Above the last finite bound there is nothing to interpolate towards.
      if (le === Infinity) return prevBound;
      const inBucket = n - prevCount;
      return inBucket <= 0 ? le : prevBound + ((le - prevBound) * (rank - prevCount)) / inBucket;
    }
    prevBound = le;
    prevCount = n;
  }
  return prevBound;
}

/** GETs a non-resource path (/metrics) with the kubeconfig's credentials, as text. */
export async function getRaw(kc: KubeConfig, path: string): Promise<string> {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('the kubeconfig has no current cluster');
  const server = new URL(cluster.server);
  const opts: import('node:https').RequestOptions = {};
  await kc.applyToHTTPSOptions(opts);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        ...opts,
        protocol: server.protocol,
        hostname: server.hostname,
        port: server.port,
        path,
        method: 'GET',
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          if ((res.statusCode ?? 0) >= 300) {
            reject(new Error(`GET ${path}: ${String(res.statusCode)} ${text.slice(0, 200)}`));
          } else resolve(text);
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** Request latency per "VERB resource[/subresource]" for the resources given. */
export function requestLatencies(text: string, resources: readonly string[]): HistogramSet {
  return parseHistograms(text, 'apiserver_request_duration_seconds', (l) => {
    if (!l.resource || !resources.includes(l.resource)) return undefined;
    if (l.verb === 'WATCH' || l.verb === 'WATCHLIST' || l.verb === 'CONNECT') return undefined;
    return `${l.verb ?? '?'} ${l.resource}${l.subresource ? `/${l.subresource}` : ''}`;
  });
}

/** etcd round trips per "operation type" as the API server sees them. */
export function etcdLatencies(text: string, types: readonly string[]): HistogramSet {
  return parseHistograms(text, 'etcd_request_duration_seconds', (l) => {
    // Labelled "resource" since Kubernetes 1.33 ("type" before).
    const type = l.resource ?? l.type ?? '';
    if (!types.some((t) => type.includes(t))) return undefined;
    return `${l.operation ?? '?'} ${type}`;
  });
}

/** Lines "KEY  n  mean  p50~  p99~" in ms, sorted by key, for a report. */
export function formatLatencies(set: HistogramSet, indent = '    '): string[] {
  const rows = [...set.entries()].sort(([a], [b]) => a.localeCompare(b));
  const width = Math.max(10, ...rows.map(([k]) => k.length));
  const ms = (s: number): string => (s * 1000).toFixed(1).padStart(8);
  const lines = [
    `${indent}${'request'.padEnd(width)}  ${'count'.padStart(6)}  ${'mean ms'.padStart(8)}  ${'p50≈ ms'.padStart(8)}  ${'p99≈ ms'.padStart(8)}`,
  ];
  for (const [key, h] of rows) {
    lines.push(
      `${indent}${key.padEnd(width)}  ${String(h.count).padStart(6)}  ${ms(h.sum / h.count)}  ${ms(histogramQuantile(h, 0.5))}  ${ms(histogramQuantile(h, 0.99))}`,
    );
  }
  return lines;
}

/**
 * Mutating requests the API server served, by every client, from its apiserver_request_total:
 * per "resource[/subresource]".
 */
export function writesByResource(metrics: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of metrics.split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    if (!/verb="(POST|PUT|PATCH|DELETE|DELETECOLLECTION|APPLY)"/.test(line)) continue;
    const resource = /[{,]resource="([^"]*)"/.exec(line)?.[1] ?? '';
    const sub = /[{,]subresource="([^"]*)"/.exec(line)?.[1] ?? '';
    const key = sub ? `${resource}/${sub}` : resource;
    out.set(key, (out.get(key) ?? 0) + Number(line.split(' ').pop()));
  }
  return out;
}

/** Mutating requests the API server served, by every client. */
export function writesIn(metrics: string): number {
  let n = 0;
  for (const v of writesByResource(metrics).values()) n += v;
  return n;
}

const WRITE_VERBS = new Set(['APPLY', 'POST', 'PUT', 'PATCH', 'DELETE', 'DELETECOLLECTION']);

/** Write requests in a set from requestLatencies, in all and per "VERB resource" key. */
export function writeCounts(set: HistogramSet): { total: number; byKey: Map<string, number> } {
  const byKey = new Map<string, number>();
  let total = 0;
  for (const [key, h] of set) {
    if (!WRITE_VERBS.has(key.slice(0, key.indexOf(' ')))) continue;
    byKey.set(key, h.count);
    total += h.count;
  }
  return { total, byKey };
}
