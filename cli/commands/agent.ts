import { Agent, logReporter, type Reporter } from '../../agent/agent.js';
import type { ApplyDeps } from '../../agent/apply.js';
import type { DriftHooks, DriftTrigger } from '../../agent/drift/monitor.js';
import type { GrantedAgent } from '../../agent/rollout/granted-agent.js';
import { depsFor, expandForOs } from '../../agent/local.js';
import type { AgentMetrics } from '../../agent/metrics.js';
import type { Source } from '../../agent/source.js';
import { lockStateDir } from '../../agent/state.js';
import {
  errorFields,
  openLogger,
  parseLogFormat,
  parseLogLevel,
  type Logger,
} from '../../log/logger.js';
import { readInput, STDIN, displayName } from '../support/input.js';
import { Deadline, onShutdownSignal, parseDuration, reserveFor } from '../support/shutdown.js';
import { userAgent, VERSION } from '../support/version.js';

export interface AgentFlags {
  file?: string;
  kubeconfig?: string;
  context?: string;
  namespace?: string;
  secret?: string;
  osc?: string;
  node?: string;
  pollInterval: string;
  root: string;
  stateDir?: string;
  metricsAddr?: string;
  once?: boolean;
  logFormat?: string;
  logLevel?: string;
  shutdownTimeout: string;
  bootstrapKubeconfig?: string;
  certDir?: string;
  certificateLifetime?: string;
  /** false with --no-drift. */
  drift?: boolean;
  driftAuditInterval?: string;
  driftRevertBackoff?: string;
}

export const DEFAULT_CERT_DIR = '/var/lib/oscar/pki';

/**
 * The agent's credentials: --kubeconfig (or the defaults), or, with --bootstrap-kubeconfig, the
 * node's own certificate (agent/identity/): the stored one, else one obtained with the bootstrap
 * token; renewed in the background for as long as the agent runs.
 */
export async function agentCredentials(
  flags: AgentFlags,
  node: string,
  log: Logger,
  closers: (() => unknown)[],
): Promise<import('../../kube/credentials.js').KubeCredentials> {
  const kube = await import('../../kube/credentials.js');
  if (flags.bootstrapKubeconfig === undefined)
    return kube.loadKubeCredentials(flags.kubeconfig, flags.context);
  if (flags.kubeconfig !== undefined) {
    throw new Error('use --kubeconfig or --bootstrap-kubeconfig, not both');
  }
  const [{ NodeIdentity }, { CertificateStore }, { DEFAULT_CERTIFICATE_SECONDS }] =
    await Promise.all([
      import('../../agent/identity/identity.js'),
      import('../../agent/identity/store.js'),
      import('../../api/identity.js'),
    ]);
  const lifetimeSeconds =
    flags.certificateLifetime === undefined
      ? DEFAULT_CERTIFICATE_SECONDS
      : Math.floor(parseDuration(flags.certificateLifetime, '--certificate-lifetime') / 1000);
  const identity = new NodeIdentity({
    machine: node,
    store: new CertificateStore(flags.certDir ?? DEFAULT_CERT_DIR),
    bootstrap: await kube.loadKubeCredentials(flags.bootstrapKubeconfig),
    httpFor: (c) => kube.kubeHttp(c, { userAgent: userAgent('agent') }),
    lifetimeSeconds,
    log,
  });
  await identity.ensure();
  identity.startRenewal();
  // SIGHUP (systemctl reload) renews now: after a CA rotation, or to see that renewal works
  const renewOnHangup = (): void => {
    identity.renewNow().catch((error: unknown) => {
      log.warn(errorFields(error), 'certificate renewal asked by SIGHUP failed; the timer retries');
    });
  };
  process.on('SIGHUP', renewOnHangup);
  closers.push(() => {
    process.off('SIGHUP', renewOnHangup);
    identity.stop();
  });
  return identity;
}

export function seconds(value: string, flag: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0)
    throw new Error(`${flag} must be a positive number of seconds, got "${value}"`);
  return n;
}

