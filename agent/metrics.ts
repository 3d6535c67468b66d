/**
 * The agent's Prometheus metrics and its small HTTP server: /healthz (the process is alive and
 * its loop runs) and /metrics. Bind it to loopback on a node unless a scraper needs it.
 */
import type { Server } from 'node:http';
import express from 'express';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { Reporter } from './agent.js';

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
    name: 'oscar_agent_last_apply_timestamp_seconds',
    help: 'When the last apply finished successfully.',
    registers: [this.registry],
  });

  /** Process metrics (CPU, memory, event-loop lag) only when served: their sampling costs idle CPU. */
  collectProcessMetrics(): void {
    collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: 100 });
  }

  reporter(): Reporter {
    let desired: string | undefined;
    return {
      desired: (checksum) => {
        desired = checksum;
        this.inSync.set(0);
      },
      applied: (result, ms) => {
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
  const app = express();
  app.get('/healthz', (_req, res) => {
    res.type('text/plain').send(`ok applied=${applied() ?? 'none'}\n`);
  });
  app.get('/metrics', (_req, res) => {
    void metrics.registry.metrics().then((text) => {
      res.type(metrics.registry.contentType).send(text);
    });
  });
  const server = await new Promise<Server>((resolve, reject) => {
    const s = app.listen(port, host ?? '0.0.0.0', () => {
      resolve(s);
    });
    s.once('error', reject);
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
