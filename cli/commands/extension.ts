import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { runExtension, type ExtensionHandle } from '../../controller/extension/main.js';
import { openLogger, parseLogFormat, parseLogLevel } from '../../log/logger.js';
import { parsePositiveInteger } from '../support/numbers.js';
import { onShutdownSignal, parseDuration } from '../support/shutdown.js';
import { userAgent, VERSION } from '../support/version.js';

export interface ExtensionServeOptions {
  kubeconfig?: string;
  context?: string;
  listen: string;
  concurrency: string;
  metricsAddr?: string;
  tlsCert: string;
  tlsKey: string;
  logLevel?: string;
  logFormat?: string;
  shutdownTimeout: string;
}

function parseListenAddr(addr: string, flag = '--listen'): { host: string; port: number } {
  const i = addr.lastIndexOf(':');
  const host = i <= 0 ? '0.0.0.0' : addr.slice(0, i).replace(/^\[(.*)\]$/, '$1');
  const port = Number(i < 0 ? addr : addr.slice(i + 1));
  if (!Number.isInteger(port) || port < 0 || port > 65535 || addr.trim() === '') {
    throw new Error(`${flag} "${addr}": expected host:port such as ":9443" or "127.0.0.1:0"`);
  }
  return { host, port };
}

/** `oscar extension serve` (flags in ./index.ts). */
export async function extensionServeCommand(
  program: Command,
  opts: ExtensionServeOptions,
): Promise<void> {
  const fail = (message: string): never => program.error(`oscar extension serve: ${message}`);
  let address = { host: '', port: 0 };
  let metricsAt: { host: string; port: number } | undefined;
  let shutdownMs = 0;
  let concurrency = 0;
  let format, level;
  try {
    address = parseListenAddr(opts.listen);
    concurrency = parsePositiveInteger(opts.concurrency, '--concurrency', 'hook calls at once');
    if (opts.metricsAddr !== undefined) {
      metricsAt = parseListenAddr(opts.metricsAddr, '--metrics-addr');
    }
    shutdownMs = parseDuration(opts.shutdownTimeout, '--shutdown-timeout');
    format = parseLogFormat(opts.logFormat);
    level = parseLogLevel(opts.logLevel);
  } catch (error) {
    fail((error as Error).message);
  }
  let cert: Buffer | undefined;
  let key: Buffer | undefined;
  try {
    cert = await readFile(opts.tlsCert);
    key = await readFile(opts.tlsKey);
  } catch (error) {
    fail(`--tls-cert/--tls-key: ${(error as Error).message}`);
  }
  const log = await openLogger({
    component: 'extension',
    ...(format ? { format } : {}),
    ...(level ? { level } : {}),
  });
  const started: { handle?: ExtensionHandle } = {};
  onShutdownSignal(
    async (_signal, deadline) => {
      const h = started.handle;
      if (h && !(await deadline.within(h.stop()))) {
        log.warn('hook calls still in flight at the shutdown deadline');
      }
    },
    { log, timeoutMs: shutdownMs },
  );
  const handle = await runExtension({
    ...(opts.kubeconfig ? { kubeconfig: opts.kubeconfig } : {}),
    ...(opts.context ? { context: opts.context } : {}),
    cert: cert ?? '',
    key: key ?? '',
    ...address,
    concurrency,
    log,
    userAgent: userAgent('extension'),
    version: VERSION,
    ...(metricsAt ? { metrics: metricsAt } : {}),
  });
  started.handle = handle;
  const url = `https://${address.host}:${String(handle.server.port)}`;
  const metricsUrl =
    handle.metricsAddress === undefined ? undefined : `http://${handle.metricsAddress}/metrics`;
  log.info({ url, ...(metricsUrl ? { metrics: metricsUrl } : {}) }, 'listening');
  // one machine-readable line on stdout, so a supervisor (or a test) learns the addresses
  process.stdout.write(
    `${JSON.stringify({ msg: 'listening', url, ...(metricsUrl ? { metrics: metricsUrl } : {}) })}\n`,
  );
}
