/** Prometheus metrics of one controller process (a registry of its own, so tests can run many). */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export interface ControllerMetrics {
  registry: Registry;
  reconciles: Counter<'result'>;
  reconcileDuration: Histogram;
  queueDepth: Gauge;
  renderBytes: Histogram;
  writes: Counter<'kind'>;
  leader: Gauge;
  watchErrors: Counter<'informer'>;
  rolloutReconciles: Counter<'result'>;
}

export function createMetrics(options: { defaultMetrics?: boolean } = {}): ControllerMetrics {
  const registry = new Registry();
  if (options.defaultMetrics ?? true)
    collectDefaultMetrics({ register: registry, prefix: 'oscar_controller_' });
  return {
    registry,
    reconciles: new Counter({
      name: 'oscar_controller_reconciles_total',
      help: 'Reconciles by result: written, unchanged, invalid, tooLarge, renderFailed, deleted, absent, error.',
      labelNames: ['result'],
      registers: [registry],
    }),
    reconcileDuration: new Histogram({
      name: 'oscar_controller_reconcile_duration_seconds',
      help: 'Time of one reconcile, including its API writes.',
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    queueDepth: new Gauge({
      name: 'oscar_controller_queue_depth',
      help: 'OperatingSystemConfigs waiting to be reconciled.',
      registers: [registry],
    }),
    renderBytes: new Histogram({
      name: 'oscar_controller_render_bytes',
      help: 'Bytes of Secret data a render produced.',
      buckets: [1024, 4096, 16384, 65536, 262144, 1048576, 4194304],
      registers: [registry],
    }),
    writes: new Counter({
      name: 'oscar_controller_api_writes_total',
      help: 'Write requests made by reconciles (0 growth at steady state).',
      labelNames: ['kind'],
      registers: [registry],
    }),
    leader: new Gauge({
      name: 'oscar_controller_leader',
      help: '1 while this process holds the leader Lease.',
      registers: [registry],
    }),
    watchErrors: new Counter({
      name: 'oscar_controller_watch_errors_total',
      help: 'Failed list/watch connections, by informer (each is retried with backoff).',
      labelNames: ['informer'],
      registers: [registry],
    }),
    rolloutReconciles: new Counter({
      name: 'oscar_controller_rollout_reconciles_total',
      help: 'Rollout passes by result: ok, error (retried with backoff).',
      labelNames: ['result'],
      registers: [registry],
    }),
  };
}
