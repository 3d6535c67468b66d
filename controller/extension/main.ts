/**
 * `oscar extension serve`: the Cluster API Runtime Extension as its own process (its own Deployment
 * and ServiceAccount in deploy/extension/): it needs none of the controller's caches — each hook
 * call reads the few objects it is about — and Cluster API calls it at most a few times per
 * machine update, so it stays small and its RBAC stays apart from the controller's.
 */
import type { Logger } from 'pino';
import { kubeHttp, loadKubeCredentials } from '../../kube/credentials.js';
import { createExtensionMetrics, startMetricsServer, type MetricsServer } from './metrics.js';
import { InPlaceExtension } from './service.js';
import { Slots } from '../../api/slots.js';
import { startExtensionServer, type RunningExtensionServer } from './server.js';

export interface ExtensionConfig {
  kubeconfig?: string;
  context?: string;
  cert: Buffer | string;
  key: Buffer | string;
  host: string;
  port: number;
  /** Hook calls read and handled at once; default DEFAULT_HOOK_SLOTS (./server.ts). */
  concurrency?: number;
  log: Logger;
  userAgent?: string;
  /** Where /metrics is served over plain HTTP; none when absent. */
  metrics?: { host: string; port: number };
  version?: string;
}

export interface ExtensionHandle {
  extension: InPlaceExtension;
  server: RunningExtensionServer;
  /** host:port of /metrics, when served. */
  metricsAddress?: string;
  stop(): Promise<void>;
}

export async function runExtension(c: ExtensionConfig): Promise<ExtensionHandle> {
  const credentials = await loadKubeCredentials(c.kubeconfig || undefined, c.context);
  const http = kubeHttp(credentials, { userAgent: c.userAgent ?? 'oscar-extension' });
  const extension = new InPlaceExtension(http, c.log);
  const metrics = createExtensionMetrics(c.version === undefined ? {} : { version: c.version });
  const server = await startExtensionServer({
    cert: c.cert,
    key: c.key,
    host: c.host,
    port: c.port,
    extension,
    log: c.log,
    metrics,
    ...(c.concurrency === undefined ? {} : { slots: new Slots(c.concurrency) }),
  });
  let served: MetricsServer | undefined;
  try {
    if (c.metrics)
      served = await startMetricsServer(metrics.registry, c.metrics.host, c.metrics.port);
  } catch (error) {
    await server.close();
    throw error;
  }
  return {
    extension,
    server,
    ...(served ? { metricsAddress: served.address } : {}),
    stop: async () => {
      await Promise.all([server.close(), served?.close()]);
    },
  };
}
