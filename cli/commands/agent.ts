import { Agent, logReporter, type Reporter } from '../../agent/agent.js';
import { depsFor, expandForOs } from '../../agent/local.js';
import type { AgentMetrics } from '../../agent/metrics.js';
import type { Source } from '../../agent/source.js';
import { lockStateDir } from '../../agent/state.js';

export interface AgentFlags {
  file?: string;
  kubeconfig?: string;
  namespace?: string;
  secret?: string;
  osc?: string;
  node?: string;
  pollInterval: string;
  root: string;
  stateDir?: string;
  metricsAddr?: string;
  once?: boolean;
}

export function seconds(value: string, flag: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0)
    throw new Error(`${flag} must be a positive number of seconds, got "${value}"`);
  return n;
}

/** `oscar agent` (flags in ./index.ts). */
export async function agentCommand(flags: AgentFlags): Promise<void> {
  const log = (m: string): void => {
    process.stderr.write(`${new Date().toISOString()} oscar-agent: ${m}\n`);
  };
  try {
    await runAgent(flags, log);
  } catch (error) {
    log((error as Error).message);
    process.exitCode = 1;
  }
}

async function runAgent(flags: AgentFlags, log: (m: string) => void): Promise<void> {
  const deps = depsFor({
    root: flags.root,
    ...(flags.stateDir ? { stateDir: flags.stateDir } : {}),
  });
  // Only what this mode needs is loaded: the file source (chokidar, YAML, the schema validator),
  // the Secret source and reporter, or the metrics server (express, prom-client) — the agent
  // lives on every node, and its memory is every node's.
  const served =
    flags.metricsAddr !== undefined ? await import('../../agent/metrics.js') : undefined;
  const metrics = served ? new served.AgentMetrics() : undefined;
  const reporters: Reporter[] = [logReporter(log)];
  if (metrics) reporters.push(metrics.reporter());
  if (flags.osc !== undefined) {
    await runGrantMode(flags, deps, log, metrics, reporters, served);
    return;
  }
  let source: Source;
  if (flags.file !== undefined) {
    if (flags.secret !== undefined) throw new Error('use either --file or --secret, not both');
    const { FileSource } = await import('../../agent/source-file.js');
    source = new FileSource(flags.file, { expand: expandForOs, watch: flags.once !== true });
  } else {
    if (flags.secret === undefined || flags.namespace === undefined) {
      throw new Error(
        'name the reconcile Secret with --namespace and --secret (or use --file for a local file)',
      );
    }
    ({ source } = await secretWiring(flags, log, metrics, reporters));
  }
  const unlock = await lockStateDir(deps.stateDir);
  const agent = new Agent({ source, deps, reporters, log });
  const server =
    served && metrics && flags.metricsAddr !== undefined
      ? await served.startHealthServer(flags.metricsAddr, metrics, () => agent.applied)
      : undefined;
  try {
    if (server) log(`serving /healthz and /metrics on http://${server.address}`);
    log(`following ${source.description}; applying to ${deps.root} (state ${deps.stateDir})`);
    await agent.start();
    if (flags.once === true) {
      await agent.idle();
      for (const r of reporters) await r.flush?.();
      const ok = agent.applied !== undefined && agent.lastError === undefined;
      process.exitCode = ok ? 0 : 1;
      return;
    }
    await new Promise<void>((done) => {
      const stop = (): void => {
        process.off('SIGINT', stop);
        process.off('SIGTERM', stop);
        done();
      };
      process.on('SIGINT', stop);
      process.on('SIGTERM', stop);
    });
    log('stopping');
  } finally {
    await agent.stop();
    for (const r of reporters) await r.flush?.();
    await server?.close();
    await unlock();
  }
}

/**
 * Grant mode (`--osc`): the controller grants this node a revision of the OSC; the agent applies
 * it, in try mode when the grant says so (docs/rollouts.md).
 */
async function runGrantMode(
  flags: AgentFlags,
  deps: ReturnType<typeof depsFor>,
  log: (m: string) => void,
  metrics: AgentMetrics | undefined,
  reporters: Reporter[],
  served: typeof import('../../agent/metrics.js') | undefined,
): Promise<void> {
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
  const credentials = await kube.loadKubeCredentials(flags.kubeconfig);
  log(`credentials from ${credentials.origin}; grants of node ${node} for ${namespace}/${osc}`);
  const kc = kube.asKubeConfig(credentials);
  const { agent, reporter } = followGrants(kc, {
    namespace,
    osc,
    node,
    deps,
    pollIntervalMs,
    log,
    observers: reporters,
    http: kube.kubeHttp(credentials),
    ...(metrics
      ? {
          onRequest: (): void => {
            metrics.apiRequests.inc();
          },
        }
      : {}),
  });
  const unlock = await lockStateDir(deps.stateDir);
  const server =
    served && metrics && flags.metricsAddr !== undefined
      ? await served.startHealthServer(flags.metricsAddr, metrics, () => agent.applied)
      : undefined;
  try {
    if (server) log(`serving /healthz and /metrics on http://${server.address}`);
    await agent.start();
    await new Promise<void>((done) => {
      const stop = (): void => {
        process.off('SIGINT', stop);
        process.off('SIGTERM', stop);
        done();
      };
      process.on('SIGINT', stop);
      process.on('SIGTERM', stop);
    });
    log('stopping');
  } finally {
    await agent.stop();
    await reporter.flush();
    reporter.stop();
    await server?.close();
    await unlock();
  }
}

async function secretWiring(
  flags: AgentFlags,
  log: (m: string) => void,
  metrics: AgentMetrics | undefined,
  reporters: Reporter[],
): Promise<{ source: Source }> {
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
  const credentials = await kube.loadKubeCredentials(flags.kubeconfig);
  log(
    `credentials from ${credentials.origin}; metadata-only poll every ${String(pollIntervalMs / 1000)} s`,
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
    http: kube.kubeHttp(credentials),
    ...(onRequest ? { onRequest } : {}),
  });
  reporters.push(reporter);
  return { source };
}
