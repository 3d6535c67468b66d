import { logReporter, type Agent, type Reporter } from '../../agent/agent.js';
import { immediateAgent } from '../../agent/immediate.js';
import type { DriftHooks, DriftTrigger } from '../../agent/drift/monitor.js';
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
  configUid?: string;
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
  if (flags.configUid === undefined || !/^[A-Za-z0-9-]{1,64}$/.test(flags.configUid)) {
    throw new Error(
      `--config-uid is required with --bootstrap-kubeconfig and must be the OscarConfig's metadata.uid (got ${JSON.stringify(flags.configUid ?? '')}); the user data oscar renders passes it (docs/identity.md)`,
    );
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
    configUid: flags.configUid,
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

/** The agent's loop (agent/agent.ts), as the command uses it. */
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

/** What every mode of the agent shares while it starts: where its parts and outcomes go. */
interface Wiring {
  flags: AgentFlags;
  deps: ReturnType<typeof depsFor>;
  log: Logger;
  /** The metrics module, loaded only with --metrics-addr. */
  served: typeof import('../../agent/metrics.js') | undefined;
  metrics: AgentMetrics | undefined;
  reporters: Reporter[];
  closers: (() => unknown)[];
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
  if (metrics) reporters.push(metrics.reporter());
  const w: Wiring = { flags, deps, log, served, metrics, reporters, closers: [] };
  return flags.osc !== undefined ? grantMode(w) : immediateMode(w);
}

/** `--secret`, `--file`: every state the source delivers is applied as it arrives. */
async function immediateMode(w: Wiring): Promise<Running> {
  const { flags, deps, reporters, log } = w;
  const source = await immediateSource(w);
  const unlock = await lockStateDir(deps.stateDir);
  const late: { agent?: Agent } = {}; // the monitor asks the agent for reverts; the agent runs it
  const drift =
    flags.once === true || flags.drift === false
      ? undefined
      : await driftMonitor(w, reporters, () => late.agent?.revert());
  const agent = immediateAgent({ source, deps, reporters, log, ...(drift ? { drift } : {}) });
  late.agent = agent;
  await serveHealth(w, agent);
  w.closers.push(unlock);
  log.info(
    { source: source.description, root: deps.root, stateDir: deps.stateDir },
    'following the desired state',
  );
  await agent.start();
  return { agent, reporters, closers: w.closers };
}

/** The source of the immediate mode: a file, stdin or the reconcile Secret. */
async function immediateSource(w: Wiring): Promise<Source> {
  const { flags } = w;
  if (flags.file !== undefined) {
    if (flags.secret !== undefined) throw new Error('use either --file or --secret, not both');
    return flags.file === STDIN ? stdinSource() : fileSource(flags);
  }
  if (flags.secret === undefined || flags.namespace === undefined) {
    throw new Error(
      'name the reconcile Secret with --namespace and --secret (or use --file for a local file)',
    );
  }
  return secretWiring(w, flags.namespace, flags.secret);
}

/** /healthz and /metrics, with --metrics-addr; closed when the agent stops. */
async function serveHealth(w: Wiring, agent: Agent): Promise<void> {
  const { served, metrics, flags } = w;
  if (!served || !metrics || flags.metricsAddr === undefined) return;
  const server = await served.startHealthServer(flags.metricsAddr, metrics, () => agent.applied);
  w.log.info({ url: `http://${server.address}` }, 'serving /healthz and /metrics');
  w.closers.push(() => server.close());
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
async function grantMode(w: Wiring): Promise<Running> {
  const { namespace, osc } = grantFlags(w.flags);
  const api = await connect(
    w,
    { osc: `${namespace}/${osc}` },
    'connecting to the API server (grant mode)',
  );
  const { followGrants } = await import('../../agent/wiring/follow-grants.js');
  // drift goes to the node reporter too, which followGrants makes
  const driftReporters = [...w.reporters];
  const late: { agent?: Agent } = {};
  const drift =
    w.flags.drift === false
      ? undefined
      : await driftMonitor(w, driftReporters, () => {
          late.agent?.revert();
        });
  const { agent, reporter } = followGrants(api.kc, {
    namespace,
    osc,
    node: api.node,
    deps: w.deps,
    pollIntervalMs: api.pollIntervalMs,
    log: w.log,
    observers: w.reporters,
    ...(drift ? { drift } : {}),
    http: api.http,
    ...(api.onRequest ? { onRequest: api.onRequest } : {}),
  });
  late.agent = agent;
  driftReporters.push(reporter);
  const unlock = await lockStateDir(w.deps.stateDir);
  // reporter first: stopRunning flushes the reporters, then closes in this order
  w.closers.push(() => {
    reporter.stop();
  });
  await serveHealth(w, agent);
  w.closers.push(unlock);
  await agent.start();
  return { agent, reporters: [...w.reporters, reporter], closers: w.closers };
}

/** Grant mode's flags, checked: --namespace and --osc, none of the other modes'. */
function grantFlags(flags: AgentFlags): { namespace: string; osc: string } {
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
  return { namespace, osc };
}

/** The agent's connection to the API server: its node, credentials and one HTTP client. */
interface Connection {
  node: string;
  pollIntervalMs: number;
  kc: import('@kubernetes/client-node').KubeConfig;
  http: import('../../kube/client.js').KubeHttp;
  /** Counts API requests for /metrics. */
  onRequest: (() => void) | undefined;
}

/** The node's name, its credentials (renewed while the agent runs) and the API client. */
async function connect(
  w: Wiring,
  fields: Record<string, unknown>,
  message: string,
): Promise<Connection> {
  const { flags, log, metrics } = w;
  const node = flags.node ?? process.env.NODE_NAME;
  if (node === undefined || node === '') {
    throw new Error('name this node with --node (or $NODE_NAME)');
  }
  const pollIntervalMs = seconds(flags.pollInterval, '--poll-interval') * 1000;
  const kube = await import('../../kube/credentials.js');
  const credentials = await agentCredentials(flags, node, log, w.closers);
  log.info(
    {
      credentials: credentials.origin,
      node,
      pollIntervalSeconds: pollIntervalMs / 1000,
      ...fields,
    },
    message,
  );
  return {
    node,
    pollIntervalMs,
    kc: kube.asKubeConfig(credentials),
    http: kube.kubeHttp(credentials, { userAgent: userAgent('agent') }),
    onRequest: metrics
      ? (): void => {
          metrics.apiRequests.inc();
        }
      : undefined,
  };
}

/** The drift monitor (agent/drift/): reports to the agent's reporters, reverts through it. */
async function driftMonitor(
  w: Wiring,
  reporters: Reporter[],
  revert: () => void,
): Promise<DriftHooks> {
  const { flags, deps, metrics, log } = w;
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

/** The reconcile Secret's source and the node reporter (`--secret`). */
async function secretWiring(w: Wiring, namespace: string, secret: string): Promise<Source> {
  const api = await connect(w, {}, 'connecting to the API server');
  const { followSecret } = await import('../../agent/follow-secret.js');
  const { source, reporter } = followSecret(api.kc, {
    namespace,
    secret,
    node: api.node,
    pollIntervalMs: api.pollIntervalMs,
    log: w.log,
    http: api.http,
    ...(api.onRequest ? { onRequest: api.onRequest } : {}),
  });
  w.reporters.push(reporter);
  w.closers.push(() => {
    reporter.stop();
  });
  return source;
}
