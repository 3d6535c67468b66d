import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { runController, type ControllerHandle } from '../../controller/main.js';
import { registryPipeline } from '../../controller/osc/pipeline.js';
import { openLogger, parseLogFormat, parseLogLevel } from '../../log/logger.js';
import { loadRenderersConfigFile, registryWithWebhooks } from '../../renderers/webhook/config.js';
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

/** `oscar controller` (flags in ./index.ts). Its errors reach the caller (cli/main.ts prints them). */
export async function controllerCommand(program: Command, opts: ControllerOptions): Promise<void> {
  const fail = (message: string): never => program.error(`oscar controller: ${message}`);
  let format, level;
  try {
    format = parseLogFormat(opts.logFormat);
    level = parseLogLevel(opts.logLevel);
  } catch (error) {
    fail((error as Error).message);
  }
  const log = await openLogger({
    component: 'controller',
    ...(format ? { format } : {}),
    ...(level ? { level } : {}),
  });
  const namespaces = (opts.namespace ?? []).flatMap((n) => n.split(',')).filter(Boolean);
  const concurrency = Number(opts.concurrency);
  if (!Number.isInteger(concurrency) || concurrency < 1) {
    fail('--concurrency must be a positive integer');
  }
  let leaseDurationMs = 0;
  let shutdownTimeoutMs = 0;
  try {
    leaseDurationMs = parseDuration(opts.leaseDuration, '--lease-duration');
    shutdownTimeoutMs = parseDuration(opts.shutdownTimeout, '--shutdown-timeout');
  } catch (error) {
    fail((error as Error).message);
  }
  let tokenTtlMs = 0;
  let nodeCertificateMaxMs = 0;
  let identityWaitMs = 0;
  try {
    tokenTtlMs = parseDuration(opts.bootstrapTokenTtl, '--bootstrap-token-ttl');
    identityWaitMs = parseDuration(opts.nodeIdentityTimeout, '--node-identity-timeout');
    nodeCertificateMaxMs = parseDuration(
      opts.nodeCertificateMaxLifetime,
      '--node-certificate-max-lifetime',
    );
  } catch (error) {
    fail((error as Error).message);
  }
  if (opts.agentSha256 !== undefined && !/^[0-9a-f]{64}$/.test(opts.agentSha256)) {
    fail('--agent-sha256 must be 64 lowercase hex digits');
  }
  if (opts.agentUrl !== undefined && !/^https?:\/\/[^\s'"`$\\]+$/.test(opts.agentUrl)) {
    fail('--agent-url must be an http:// or https:// URL');
  }
  let caPem: string | undefined;
  if (opts.bootstrapCaFile !== undefined) {
    try {
      caPem = await readFile(opts.bootstrapCaFile, 'utf8');
    } catch (error) {
      fail(`--bootstrap-ca-file: ${(error as Error).message}`);
    }
  }
  const agentString = userAgent('controller');
  // external renderers: refuse to start on a bad file, naming the field
  let pipeline;
  let registry;
  if (opts.renderersConfig !== undefined) {
    try {
      const entries = await loadRenderersConfigFile(opts.renderersConfig);
      registry = registryWithWebhooks(entries, undefined, { userAgent: agentString }).registry;
      pipeline = registryPipeline(registry);
      log.info({ types: entries.map((e) => e.type) }, 'external renderers configured');
    } catch (error) {
      fail(`--renderers-config: ${(error as Error).message}`);
    }
  }
  const started: { handle?: ControllerHandle } = {};
  // Installed before the controller starts: a signal while it connects ends the process too.
  onShutdownSignal(
    async (_signal, deadline) => {
      await started.handle?.stop(deadline.remainingMs());
    },
    { log, timeoutMs: shutdownTimeoutMs },
  );
  const handle = await runController({
    ...(pipeline ? { pipeline } : {}),
    ...(registry ? { registry } : {}),
    oscFinalizer: opts.oscFinalizer,
    oscRenderedEvents: opts.oscRenderedEvents,
    bootstrap: {
      enabled: opts.bootstrap,
      tokenTtlMs,
      nodeCertificateMaxSeconds: Math.floor(nodeCertificateMaxMs / 1000),
      identityWaitMs,
      ...(opts.bootstrapApiServer ? { apiServerUrl: opts.bootstrapApiServer } : {}),
      ...(caPem ? { caPem } : {}),
      ...(opts.agentUrl ? { agentUrl: opts.agentUrl } : {}),
      ...(opts.agentSha256 ? { agentSha256: opts.agentSha256 } : {}),
      ...(opts.clusterName ? { clusterName: opts.clusterName } : {}),
    },
    ...(opts.kubeconfig ? { kubeconfig: opts.kubeconfig } : {}),
    ...(opts.context ? { context: opts.context } : {}),
    namespaces,
    metricsAddr: opts.metricsAddr,
    leaderElect: opts.leaderElect,
    ...(opts.leaseNamespace ? { leaseNamespace: opts.leaseNamespace } : {}),
    leaseName: opts.leaseName,
    leaseDurationMs,
    concurrency,
    log,
    userAgent: agentString,
    shutdownTimeoutMs,
    version: VERSION,
  });
  started.handle = handle;
  const why = await handle.done;
  if (why === 'lost-lease') process.exit(1);
}
