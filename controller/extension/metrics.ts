/**
 * Prometheus metrics of the Runtime Extension (`oscar extension serve`), served on its own plain
 * HTTP --metrics-addr, apart from the HTTPS port Cluster API calls: a scrape that fails is what
 * the extension-down alert reads (`up`), and the requests say what Cluster API asked and got.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export interface ExtensionMetrics {
  registry: Registry;
  requests: Counter<'hook' | 'status'>;
  requestDuration: Histogram<'hook'>;
  buildInfo: Gauge<'version' | 'nodejs'>;
}

export function createExtensionMetrics(
  options: { defaultMetrics?: boolean; version?: string } = {},
): ExtensionMetrics {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry });
  const metrics: ExtensionMetrics = {
    registry,
    requests: new Counter({
      name: 'oscar_extension_requests_total',
      help: 'Requests answered, by hook (Discovery, CanUpdateMachineSet, CanUpdateMachine, UpdateMachine, other) and status (Success, Failure, error: a non-200 answer).',
      labelNames: ['hook', 'status'],
      registers: [registry],
    }),
    requestDuration: new Histogram({
      name: 'oscar_extension_request_duration_seconds',
      help: 'Time to answer one request, by hook.',
      labelNames: ['hook'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    buildInfo: new Gauge({
      name: 'oscar_extension_build_info',
      help: 'Always 1; the labels say which oscar and which Node.js runtime run.',
      labelNames: ['version', 'nodejs'],
      registers: [registry],
    }),
  };
  metrics.buildInfo.set({ version: options.version ?? 'unknown', nodejs: process.version }, 1);
  return metrics;
}

export interface MetricsServer {
  address: string;
  close(): Promise<void>;
}

/** GET /metrics and /healthz over plain HTTP on host:port (":0" picks a free port). */
export async function startMetricsServer(
  registry: Registry,
  host: string,
  port: number,
): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (req.method === 'GET' && path === '/metrics') {
      registry
        .metrics()
        .then((text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text))
        .catch((error: unknown) => res.writeHead(500).end(String(error)));
      return;
    }
    if (req.method === 'GET' && path === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: /metrics, /healthz');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const a = server.address() as AddressInfo;
  return {
    address: `${a.address}:${String(a.port)}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
        server.closeAllConnections();
      }),
  };
}
