/**
 * The agent's Prometheus metrics and its small HTTP server: /healthz (the process is alive and
 * its loop runs) and /metrics. Bind it to loopback on a node unless a scraper needs it. Names
 * follow Prometheus' conventions as the controller's do (docs/operations.md lists them).
 * Two GET routes need no framework: node:http keeps express (and its memory) off every node.
 */
import { createServer } from 'node:http';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { Reporter } from './agent.js';
import type { DriftTrigger } from './model/drift.js';

export class AgentMetrics {
  readonly registry = new Registry();
  readonly applies = new Counter({
    name: 'oscar_agent_applies_total',
    help: 'Applies by result (success, failure).',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });
  readonly applySeconds = new Histogram({
    name: 'oscar_agent_apply_duration_seconds',
    help: 'Time to apply a desired state.',
    buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120],
    registers: [this.registry],
  });
  readonly unitJobs = new Counter({
    name: 'oscar_agent_unit_jobs_total',
    help: 'Unit jobs run (start, restart, reload, …).',
    labelNames: ['job'] as const,
    registers: [this.registry],
  });
  readonly sourceErrors = new Counter({
    name: 'oscar_agent_source_errors_total',
    help: 'Desired states refused or not delivered (corrupted Secret, bad file, API errors).',
    registers: [this.registry],
  });
  readonly apiRequests = new Counter({
    name: 'oscar_agent_api_requests_total',
    help: 'Requests the agent made to the Kubernetes API.',
    registers: [this.registry],
  });
  readonly inSync = new Gauge({
    name: 'oscar_agent_in_sync',
    help: '1 when the applied checksum equals the desired one.',
    registers: [this.registry],
  });
  readonly lastApplied = new Gauge({
    name: 'oscar_agent_last_apply_success_timestamp_seconds',
    help: 'When the last successful apply finished (Unix time).',
    registers: [this.registry],
  });
  readonly buildInfo = new Gauge({
    name: 'oscar_agent_build_info',
    help: 'Always 1; the labels say which oscar and which Node.js runtime run.',
    labelNames: ['version', 'nodejs'] as const,
    registers: [this.registry],
  });
  readonly driftItems = new Gauge({
    name: 'oscar_agent_drift_items',
    help: 'Paths and units that differ now from what the agent applied, by kind (path, unit) and policy.',
    labelNames: ['kind', 'policy'] as const,
    registers: [this.registry],
  });
  readonly driftDetected = new Counter({
    name: 'oscar_agent_drift_detected_total',
    help: 'Paths and units found drifted, by kind and by what found them (watch, audit, apply, start).',
    labelNames: ['kind', 'trigger'] as const,
    registers: [this.registry],
  });
  readonly driftReverts = new Counter({
    name: 'oscar_agent_drift_reverts_total',
    help: 'Reverts of drift run, by result (success, failure).',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });
  readonly driftChecks = new Histogram({
    name: 'oscar_agent_drift_check_duration_seconds',
    help: 'Time to check paths and units for drift, by what started the check.',
    labelNames: ['trigger'] as const,
    buckets: [0.001, 0.005, 0.02, 0.1, 0.5, 2],
    registers: [this.registry],
  });

  constructor(version = 'unknown') {
    this.buildInfo.set({ version, nodejs: process.version }, 1);
  }

  /** A drift check finished (DriftMonitorOptions.checked). */
  driftChecked(trigger: DriftTrigger, durationMs: number): void {
    this.driftChecks.observe({ trigger }, durationMs / 1000);
  }

  /** Process metrics (CPU, memory, event-loop lag) only when served: their sampling costs idle CPU. */
  collectProcessMetrics(): void {
    collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: 100 });
  }

  reporter(): Reporter {
    let desired: string | undefined;
    let applied: string | undefined;
    return {
      restored: (checksum) => {
        applied = checksum;
      },
      desired: (checksum) => {
        desired = checksum;
        this.inSync.set(checksum === applied ? 1 : 0);
      },
      applied: (result, ms) => {
        applied = result.checksum;
        this.applies.inc({ result: 'success' });
        this.applySeconds.observe(ms / 1000);
        for (const u of result.touchedUnits) this.unitJobs.inc({ job: u.action });
        this.inSync.set(result.checksum === desired ? 1 : 0);
        this.lastApplied.set(Date.now() / 1000);
      },
      failed: () => {
        this.applies.inc({ result: 'failure' });
      },
      sourceFailed: () => {
        this.sourceErrors.inc();
      },
      drift: (report) => {
        for (const kind of ['path', 'unit', 'package'] as const)
          for (const policy of ['Report', 'Revert'] as const)
            this.driftItems.set(
              { kind, policy },
              report.items.filter((i) => i.key.startsWith(`${kind}:`) && i.policy === policy)
                .length,
            );
        for (const i of report.added) {
          const kind = i.key.slice(0, i.key.indexOf(':'));
          this.driftDetected.inc({ kind, trigger: report.trigger });
        }
      },
      reverted: (result) => {
        this.driftReverts.inc({ result: 'success' });
        for (const u of result.touchedUnits) this.unitJobs.inc({ job: u.action });
      },
      revertFailed: () => {
        this.driftReverts.inc({ result: 'failure' });
      },
    };
  }
}

export interface HealthServer {
  address: string;
  close(): Promise<void>;
}

/** Serves /healthz and /metrics on host:port (":9464" means all interfaces). */
export async function startHealthServer(
  addr: string,
  metrics: AgentMetrics,
  applied: () => string | undefined,
): Promise<HealthServer> {
  const i = addr.lastIndexOf(':');
  const host = i > 0 ? addr.slice(0, i) : undefined;
  const port = Number(addr.slice(i + 1));
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`--metrics-addr must be host:port such as 127.0.0.1:9464, got "${addr}"`);
  }
  metrics.collectProcessMetrics();
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const reply = (status: number, type: string, body: string): void => {
      res.writeHead(status, { 'content-type': type }).end(req.method === 'HEAD' ? '' : body);
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('allow', 'GET, HEAD');
      reply(405, 'text/plain; charset=utf-8', 'method not allowed\n');
    } else if (path === '/healthz') {
      reply(200, 'text/plain; charset=utf-8', `ok applied=${applied() ?? 'none'}\n`);
    } else if (path === '/metrics') {
      metrics.registry.metrics().then(
        (text) => {
          reply(200, metrics.registry.contentType, text);
        },
        (error: unknown) => {
          reply(500, 'text/plain; charset=utf-8', `${(error as Error).message}\n`);
        },
      );
    } else {
      reply(404, 'text/plain; charset=utf-8', 'not found: try /healthz or /metrics\n');
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host ?? '0.0.0.0', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const a = server.address();
  const address = typeof a === 'object' && a ? `${a.address}:${a.port}` : addr;
  return {
    address,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
        server.closeAllConnections();
      }),
  };
}
