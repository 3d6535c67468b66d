/**
 * The controller process: kubeconfig → HTTP client → (leader election →) the controllers of a
 * term (controller/term.ts), plus /metrics, /healthz and /readyz. runController returns a handle
 * whose stop() is the graceful shutdown SIGTERM triggers: stop taking work, finish the reconciles
 * in flight, stop the watches, release the Lease so a standby takes over without waiting for it
 * to expire.
 */
import type { Server } from 'node:http';
import { hostname } from 'node:os';
// The agent's kubeconfig reader: @kubernetes/client-node's index loads its whole generated API
// (~15 MiB of module source and ~9 MiB of compiled code kept alive), which at 1,000 OSCs was a
// fifth of the controller's heap; it is still used for exec plugins and auth providers.
import { kubeHttp, loadKubeCredentials, type KubeCredentials } from '../kube/credentials.js';
import type { HttpKubeClient } from '../kube/client.js';
import { HttpWriter } from './osc/writer.js';
import { httpLeaseStore, LeaderElector } from './leader.js';
import { createLogger, errorFields } from '../log/logger.js';
import { createMetrics, type ControllerMetrics } from './runtime/metrics.js';
import { registryPipeline } from './osc/pipeline.js';
import { defaultRegistry } from '../renderers/registry.js';
import type { ControllerConfig } from './config.js';
import { closeServer, parseAddr, serveHealth } from './health.js';
import { controllersOfTerm, type Term, type TermContext } from './term.js';

export {
  DEFAULT_IDENTITY_WAIT_MS,
  DEFAULT_TOKEN_TTL_MS,
  type BootstrapConfig,
  type ControllerConfig,
} from './config.js';

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

/** The API server and CA machines reach, when per-machine bootstrap is on. */
function bootstrapApiServer(
  config: ControllerConfig,
  credentials: KubeCredentials,
): TermContext['apiServer'] {
  const bootstrap = config.bootstrap ?? { enabled: true };
  if (!bootstrap.enabled) return undefined;
  const url = bootstrap.apiServerUrl ?? credentials.getCurrentCluster()?.server;
  const caPem = bootstrap.caPem ?? credentials.getCurrentCluster()?.caPem;
  if (!url || !caPem) {
    throw new Error(
      'per-machine bootstrap needs the API server URL and CA machines use: the kubeconfig names no CA; pass --bootstrap-ca-file (and --bootstrap-api-server), or --no-bootstrap',
    );
  }
  return { url, caPem };
}

/** The process's context: what its controllers share, and the client it closes at the end. */
interface ProcessContext extends TermContext {
  http: HttpKubeClient;
}

/** Everything the controllers of a term share: credentials, client, writer, renderers. */
async function connect(config: ControllerConfig): Promise<ProcessContext> {
  const log = config.log ?? createLogger({ component: 'controller' });
  const metrics = createMetrics(config.version === undefined ? {} : { version: config.version });
  const credentials = await loadKubeCredentials(config.kubeconfig || undefined, config.context);
  const http = kubeHttp(credentials, { userAgent: config.userAgent ?? 'oscar-controller' });
  const identity = config.identity ?? `${hostname()}-${String(process.pid)}`;
  const registry = config.registry ?? defaultRegistry();
  return {
    config,
    http,
    identity,
    writer: new HttpWriter(http, identity),
    registry,
    pipeline: config.pipeline ?? registryPipeline(registry),
    apiServer: bootstrapApiServer(config, credentials),
    log,
    metrics,
  };
}

/** The Lease elector of this replica, when leader election is on. */
function leaderElector(ctx: TermContext): LeaderElector | undefined {
  const { config } = ctx;
  if (!config.leaderElect) return undefined;
  const leaseNamespace =
    config.leaseNamespace ?? process.env.POD_NAMESPACE ?? config.namespaces[0] ?? 'default';
  const leaseDurationMs = config.leaseDurationMs;
  const name = config.leaseName ?? 'oscar-controller';
  return new LeaderElector({
    store: httpLeaseStore(ctx.http, leaseNamespace, name),
    identity: ctx.identity,
    namespace: leaseNamespace,
    name,
    leaseDurationMs,
    renewDeadlineMs: config.renewDeadlineMs ?? Math.floor((leaseDurationMs * 2) / 3),
    retryPeriodMs: config.retryPeriodMs ?? Math.max(200, Math.floor(leaseDurationMs / 5)),
    log: ctx.log,
  });
}

