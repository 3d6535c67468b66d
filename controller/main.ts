/**
 * The controller process: kubeconfig → HTTP client → (leader election →) informers and workers,
 * plus /metrics, /healthz and /readyz. runController returns a handle whose stop() is the
 * graceful shutdown SIGTERM triggers: stop taking work, finish the reconciles in flight, stop the
 * watches, release the Lease so a standby takes over without waiting for it to expire.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import express from 'express';
// The agent's kubeconfig reader: @kubernetes/client-node's index loads its whole generated API
// (~15 MiB of module source and ~9 MiB of compiled code kept alive), which at 1,000 OSCs was a
// fifth of the controller's heap; it is still used for exec plugins and auth providers.
import { kubeHttp, loadKubeCredentials } from '../kube/credentials.js';
import { Controller } from './osc/controller.js';
import { RolloutController } from './rollout/controller.js';
import { HttpRolloutWriter } from './rollout/writer.js';
import { HttpWriter } from './osc/writer.js';
import { httpLeaseStore, LeaderElector } from './leader.js';
import { createLogger, errorFields, type Logger } from './logger.js';
import { createMetrics, type ControllerMetrics } from './metrics.js';
import { registryPipeline, type Pipeline } from './osc/pipeline.js';

export interface ControllerConfig {
  /** Path of a kubeconfig; empty: in-cluster, else $KUBECONFIG / ~/.kube/config. */
  kubeconfig?: string;
  /** Namespaces to watch; empty: all. */
  namespaces: string[];
  /** host:port for /metrics, /healthz, /readyz; "" or "0" disables; ":0" picks a free port. */
  metricsAddr: string;
  leaderElect: boolean;
  /** Namespace of the Lease (default: $POD_NAMESPACE, else the first watched namespace). */
  leaseNamespace?: string;
  leaseName?: string;
  leaseDurationMs: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  /** Reconciles in parallel. */
  concurrency?: number;
  identity?: string;
  watchTimeoutSeconds?: number;
  pipeline?: Pipeline;
  log?: Logger;
}

export interface ControllerHandle {
  /** The address /metrics etc. listen on, once listening. */
  metricsAddress?: string;
  metrics: ControllerMetrics;
  isLeader(): boolean;
  /** Graceful stop; resolves when the Lease is released and everything is closed. */
  stop(): Promise<void>;
  /** Resolves when the controller ends on its own (lost the lease): the process should exit. */
  done: Promise<'lost-lease' | 'stopped'>;
}

function parseAddr(addr: string): { host: string; port: number } | undefined {
  if (addr === '' || addr === '0') return undefined;
  const i = addr.lastIndexOf(':');
  const host = i <= 0 ? '0.0.0.0' : addr.slice(0, i);
  const port = Number(addr.slice(i + 1));
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(
      `--metrics-addr "${addr}": expected host:port such as ":8080" or "127.0.0.1:0"`,
    );
  }
  return { host, port };
}

