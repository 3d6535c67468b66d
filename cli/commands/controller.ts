import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import type { ControllerConfig } from '../../controller/config.js';
import { runController, type ControllerHandle } from '../../controller/main.js';
import { registryPipeline } from '../../controller/osc/pipeline.js';
import { openLogger, parseLogFormat, parseLogLevel } from '../../log/logger.js';
import { loadRenderersConfigFile, registryWithWebhooks } from '../../renderers/webhook/config.js';
import { parsePositiveInteger } from '../support/numbers.js';
import { onShutdownSignal, parseDuration } from '../support/shutdown.js';
import { userAgent, VERSION } from '../support/version.js';

export interface ControllerOptions {
  kubeconfig?: string;
  context?: string;
  namespace?: string[];
  metricsAddr: string;
  leaderElect: boolean;
  leaseNamespace?: string;
  leaseName: string;
  leaseDuration: string;
  concurrency: string;
  logLevel?: string;
  logFormat?: string;
  renderersConfig?: string;
  shutdownTimeout: string;
  bootstrap: boolean;
  oscFinalizer: boolean;
  oscRenderedEvents: boolean;
  bootstrapApiServer?: string;
  bootstrapCaFile?: string;
  agentUrl?: string;
  agentSha256?: string;
  clusterName?: string;
  bootstrapTokenTtl: string;
  nodeCertificateMaxLifetime: string;
  nodeIdentityTimeout: string;
}

type Fail = (message: string) => never;
type Logger = Awaited<ReturnType<typeof openLogger>>;

/** Runs `parse`, turning what it throws into the command's error (naming the flag). */
function parsed<T>(fail: Fail, parse: () => T, prefix = ''): T {
  try {
    return parse();
  } catch (error) {
    return fail(`${prefix}${(error as Error).message}`);
  }
}

/** Step 1: the logger, as --log-format and --log-level ask. */
async function openControllerLogger(fail: Fail, opts: ControllerOptions): Promise<Logger> {
  const { format, level } = parsed(fail, () => ({
    format: parseLogFormat(opts.logFormat),
    level: parseLogLevel(opts.logLevel),
  }));
  return openLogger({
    component: 'controller',
    ...(format ? { format } : {}),
    ...(level ? { level } : {}),
  });
}

interface Timings {
  concurrency: number;
  leaseDurationMs: number;
  shutdownTimeoutMs: number;
  tokenTtlMs: number;
  nodeCertificateMaxMs: number;
  identityWaitMs: number;
}

/** Step 2: the numbers and durations, each checked by its flag's name. */
function parseTimings(fail: Fail, opts: ControllerOptions): Timings {
  return {
    concurrency: parsed(fail, () =>
      parsePositiveInteger(opts.concurrency, '--concurrency', 'OSCs reconciled at once'),
    ),
    leaseDurationMs: parsed(fail, () => parseDuration(opts.leaseDuration, '--lease-duration')),
    shutdownTimeoutMs: parsed(fail, () =>
      parseDuration(opts.shutdownTimeout, '--shutdown-timeout'),
    ),
    tokenTtlMs: parsed(fail, () => parseDuration(opts.bootstrapTokenTtl, '--bootstrap-token-ttl')),
    identityWaitMs: parsed(fail, () =>
      parseDuration(opts.nodeIdentityTimeout, '--node-identity-timeout'),
    ),
    nodeCertificateMaxMs: parsed(fail, () =>
      parseDuration(opts.nodeCertificateMaxLifetime, '--node-certificate-max-lifetime'),
    ),
  };
}