export async function runController(config: ControllerConfig): Promise<ControllerHandle> {
  const ctx = await connect(config);
  const { log, metrics } = ctx;
  let term: Term | undefined;
  let stopping = false;
  let resolveDone: (why: 'lost-lease' | 'stopped') => void = () => undefined;
  const done = new Promise<'lost-lease' | 'stopped'>((r) => (resolveDone = r));
  const elector = leaderElector(ctx);

  const startTerm = (): void => {
    term = controllersOfTerm(ctx);
    term.manager.start().catch((error: unknown) => {
      log.error(errorFields(error), 'controller failed to start');
    });
  };
  const stopTerm = (): Promise<void> =>
    (term?.manager.stop() ?? Promise.resolve()).catch((error: unknown) => {
      log.error(errorFields(error), 'a controller failed to stop');
    });

  // A standby is ready (it is doing its job: waiting); a leader once its caches are synced.
  const ready = (): boolean =>
    !stopping && ((elector && !elector.isLeader) || term?.manager.synced === true);
  const addr = parseAddr(config.metricsAddr);
  const served = addr ? await serveHealth(addr, metrics, ready) : undefined;
  if (served) log.info({ addr: served.address }, 'serving /metrics /healthz /readyz');

  if (elector) {
    void elector
      .run({
        onLead: () => {
          metrics.leader.set(1);
          startTerm();
        },
        onLost: () => {
          metrics.leader.set(0);
          // Another replica may already reconcile: stop at once, and let the process exit.
          void stopTerm().finally(() => {
            resolveDone('lost-lease');
          });
        },
      })
      .catch((error: unknown) => {
        log.error(errorFields(error), 'leader election failed');
      });
  } else {
    metrics.leader.set(1); // the only one: it does the leader's work
    startTerm();
  }

  const stop = async (timeoutMs = config.shutdownTimeoutMs ?? 15_000): Promise<void> => {
    if (stopping) return;
    stopping = true;
    await gracefulStop(ctx, { timeoutMs, stopTerm, elector, server: served?.server });
    resolveDone('stopped');
  };

  const handle: ControllerHandle = {
    metrics,
    isLeader: () => (elector ? elector.isLeader : true),
    stop,
    done,
  };
  if (served) handle.metricsAddress = served.address;
  return handle;
}

/**
 * The reconciles in flight get the time less a reserve, then the Lease is handed back if the
 * API server answers in what is left, then every connection is closed.
 */
async function gracefulStop(
  ctx: ProcessContext,
  o: {
    timeoutMs: number;
    stopTerm: () => Promise<void>;
    elector: LeaderElector | undefined;
    server: Server | undefined;
  },
): Promise<void> {
  const { log, metrics, config } = ctx;
  const deadline = Date.now() + o.timeoutMs;
  const reserve = Math.min(2_000, Math.floor(o.timeoutMs / 4));
  log.info({ timeoutMs: o.timeoutMs }, 'stopping: finishing reconciles in flight');
  if (!(await settledWithin(o.stopTerm(), deadline - Date.now() - reserve))) {
    log.warn('reconciles still in flight at the shutdown deadline; the next leader redoes them');
  }
  // Handing the Lease back lets a standby take over at once; an API server that does not
  // answer in time only makes it wait for the lease to expire.
  if (o.elector && !(await settledWithin(o.elector.release(), deadline - Date.now()))) {
    log.warn(
      { lease: config.leaseName ?? 'oscar-controller' },
      'could not release the lease in time',
    );
  }
  metrics.leader.set(0);
  await closeServer(o.server);
  ctx.http.close();
  log.info('stopped');
}
