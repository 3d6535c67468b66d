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
import { OscController } from './osc/controller.js';
import { Manager } from './runtime/manager.js';
import { RolloutController } from './rollout/controller.js';
import { HttpRolloutWriter, type RolloutWriter } from './rollout/writer.js';
import { HttpNodeDrainer } from './drain/drainer.js';
import { HttpWriter } from './osc/writer.js';
import { httpLeaseStore, LeaderElector } from './leader.js';
import { createLogger, errorFields, type Logger } from '../log/logger.js';
import { createMetrics, type ControllerMetrics } from './metrics.js';
import { registryPipeline, type Pipeline } from './osc/pipeline.js';
import { BootstrapController } from './bootstrap/controller.js';
import { HttpBootstrapWriter } from './bootstrap/writer.js';
import { IdentityController } from './identity/controller.js';
import { HttpIdentityWriter } from './identity/writer.js';
import { DEFAULT_MAX_CERTIFICATE_SECONDS } from '../api/identity.js';
import { defaultRegistry, type RendererRegistry } from '../renderers/registry.js';

/** Per-machine bootstrap (OscarConfigs): on unless disabled. */
export interface BootstrapConfig {
  enabled: boolean;
  /** The API server machines reach (default: the controller's own kubeconfig server). */
  apiServerUrl?: string;
  /** Its CA, PEM (default: the controller's own kubeconfig CA). */
  caPem?: string;
  agentUrl?: string;
  agentSha256?: string;
  /** {{ cluster.name }} for machines without a Cluster API Cluster. */
  clusterName?: string;
  /** Bootstrap token lifetime; refreshed at half of it until the machine joins. Default 20 min. */
  tokenTtlMs?: number;
  /** How long a machine may go without asking for its identity before its config says so (default 10 min). */
  identityWaitMs?: number;
  /** The longest certificate the identity approver allows (default 7 days). */
  nodeCertificateMaxSeconds?: number;
}

export const DEFAULT_TOKEN_TTL_MS = 20 * 60_000;
export const DEFAULT_IDENTITY_WAIT_MS = 10 * 60_000;

export interface ControllerConfig {
  /** Path of a kubeconfig; empty: in-cluster, else $KUBECONFIG / ~/.kube/config. */
  kubeconfig?: string;
  /** --context: a kubeconfig context other than its current-context. */
  context?: string;
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
  /** The renderers the bootstrap controller renders machines with (the pipeline's, if given). */
  registry?: RendererRegistry;
  bootstrap?: BootstrapConfig;
  /**
   * The OSC controller's cleanup finalizer (default false: garbage collection of the owner
   * references deletes the Secrets) and a Normal Event per Secret write (default true).
   */
  oscFinalizer?: boolean;
  oscRenderedEvents?: boolean;
  log?: Logger;
  /** The User-Agent of its API requests (default "oscar-controller"). */
  userAgent?: string;
  /** How long stop() may take (default 15 s). */
  shutdownTimeoutMs?: number;
  /** oscar's version, for oscar_controller_build_info. */
  version?: string;
}

/** The rollout controller's writes, counted by resource and verb (oscar_controller_api_writes_total). */
function countedRolloutWriter(inner: RolloutWriter, metrics: ControllerMetrics): RolloutWriter {
  const count = (resource: string, verb: string): void => {
    metrics.writes.inc({ resource, verb });
  };
  return {
    readSecret: (namespace, name) => inner.readSecret(namespace, name),
    applyRevision: (body) => {
      count('secrets', 'apply');
      return inner.applyRevision(body);
    },
    grant: (node, grant) => {
      count('operatingsystemconfignodes', 'patch');
      return inner.grant(node, grant);
    },
    patchRolloutStatus: (namespace, name, rollout) => {
      count('operatingsystemconfigs/status', 'apply');
      return inner.patchRolloutStatus(namespace, name, rollout);
    },
  };
}