export async function runController(config: ControllerConfig): Promise<ControllerHandle> {
  const log = config.log ?? createLogger();
  const metrics = createMetrics();
  const http = kubeHttp(await loadKubeCredentials(config.kubeconfig || undefined));
  const identity = config.identity ?? `${hostname()}-${String(process.pid)}`;
  const writer = new HttpWriter(http, identity);
  const pipeline = config.pipeline ?? registryPipeline();

  let controller: Controller | undefined;
  let rollouts: RolloutController | undefined;
  let elector: LeaderElector | undefined;
  let stopping = false;
  let resolveDone: (why: 'lost-lease' | 'stopped') => void = () => undefined;
  const done = new Promise<'lost-lease' | 'stopped'>((r) => (resolveDone = r));

  const startController = (): void => {
    const c = new Controller({
      http,
      writer,
      pipeline,
      namespaces: config.namespaces,
      log,
      metrics,
      queue: { concurrency: config.concurrency ?? 16 },
      ...(config.watchTimeoutSeconds === undefined
        ? {}
        : { watchTimeoutSeconds: config.watchTimeoutSeconds }),
    });
    controller = c;
    // The rollout controller shares the OSC controller's informers and starts once they synced.
    const r = new RolloutController({
      osc: c,
      writer: new HttpRolloutWriter(http),
      event: (osc, e) => writer.event(osc, e),
      log,
      onReconcile: (result, writes) => {
        metrics.rolloutReconciles.inc({ result });
        if (writes > 0) metrics.writes.inc({ kind: 'rollout' }, writes);
      },
    });
    rollouts = r;
    c.start()
      .then(() => {
        if (!stopping) r.start();
      })
      .catch((error: unknown) => {
        log.error(errorFields(error), 'controller failed to start');
      });
  };

  // Health and metrics.
  let server: Server | undefined;
  let metricsAddress: string | undefined;
  const addr = parseAddr(config.metricsAddr);
  if (addr) {
    const app = express();
    app.get('/healthz', (_req, res) => {
      res.type('text/plain').send('ok');
    });
    app.get('/readyz', (_req, res) => {
      // A standby is ready (it is doing its job: waiting); a leader once its caches are synced.
      const ready =
        !stopping &&
        (elector ? !elector.isLeader || controller?.synced === true : controller?.synced === true);
      res
        .status(ready ? 200 : 503)
        .type('text/plain')
        .send(ready ? 'ok' : 'not ready');
    });
    app.get('/metrics', (_req, res) => {
      metrics.registry
        .metrics()
        .then((text) => {
          res.type(metrics.registry.contentType).send(text);
        })
        .catch((error: unknown) => {
          res.status(500).send(String(error));
        });
    });
    server = await new Promise<Server>((resolve, reject) => {
      const s = app.listen(addr.port, addr.host, (error?: Error) => {
        if (error) reject(error);
        else resolve(s);
      });
    });
    const a = server.address() as AddressInfo;
    metricsAddress = `${a.address}:${String(a.port)}`;
    log.info({ addr: metricsAddress }, 'serving /metrics /healthz /readyz');
  }

  if (config.leaderElect) {
    const leaseNamespace =
      config.leaseNamespace ?? process.env.POD_NAMESPACE ?? config.namespaces[0] ?? 'default';
    const leaseDurationMs = config.leaseDurationMs;
    elector = new LeaderElector({
      store: httpLeaseStore(http, leaseNamespace, config.leaseName ?? 'oscar-controller'),
      identity,
      namespace: leaseNamespace,
      name: config.leaseName ?? 'oscar-controller',
      leaseDurationMs,
      renewDeadlineMs: config.renewDeadlineMs ?? Math.floor((leaseDurationMs * 2) / 3),
      retryPeriodMs: config.retryPeriodMs ?? Math.max(200, Math.floor(leaseDurationMs / 5)),
      log,
    });
    const e = elector;
    void e
      .run({
        onLead: () => {
          metrics.leader.set(1);
          startController();
        },
        onLost: () => {
          metrics.leader.set(0);
          // Another replica may already reconcile: stop at once, and let the process exit.
          void Promise.all([rollouts?.stop(), controller?.stop()]).finally(() => {
            resolveDone('lost-lease');
          });
        },
      })
      .catch((error: unknown) => {
        log.error(errorFields(error), 'leader election failed');
      });
  } else {
    startController();
  }

  const stop = async (): Promise<void> => {
    if (stopping) return;
    stopping = true;
    log.info('stopping: finishing reconciles in flight');
    await rollouts?.stop();
    await controller?.stop();
    await elector?.release();
    metrics.leader.set(0);
    await new Promise<void>((resolve) => {
      if (server)
        server.close(() => {
          resolve();
        });
      else resolve();
      server?.closeAllConnections();
    });
    http.close();
    log.info('stopped');
    resolveDone('stopped');
  };

  const handle: ControllerHandle = {
    metrics,
    isLeader: () => (elector ? elector.isLeader : true),
    stop,
    done,
  };
  if (metricsAddress !== undefined) handle.metricsAddress = metricsAddress;
  return handle;
}
