/**
 * Prometheus metrics of one controller process (a registry of its own, so tests can run many).
 * Names follow Prometheus' conventions: the oscar_controller_ namespace, base units as suffixes
 * (_seconds, _bytes), _total on counters, labels that each say one thing; the standard process
 * and Node.js metrics (process_*, nodejs_*) keep their standard names, so dashboards made for
 * them work. docs/operations.md lists every metric.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export interface ControllerMetrics {
  registry: Registry;
  reconciles: Counter<'result'>;
  reconcileDuration: Histogram;
  queueDepth: Gauge;
  renderSize: Histogram;
  writes: Counter<'resource' | 'verb'>;
  referencedSecretReads: Counter<'result'>;
  leader: Gauge;
  watchErrors: Counter<'informer' | 'namespace'>;
  buildInfo: Gauge<'version' | 'nodejs'>;
  rolloutReconciles: Counter<'result'>;
  rolloutsPaused: Gauge<'reason'>;
  identityNotRequested: Gauge;
  identityDenials: Counter<'reason'>;
  /** What the gauges read from the caches at scrape time: set once the controllers exist. */
  sources: MetricSources;
}

/** The cached objects the scrape-time gauges count (empty on a standby: its caches do not run). */
export interface MetricSources {
  oscs?: () => Iterable<{ status?: { rollout?: { phase?: string; pauseReason?: string } } }>;
  configs?: () => Iterable<{
    status?: { conditions?: { type: string; status: string; reason?: string }[] };
  }>;
}

/** Paused rollouts by pauseReason (FailureThreshold, Manual, Canary). */
export function pausedRollouts(oscs: NonNullable<MetricSources['oscs']>): Map<string, number> {
  const out = new Map<string, number>();
  for (const osc of oscs()) {
    const r = osc.status?.rollout;
    if (r?.phase !== 'Paused') continue;
    const reason = r.pauseReason ?? 'Unknown';
    out.set(reason, (out.get(reason) ?? 0) + 1);
  }
  return out;
}

/** OscarConfigs whose machine has not asked for its identity in time (NodeIdentity=False NotRequested). */
export function notRequested(configs: NonNullable<MetricSources['configs']>): number {
  let n = 0;
  for (const c of configs()) {
    const identity = c.status?.conditions?.find((x) => x.type === 'NodeIdentity');
    if (identity?.status === 'False' && identity.reason === 'NotRequested') n += 1;
  }
  return n;
}

export function createMetrics(
  options: { defaultMetrics?: boolean; version?: string } = {},
): ControllerMetrics {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry });
  const sources: MetricSources = {};
  const metrics: ControllerMetrics = {
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
    renderSize: new Histogram({
      name: 'oscar_controller_render_size_bytes',
      help: 'Size of the Secret data a render produced.',
      buckets: [1024, 4096, 16384, 65536, 262144, 1048576, 4194304],
      registers: [registry],
    }),
    writes: new Counter({
      name: 'oscar_controller_api_writes_total',
      help: 'Write requests made by reconciles, by resource and verb (no growth at steady state).',
      labelNames: ['resource', 'verb'],
      registers: [registry],
    }),
    referencedSecretReads: new Counter({
      name: 'oscar_controller_referenced_secret_reads_total',
      help: 'GETs of Secrets an OSC references (found, notFound), made when such an OSC renders and the data held is not at the version the metadata watch shows.',
      labelNames: ['result'],
      registers: [registry],
    }),
    leader: new Gauge({
      name: 'oscar_controller_is_leader',
      help: '1 while this process holds the leader Lease (or runs without leader election), else 0.',
      registers: [registry],
    }),
    watchErrors: new Counter({
      name: 'oscar_controller_watch_errors_total',
      help: 'Failed list/watch connections, by informer and namespace ("" for cluster-wide); each is retried with backoff.',
      labelNames: ['informer', 'namespace'],
      registers: [registry],
    }),
    buildInfo: new Gauge({
      name: 'oscar_controller_build_info',
      help: 'Always 1; the labels say which oscar and which Node.js runtime run.',
      labelNames: ['version', 'nodejs'],
      registers: [registry],
    }),
    rolloutReconciles: new Counter({
      name: 'oscar_controller_rollout_reconciles_total',
      help: 'Rollout passes by result: ok, error (retried with backoff).',
      labelNames: ['result'],
      registers: [registry],
    }),
    rolloutsPaused: new Gauge({
      name: 'oscar_controller_rollouts_paused',
      help: 'Rollouts paused now, by pauseReason: FailureThreshold (failed or rolled-back nodes reached the threshold), Manual (spec.rollout.paused), Canary.',
      labelNames: ['reason'],
      registers: [registry],
      collect() {
        this.reset();
        const oscs = sources.oscs;
        if (!oscs) return;
        for (const [reason, n] of pausedRollouts(oscs)) this.set({ reason }, n);
      },
    }),
    identityNotRequested: new Gauge({
      name: 'oscar_controller_oscarconfigs_identity_not_requested',
      help: 'OscarConfigs whose machine has not asked for its identity in time (NodeIdentity=False, NotRequested).',
      registers: [registry],
      collect() {
        this.set(sources.configs ? notRequested(sources.configs) : 0);
      },
    }),
    identityDenials: new Counter({
      name: 'oscar_controller_identity_denials_total',
      help: "Certificate requests the approver denied, by the Denied condition's reason.",
      labelNames: ['reason'],
      registers: [registry],
    }),
    sources,
  };
  metrics.buildInfo.set({ version: options.version ?? 'unknown', nodejs: process.version }, 1);
  return metrics;
}