/** The agent loop of any mode (Agent, or GrantedAgent in grant mode), as the command uses it. */
export interface AgentLoop {
  stop(): Promise<void>;
  idle(): Promise<void>;
  readonly applied: string | undefined;
  readonly lastError?: Error | undefined;
}

/** What the agent's process holds, released in this order when it stops. */
export interface Running {
  agent: AgentLoop;
  reporters: Reporter[];
  /** The reporter's and the source's connections, the metrics server, the state-dir lock. */
  closers: (() => unknown)[];
}

/**
 * `oscar agent` (flags in ./index.ts). Its errors reach the caller (cli/main.ts prints them).
 * On SIGTERM: stop following, let the apply in flight finish within --shutdown-timeout (less a
 * reserve for the last report); an apply still running then is journaled and resumes on the next
 * start. The process ends within the timeout whatever the API server does.
 */
export async function agentCommand(flags: AgentFlags): Promise<void> {
  const format = parseLogFormat(flags.logFormat);
  const level = parseLogLevel(flags.logLevel);
  const log = await openLogger({
    component: 'agent',
    ...(format ? { format } : {}),
    ...(level ? { level } : {}),
  });
  const shutdownMs = parseDuration(flags.shutdownTimeout, '--shutdown-timeout');
  const holder: { running?: Running } = {};
  // Installed before anything starts: a signal during the first fetch ends the process too.
  onShutdownSignal(
    async (_signal, deadline) => {
      if (holder.running) await stopRunning(holder.running, deadline, log);
    },
    { log, timeoutMs: shutdownMs },
  );
  const running = await startAgent(flags, log);
  holder.running = running;
  const { agent, reporters } = running;
  if (flags.once === true) {
    await agent.idle();
    const deadline = new Deadline(shutdownMs);
    for (const r of reporters) await deadline.within(r.flush?.() ?? Promise.resolve());
    await stopRunning(running, deadline, log);
    const ok = agent.applied !== undefined && agent.lastError === undefined;
    process.exit(ok ? 0 : 1);
  }
}

export async function stopRunning(
  running: Running,
  deadline: Deadline,
  log: Logger,
): Promise<void> {
  const { agent, reporters, closers } = running;
  const reserve = reserveFor(deadline.remainingMs());
  if (!(await deadline.within(agent.stop(), reserve))) {
    log.warn(
      'an apply is still running at the shutdown deadline; its journal resumes it on the next start',
    );
  }
  // the newest report, if the API server takes it within the reserve (an API server that is gone
  // would take the whole budget); a restarted agent reports again anyway
  const flushBy = new Deadline(Math.min(reserve, deadline.remainingMs()));
  for (const r of reporters) await flushBy.within(r.flush?.() ?? Promise.resolve());
  for (const close of closers) await deadline.within(Promise.resolve(close()));
}

async function startAgent(flags: AgentFlags, log: Logger): Promise<Running> {
  const deps = depsFor({
    root: flags.root,
    ...(flags.stateDir ? { stateDir: flags.stateDir } : {}),
  });
  // Only what this mode needs is loaded: the file source (chokidar, YAML, the schema validator),
  // the Secret source and reporter, or the metrics server (prom-client) — the agent lives on
  // every node, and its memory is every node's.
  const served =
    flags.metricsAddr !== undefined ? await import('../../agent/metrics.js') : undefined;
  const metrics = served ? new served.AgentMetrics(VERSION) : undefined;
  const reporters: Reporter[] = [logReporter(log)];
  const closers: (() => unknown)[] = [];
  if (metrics) reporters.push(metrics.reporter());
  if (flags.osc !== undefined) {
    return grantMode(flags, deps, log, metrics, reporters, closers, served);
  }
  let source: Source;
  if (flags.file !== undefined) {
    if (flags.secret !== undefined) throw new Error('use either --file or --secret, not both');
    source = flags.file === STDIN ? stdinSource() : await fileSource(flags);
  } else {
    if (flags.secret === undefined || flags.namespace === undefined) {
      throw new Error(
        'name the reconcile Secret with --namespace and --secret (or use --file for a local file)',
      );
    }
    source = await secretWiring(flags, log, metrics, reporters, closers);
  }
  const unlock = await lockStateDir(deps.stateDir);
  const late: { agent?: Agent } = {}; // the monitor asks the agent for reverts; the agent runs it
  const drift =
    flags.once === true || flags.drift === false
      ? undefined
      : await driftMonitor(flags, deps, reporters, metrics, log, () => late.agent?.revert());
  const agent = new Agent({ source, deps, reporters, log, ...(drift ? { drift } : {}) });
  late.agent = agent;
  const server =
    served && metrics && flags.metricsAddr !== undefined
      ? await served.startHealthServer(flags.metricsAddr, metrics, () => agent.applied)
      : undefined;
  if (server) {
    log.info({ url: `http://${server.address}` }, 'serving /healthz and /metrics');
    closers.push(() => server.close());
  }
  closers.push(unlock);
  log.info(
    { source: source.description, root: deps.root, stateDir: deps.stateDir },
    'following the desired state',
  );
  await agent.start();
  return { agent, reporters, closers };
}

