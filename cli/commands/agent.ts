import type { Command } from 'commander';
import { Agent, logReporter, type Reporter } from '../../agent/agent.js';
import { depsFor, expandForOs } from '../../agent/local.js';
import { startHealthServer, AgentMetrics } from '../../agent/metrics.js';
import { FileSource } from '../../agent/source-file.js';
import type { Source } from '../../agent/source.js';
import { lockStateDir } from '../../agent/state.js';

interface AgentFlags {
  file?: string;
  kubeconfig?: string;
  namespace?: string;
  secret?: string;
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

export function register(program: Command): void {
  program
    .command('agent')
    .description(
      'run the node agent: follow the reconcile Secret (or a local file) and apply it in place; report per node',
    )
    .option('--file <file>', 'follow a local file (OSC YAML or canonical JSON) instead of a Secret')
    .option(
      '--kubeconfig <path>',
      'kubeconfig (default: in-cluster, then $KUBECONFIG / ~/.kube/config)',
    )
    .option('--namespace <ns>', 'namespace of the reconcile Secret')
    .option('--secret <name>', 'name of the reconcile Secret to follow')
    .option(
      '--node <name>',
      "this node's name: the OperatingSystemConfigNode the agent reports to (default: $NODE_NAME)",
    )
    .option(
      '--poll-interval <seconds>',
      'metadata-only poll of the Secret, the safety net under the watch',
      '60',
    )
    .option(
      '--root <dir>',
      'root to apply into: "/" is this machine; a directory is local mode',
      '/',
    )
    .option('--state-dir <dir>', 'state directory (default /var/lib/oscar under the root)')
    .option('--metrics-addr <host:port>', 'serve /healthz and /metrics here (e.g. 127.0.0.1:9464)')
    .option('--once', 'apply the current desired state once and exit (exit 1 on failure)')
    .action(async (flags: AgentFlags) => {
      const log = (m: string): void => {
        process.stderr.write(`${new Date().toISOString()} oscar-agent: ${m}\n`);
      };
      try {
        await runAgent(flags, log);
      } catch (error) {
        log((error as Error).message);
        process.exitCode = 1;
      }
    });
}

async function runAgent(flags: AgentFlags, log: (m: string) => void): Promise<void> {
  const deps = depsFor({
    root: flags.root,
    ...(flags.stateDir ? { stateDir: flags.stateDir } : {}),
  });
  const metrics = new AgentMetrics();
  const reporters: Reporter[] = [logReporter(log), metrics.reporter()];
  let source: Source;
  if (flags.file !== undefined) {
    if (flags.secret !== undefined) throw new Error('use either --file or --secret, not both');
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
  const server = flags.metricsAddr
    ? await startHealthServer(flags.metricsAddr, metrics, () => agent.applied)
    : undefined;
  try {
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

async function secretWiring(
  flags: AgentFlags,
  log: (m: string) => void,
  metrics: AgentMetrics,
  reporters: Reporter[],
): Promise<{ source: Source }> {
  const { namespace, secret } = flags;
  if (secret === undefined || namespace === undefined) throw new Error('unreachable');
  const node = flags.node ?? process.env.NODE_NAME;
  if (node === undefined || node === '')
    throw new Error('name this node with --node (or $NODE_NAME)');
  // loaded only in Secret mode: the Kubernetes client is the bulk of the agent's memory
  const [{ loadKubeConfig }, { KubeReporter }, { SecretSource }] = await Promise.all([
    import('../../agent/kube.js'),
    import('../../agent/report.js'),
    import('../../agent/source-secret.js'),
  ]);
  const kc = loadKubeConfig(flags.kubeconfig);
  const onRequest = (): void => {
    metrics.apiRequests.inc();
  };
  const source = new SecretSource(kc, {
    namespace,
    name: secret,
    pollIntervalMs: seconds(flags.pollInterval, '--poll-interval') * 1000,
    log,
    onRequest,
  });
  reporters.push(
    new KubeReporter(kc, { node, oscRef: { namespace, secretName: secret }, log, onRequest }),
  );
  return { source };
}