/** Step 3: what machines are told about the agent, and the CA they trust; read before start. */
async function bootstrapInputs(fail: Fail, opts: ControllerOptions): Promise<string | undefined> {
  if (opts.agentSha256 !== undefined && !/^[0-9a-f]{64}$/.test(opts.agentSha256)) {
    fail('--agent-sha256 must be 64 lowercase hex digits');
  }
  if (opts.agentUrl !== undefined && !/^https?:\/\/[^\s'"`$\\]+$/.test(opts.agentUrl)) {
    fail('--agent-url must be an http:// or https:// URL');
  }
  if (opts.bootstrapCaFile === undefined) return undefined;
  try {
    return await readFile(opts.bootstrapCaFile, 'utf8');
  } catch (error) {
    return fail(`--bootstrap-ca-file: ${(error as Error).message}`);
  }
}

/** Step 4: external renderers; a bad file refuses the start, naming the field. */
async function externalRenderers(
  fail: Fail,
  opts: ControllerOptions,
  log: Logger,
  agentString: string,
): Promise<Pick<ControllerConfig, 'pipeline' | 'registry'>> {
  if (opts.renderersConfig === undefined) return {};
  try {
    const entries = await loadRenderersConfigFile(opts.renderersConfig);
    const registry = registryWithWebhooks(entries, undefined, { userAgent: agentString }).registry;
    log.info({ types: entries.map((e) => e.type) }, 'external renderers configured');
    return { pipeline: registryPipeline(registry), registry };
  } catch (error) {
    return fail(`--renderers-config: ${(error as Error).message}`);
  }
}

/** Step 5: the controller's configuration from the checked flags. */
function controllerConfig(
  opts: ControllerOptions,
  t: Timings,
  caPem: string | undefined,
  renderers: Pick<ControllerConfig, 'pipeline' | 'registry'>,
  log: Logger,
  agentString: string,
): ControllerConfig {
  return {
    ...(renderers.pipeline ? { pipeline: renderers.pipeline } : {}),
    ...(renderers.registry ? { registry: renderers.registry } : {}),
    oscFinalizer: opts.oscFinalizer,
    oscRenderedEvents: opts.oscRenderedEvents,
    bootstrap: {
      enabled: opts.bootstrap,
      tokenTtlMs: t.tokenTtlMs,
      nodeCertificateMaxSeconds: Math.floor(t.nodeCertificateMaxMs / 1000),
      identityWaitMs: t.identityWaitMs,
      ...(opts.bootstrapApiServer ? { apiServerUrl: opts.bootstrapApiServer } : {}),
      ...(caPem ? { caPem } : {}),
      ...(opts.agentUrl ? { agentUrl: opts.agentUrl } : {}),
      ...(opts.agentSha256 ? { agentSha256: opts.agentSha256 } : {}),
      ...(opts.clusterName ? { clusterName: opts.clusterName } : {}),
    },
    ...(opts.kubeconfig ? { kubeconfig: opts.kubeconfig } : {}),
    ...(opts.context ? { context: opts.context } : {}),
    namespaces: (opts.namespace ?? []).flatMap((n) => n.split(',')).filter(Boolean),
    metricsAddr: opts.metricsAddr,
    leaderElect: opts.leaderElect,
    ...(opts.leaseNamespace ? { leaseNamespace: opts.leaseNamespace } : {}),
    leaseName: opts.leaseName,
    leaseDurationMs: t.leaseDurationMs,
    concurrency: t.concurrency,
    log,
    userAgent: agentString,
    shutdownTimeoutMs: t.shutdownTimeoutMs,
    version: VERSION,
  };
}

/** Step 6: run until a signal stops it (installed first: a signal while it connects ends it too). */
async function runUntilStopped(config: ControllerConfig, log: Logger): Promise<void> {
  const started: { handle?: ControllerHandle } = {};
  onShutdownSignal(
    async (_signal, deadline) => {
      await started.handle?.stop(deadline.remainingMs());
    },
    { log, timeoutMs: config.shutdownTimeoutMs ?? 0 },
  );
  const handle = await runController(config);
  started.handle = handle;
  const why = await handle.done;
  if (why === 'lost-lease') process.exit(1);
}

/** `oscar controller` (flags in ./index.ts). Its errors reach the caller (cli/main.ts prints them). */
export async function controllerCommand(program: Command, opts: ControllerOptions): Promise<void> {
  const fail: Fail = (message) => program.error(`oscar controller: ${message}`);
  const log = await openControllerLogger(fail, opts);
  const timings = parseTimings(fail, opts);
  const caPem = await bootstrapInputs(fail, opts);
  const agentString = userAgent('controller');
  const renderers = await externalRenderers(fail, opts, log, agentString);
  await runUntilStopped(controllerConfig(opts, timings, caPem, renderers, log, agentString), log);
}