async function fileSource(flags: AgentFlags): Promise<Source> {
  const { FileSource } = await import('../../agent/source-file.js');
  return new FileSource(flags.file ?? '', { expand: expandForOs, watch: flags.once !== true });
}

/**
 * `--file -`: one desired state read from stdin (nothing to watch: it is applied and held). Its
 * reader (YAML, the schema validator) is loaded only here: the Secret-mode agent never needs it.
 */
function stdinSource(): Source {
  return {
    description: 'stdin',
    start: async (events) => {
      try {
        const text = await readInput(STDIN);
        const { desiredFromText } = await import('../../agent/desired.js');
        events.onDesired(await desiredFromText(text, displayName(STDIN), expandForOs));
      } catch (error) {
        events.onError(error as Error);
      }
    },
    stop: () => Promise.resolve(),
  };
}

/**
 * Grant mode (`--osc`): the controller grants this node a revision of the OSC; the agent applies
 * it, in try mode when the grant says so (docs/rollouts.md).
 */
async function grantMode(
  flags: AgentFlags,
  deps: ReturnType<typeof depsFor>,
  log: Logger,
  metrics: AgentMetrics | undefined,
  reporters: Reporter[],
  closers: (() => unknown)[],
  served: typeof import('../../agent/metrics.js') | undefined,
): Promise<Running> {
  const { namespace, osc } = flags;
  if (osc === undefined || namespace === undefined) {
    throw new Error('grant mode needs --namespace and --osc (the OperatingSystemConfig to follow)');
  }
  if (flags.file !== undefined || flags.secret !== undefined) {
    throw new Error('use one of --osc (grants), --secret (the latest Secret) or --file');
  }
  if (flags.once === true) {
    throw new Error(
      '--once is for --file and --secret: in grant mode the controller paces the node',
    );
  }
  const node = flags.node ?? process.env.NODE_NAME;
  if (node === undefined || node === '') {
    throw new Error('name this node with --node (or $NODE_NAME)');
  }
  const pollIntervalMs = seconds(flags.pollInterval, '--poll-interval') * 1000;
  const [kube, { followGrants }] = await Promise.all([
    import('../../kube/credentials.js'),
    import('../../agent/rollout/follow-grants.js'),
  ]);
  const credentials = await agentCredentials(flags, node, log, closers);
  log.info(
    { credentials: credentials.origin, node, osc: `${namespace}/${osc}` },
    'connecting to the API server (grant mode)',
  );
  const kc = kube.asKubeConfig(credentials);
  // drift goes to the node reporter too, which followGrants makes
  const driftReporters = [...reporters];
  const late: { agent?: GrantedAgent } = {};
  const drift =
    flags.drift === false
      ? undefined
      : await driftMonitor(flags, deps, driftReporters, metrics, log, () => {
          late.agent?.requestDriftRevert();
        });
  const { agent, reporter } = followGrants(kc, {
    namespace,
    osc,
    node,
    deps,
    pollIntervalMs,
    log,
    observers: reporters,
    ...(drift ? { drift } : {}),
    http: kube.kubeHttp(credentials, { userAgent: userAgent('agent') }),
    ...(metrics
      ? {
          onRequest: (): void => {
            metrics.apiRequests.inc();
          },
        }
      : {}),
  });
  late.agent = agent;
  driftReporters.push(reporter);
  const unlock = await lockStateDir(deps.stateDir);
  const server =
    served && metrics && flags.metricsAddr !== undefined
      ? await served.startHealthServer(flags.metricsAddr, metrics, () => agent.applied)
      : undefined;
  // reporter first: stopRunning flushes the reporters, then closes in this order
  closers.push(() => {
    reporter.stop();
  });
  if (server) {
    log.info({ url: `http://${server.address}` }, 'serving /healthz and /metrics');
    closers.push(() => server.close());
  }
  closers.push(unlock);
  await agent.start();
  return { agent, reporters: [...reporters, reporter], closers };
}

