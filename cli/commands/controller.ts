import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { runController } from '../../controller/main.js';
import { createLogger } from '../../controller/logger.js';
import { registryPipeline } from '../../controller/osc/pipeline.js';
import { loadRenderersConfigFile, registryWithWebhooks } from '../../renderers/webhook/config.js';

function duration(value: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m)?$/.exec(value.trim());
  if (!m?.[1]) throw new Error(`"${value}" is not a duration; write e.g. 15s, 500ms or 1m`);
  const n = Number(m[1]);
  const unit = m[2] ?? 's';
  return unit === 'ms' ? n : unit === 'm' ? n * 60_000 : n * 1000;
}

export interface ControllerOptions {
  kubeconfig?: string;
  namespace?: string[];
  metricsAddr: string;
  leaderElect: boolean;
  leaseNamespace?: string;
  leaseName: string;
  leaseDuration: string;
  concurrency: string;
  logLevel: string;
  renderersConfig?: string;
  bootstrap: boolean;
  oscFinalizer: boolean;
  oscRenderedEvents: boolean;
  bootstrapApiServer?: string;
  bootstrapCaFile?: string;
  agentUrl?: string;
  agentSha256?: string;
  clusterName?: string;
  bootstrapTokenTtl: string;
}

/** `oscar controller` (flags in ./index.ts). */
export async function controllerCommand(program: Command, opts: ControllerOptions): Promise<void> {
  const log = createLogger({ level: opts.logLevel });
  const namespaces = (opts.namespace ?? []).flatMap((n) => n.split(',')).filter(Boolean);
  const concurrency = Number(opts.concurrency);
  if (!Number.isInteger(concurrency) || concurrency < 1) {
    program.error('oscar controller: --concurrency must be a positive integer');
  }
  let leaseDurationMs: number;
  try {
    leaseDurationMs = duration(opts.leaseDuration);
  } catch (error) {
    program.error(`oscar controller: --lease-duration: ${(error as Error).message}`);
  }
  let tokenTtlMs: number;
  try {
    tokenTtlMs = duration(opts.bootstrapTokenTtl);
  } catch (error) {
    program.error(`oscar controller: --bootstrap-token-ttl: ${(error as Error).message}`);
  }
  if (opts.agentSha256 !== undefined && !/^[0-9a-f]{64}$/.test(opts.agentSha256)) {
    program.error('oscar controller: --agent-sha256 must be 64 lowercase hex digits');
  }
  if (opts.agentUrl !== undefined && !/^https?:\/\/[^\s'"`$\\]+$/.test(opts.agentUrl)) {
    program.error('oscar controller: --agent-url must be an http:// or https:// URL');
  }
  let caPem: string | undefined;
  if (opts.bootstrapCaFile !== undefined) {
    try {
      caPem = await readFile(opts.bootstrapCaFile, 'utf8');
    } catch (error) {
      program.error(`oscar controller: --bootstrap-ca-file: ${(error as Error).message}`);
    }
  }
  // external renderers: refuse to start on a bad file, naming the field
  let pipeline;
  let registry;
  if (opts.renderersConfig !== undefined) {
    try {
      const entries = await loadRenderersConfigFile(opts.renderersConfig);
      registry = registryWithWebhooks(entries).registry;
      pipeline = registryPipeline(registry);
      log.info({ types: entries.map((e) => e.type) }, 'external renderers configured');
    } catch (error) {
      program.error(`oscar controller: --renderers-config: ${(error as Error).message}`);
    }
  }
  const handle = await runController({
    ...(pipeline ? { pipeline } : {}),
    ...(registry ? { registry } : {}),
    oscFinalizer: opts.oscFinalizer,
    oscRenderedEvents: opts.oscRenderedEvents,
    bootstrap: {
      enabled: opts.bootstrap,
      tokenTtlMs,
      ...(opts.bootstrapApiServer ? { apiServerUrl: opts.bootstrapApiServer } : {}),
      ...(caPem ? { caPem } : {}),
      ...(opts.agentUrl ? { agentUrl: opts.agentUrl } : {}),
      ...(opts.agentSha256 ? { agentSha256: opts.agentSha256 } : {}),
      ...(opts.clusterName ? { clusterName: opts.clusterName } : {}),
    },
    ...(opts.kubeconfig ? { kubeconfig: opts.kubeconfig } : {}),
    namespaces,
    metricsAddr: opts.metricsAddr,
    leaderElect: opts.leaderElect,
    ...(opts.leaseNamespace ? { leaseNamespace: opts.leaseNamespace } : {}),
    leaseName: opts.leaseName,
    leaseDurationMs,
    concurrency,
    log,
  });
  const shutdown = (signal: string): void => {
    log.info({ signal }, 'signal received');
    void handle.stop().then(() => process.exit(0));
  };
  process.once('SIGTERM', () => {
    shutdown('SIGTERM');
  });
  process.once('SIGINT', () => {
    shutdown('SIGINT');
  });
  const why = await handle.done;
  if (why === 'lost-lease') process.exit(1);
}