/** True when `work` settled within `ms`, false when the time ran out first. */
async function settledWithin(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(
      () => {
        resolve(false);
      },
      Math.max(0, ms),
    );
  });
  try {
    return await Promise.race([
      work.then(
        () => true,
        () => true,
      ),
      late,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

export interface ControllerHandle {
  /** The address /metrics etc. listen on, once listening. */
  metricsAddress?: string;
  metrics: ControllerMetrics;
  isLeader(): boolean;
  /**
   * Graceful stop within `timeoutMs` (default: the config's shutdownTimeoutMs, else 15 s): the
   * reconciles in flight get the time less a reserve, then the Lease is handed back if the API
   * server answers in what is left, then every connection is closed. Reconciles cut off at the
   * deadline are level-triggered: the next leader redoes them.
   */
  stop(timeoutMs?: number): Promise<void>;
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
  const log = config.log ?? createLogger({ component: 'controller' });
  const metrics = createMetrics(config.version === undefined ? {} : { version: config.version });
  const credentials = await loadKubeCredentials(config.kubeconfig || undefined, config.context);
  const http = kubeHttp(credentials, { userAgent: config.userAgent ?? 'oscar-controller' });
  const identity = config.identity ?? `${hostname()}-${String(process.pid)}`;
  const writer = new HttpWriter(http, identity);
  const registry = config.registry ?? defaultRegistry();
  const pipeline = config.pipeline ?? registryPipeline(registry);
  const bootstrap = config.bootstrap ?? { enabled: true };
  const apiServerUrl = bootstrap.apiServerUrl ?? credentials.getCurrentCluster()?.server;
  const caPem = bootstrap.caPem ?? credentials.getCurrentCluster()?.caPem;
  if (bootstrap.enabled && (!apiServerUrl || !caPem)) {
    throw new Error(
      'per-machine bootstrap needs the API server URL and CA machines use: the kubeconfig names no CA; pass --bootstrap-ca-file (and --bootstrap-api-server), or --no-bootstrap',
    );
  }

  let controller: OscController | undefined;
  let bootstrapController: BootstrapController | undefined;
  let identityController: IdentityController | undefined;
  let manager: Manager | undefined;
  let elector: LeaderElector | undefined;
  let stopping = false;
  let resolveDone: (why: 'lost-lease' | 'stopped') => void = () => undefined;
  const done = new Promise<'lost-lease' | 'stopped'>((r) => (resolveDone = r));

  const startController = (): void => {
    const b =
      bootstrap.enabled && apiServerUrl && caPem
        ? new BootstrapController({
            http,
            writer: new HttpBootstrapWriter(http, identity),
            shared: {
              osc: (ns, name) => controller?.osc(ns, name),
              references: (ns, spec) =>
                controller?.references(ns, spec) ?? { secrets: new Map(), configMaps: new Map() },
              nodeReported: (name) => controller?.nodeReported(name) ?? false,
            },
            settings: {
              registry,
              apiServer: { url: apiServerUrl, caPem },
              agent: {
                ...(bootstrap.agentUrl ? { url: bootstrap.agentUrl } : {}),
                ...(bootstrap.agentSha256 ? { sha256: bootstrap.agentSha256 } : {}),
              },
              ...(bootstrap.clusterName ? { clusterName: bootstrap.clusterName } : {}),
              tokenTtlMs: bootstrap.tokenTtlMs ?? DEFAULT_TOKEN_TTL_MS,
              identityWaitMs: bootstrap.identityWaitMs ?? DEFAULT_IDENTITY_WAIT_MS,
            },
            namespaces: config.namespaces,
            log,
            metrics,
            queue: { concurrency: config.concurrency ?? 16 },
            ...(config.watchTimeoutSeconds === undefined
              ? {}
              : { watchTimeoutSeconds: config.watchTimeoutSeconds }),
          })
        : undefined;
    bootstrapController = b;
    // The identity approver reads the bootstrap controller's caches (which token is whose).
    const ident = b
      ? new IdentityController({
          http,
          writer: new HttpIdentityWriter(http),
          bootstrap: b,
          maxExpirationSeconds:
            bootstrap.nodeCertificateMaxSeconds ?? DEFAULT_MAX_CERTIFICATE_SECONDS,
          log,
          metrics,
          ...(config.watchTimeoutSeconds === undefined
            ? {}
            : { watchTimeoutSeconds: config.watchTimeoutSeconds }),
        })
      : undefined;
    identityController = ident;
    const c = new OscController({
      // The owner references' garbage collection deletes an OSC's Secrets; the finalizer only
      // adds a write per new OSC (and one at deletion), so it is opt-in (docs/controller.md).
      ...(config.oscFinalizer === true ? {} : { finalizer: false }),
      ...(config.oscRenderedEvents === false ? { renderedEvents: false } : {}),
      ...(b
        ? {
            listeners: {
              osc: (ns: string, name: string) => {
                b.oscChanged(ns, name);
              },
              node: (name: string) => {
                b.nodeChanged(name);
              },
            },
          }
        : {}),
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
      issuedNamespaces: (node) => b?.issuedNamespaces(node) ?? [],
      writer: countedRolloutWriter(new HttpRolloutWriter(http), metrics),
      // issue 25: Drain- and Reboot-level revisions are drained through the Eviction API first
      drainer: new HttpNodeDrainer(http),
      event: (osc, e) => writer.event(osc, e),
      log,
      onReconcile: (result) => {
        metrics.rolloutReconciles.inc({ result });
      },
    });
    // The rollout and bootstrap controllers read the OSC controller's caches, the identity
    // approver the bootstrap controller's: each starts once those are synced, and stops first.
    manager = new Manager([c, r, ...(b ? [b] : []), ...(ident ? [ident] : [])]);
    manager.start().catch((error: unknown) => {
      log.error(errorFields(error), 'controller failed to start');
    });
  };

  const stopControllers = (): Promise<void> =>
    (manager?.stop() ?? Promise.resolve()).catch((error: unknown) => {
      log.error(errorFields(error), 'a controller failed to stop');
    });

  const bootstrapReady = (): boolean =>
    (!bootstrapController || bootstrapController.synced) &&
    (!identityController || identityController.synced);
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
        (elector
          ? !elector.isLeader || (controller?.synced === true && bootstrapReady())
          : controller?.synced === true && bootstrapReady());
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
          void stopControllers().finally(() => {
            resolveDone('lost-lease');
          });
        },
      })
      .catch((error: unknown) => {
        log.error(errorFields(error), 'leader election failed');
      });
  } else {
    metrics.leader.set(1); // the only one: it does the leader's work
    startController();
  }

  const stop = async (timeoutMs = config.shutdownTimeoutMs ?? 15_000): Promise<void> => {
    if (stopping) return;
    stopping = true;
    const deadline = Date.now() + timeoutMs;
    const reserve = Math.min(2_000, Math.floor(timeoutMs / 4));
    log.info({ timeoutMs }, 'stopping: finishing reconciles in flight');
    if (!(await settledWithin(stopControllers(), deadline - Date.now() - reserve))) {
      log.warn('reconciles still in flight at the shutdown deadline; the next leader redoes them');
    }
    // Handing the Lease back lets a standby take over at once; an API server that does not
    // answer in time only makes it wait for the lease to expire.
    if (elector && !(await settledWithin(elector.release(), deadline - Date.now()))) {
      log.warn(
        { lease: config.leaseName ?? 'oscar-controller' },
        'could not release the lease in time',
      );
    }
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