/** The drift monitor (agent/drift/): reports to the agent's reporters, reverts through it. */
async function driftMonitor(
  flags: AgentFlags,
  deps: ApplyDeps,
  reporters: Reporter[],
  metrics: AgentMetrics | undefined,
  log: Logger,
  revert: () => void,
): Promise<DriftHooks> {
  const auditSeconds = Number(flags.driftAuditInterval ?? '300');
  if (!Number.isFinite(auditSeconds) || auditSeconds < 0) {
    throw new Error(
      `--drift-audit-interval must be a number of seconds (0: only at start and before applies), got "${flags.driftAuditInterval ?? ''}"`,
    );
  }
  const backoffSeconds = Number(flags.driftRevertBackoff ?? '1');
  if (!Number.isFinite(backoffSeconds) || backoffSeconds < 0) {
    throw new Error(
      `--drift-revert-backoff must be a number of seconds (0: no backoff), got "${flags.driftRevertBackoff ?? ''}"`,
    );
  }
  const [{ DriftMonitor }, { RevertBackoff }] = await Promise.all([
    import('../../agent/drift/monitor.js'),
    import('../../agent/drift/policy.js'),
  ]);
  // the audit also runs at start and before every apply; 0 leaves only those
  log.info({ auditIntervalSeconds: auditSeconds }, 'watching for drift');
  return new DriftMonitor({
    root: deps.root,
    owners: deps.owners,
    ...(deps.unitStates ? { units: deps.unitStates } : {}),
    auditIntervalMs: auditSeconds * 1000,
    report: (report) => {
      for (const r of reporters) r.drift?.(report);
    },
    ...(metrics
      ? {
          checked: (trigger: DriftTrigger, ms: number) => {
            metrics.driftChecked(trigger, ms);
          },
        }
      : {}),
    requestRevert: revert,
    backoff: new RevertBackoff({ baseMs: backoffSeconds * 1000 }),
    log,
  });
}

async function secretWiring(
  flags: AgentFlags,
  log: Logger,
  metrics: AgentMetrics | undefined,
  reporters: Reporter[],
  closers: (() => unknown)[],
): Promise<Source> {
  const { namespace, secret } = flags;
  if (secret === undefined || namespace === undefined) throw new Error('unreachable');
  const node = flags.node ?? process.env.NODE_NAME;
  if (node === undefined || node === '')
    throw new Error('name this node with --node (or $NODE_NAME)');
  const pollIntervalMs = seconds(flags.pollInterval, '--poll-interval') * 1000;
  const [kube, { followSecret }] = await Promise.all([
    import('../../kube/credentials.js'),
    import('../../agent/follow-secret.js'),
  ]);
  const credentials = await agentCredentials(flags, node, log, closers);
  log.info(
    { credentials: credentials.origin, node, pollIntervalSeconds: pollIntervalMs / 1000 },
    'connecting to the API server',
  );
  const kc = kube.asKubeConfig(credentials);
  const onRequest = metrics
    ? (): void => {
        metrics.apiRequests.inc();
      }
    : undefined;
  const { source, reporter } = followSecret(kc, {
    namespace,
    secret,
    node,
    pollIntervalMs,
    log,
    http: kube.kubeHttp(credentials, { userAgent: userAgent('agent') }),
    ...(onRequest ? { onRequest } : {}),
  });
  reporters.push(reporter);
  closers.push(() => {
    reporter.stop();
  });
  return source;
}
