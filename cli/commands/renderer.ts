import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { openLogger, parseLogFormat, parseLogLevel } from '../../log/logger.js';
import { Slots } from '../../api/slots.js';
import { defaultRegistry } from '../../renderers/registry.js';
import {
  RENDER_PATH,
  createRendererApp,
  listen,
  parseListen,
} from '../../renderers/webhook/server.js';
import { parsePositiveInteger } from '../support/numbers.js';
import { onShutdownSignal, parseDuration } from '../support/shutdown.js';

export interface ServeOptions {
  type: string[];
  listen: string;
  tlsCert?: string;
  tlsKey?: string;
  quiet?: boolean;
  concurrency: string;
  logLevel?: string;
  logFormat?: string;
  shutdownTimeout: string;
}

/** `oscar renderer serve` (flags in ./index.ts). */
export async function serveCommand(program: Command, opts: ServeOptions): Promise<void> {
  const fail = (message: string): never => program.error(`oscar renderer serve: ${message}`);
  const registry = defaultRegistry();
  const types = opts.type.flatMap((t) => t.split(',')).filter(Boolean);
  const unknown = types.filter((t) => registry.get(t) === undefined);
  if (unknown.length > 0) {
    fail(
      `--type ${unknown.join(', ')}: no built-in renderer; known types: ${registry.types().join(', ')}`,
    );
  }
  if ((opts.tlsCert === undefined) !== (opts.tlsKey === undefined)) {
    fail('--tls-cert and --tls-key go together');
  }
  let address = { host: '', port: 0 };
  let shutdownMs = 0;
  let concurrency = 0;
  let format, level;
  try {
    address = parseListen(opts.listen);
    concurrency = parsePositiveInteger(opts.concurrency, '--concurrency', 'renders at once');
    shutdownMs = parseDuration(opts.shutdownTimeout, '--shutdown-timeout');
    format = parseLogFormat(opts.logFormat);
    level = parseLogLevel(opts.logLevel);
  } catch (error) {
    fail((error as Error).message);
  }
  const log = await openLogger({
    component: 'renderer',
    ...(format ? { format } : {}),
    ...(level ? { level } : {}),
  });
  const tls =
    opts.tlsCert !== undefined && opts.tlsKey !== undefined
      ? { cert: await readFile(opts.tlsCert), key: await readFile(opts.tlsKey) }
      : undefined;
  const app = createRendererApp(registry, types, {
    slots: new Slots(concurrency),
    ...(opts.quiet
      ? {}
      : {
          onRequest: (e) => {
            log.info(
              {
                type: e.type,
                format: e.format,
                status: e.status,
                durationMs: Math.round(e.ms * 10) / 10,
                ...(e.code ? { code: e.code } : {}),
              },
              'render',
            );
          },
        }),
  });
  const running = await listen(app, { ...address, ...(tls ? { tls } : {}) });
  const url = `${running.url}${RENDER_PATH}`;
  log.info({ url, types }, 'listening');
  // one machine-readable line on stdout, so a supervisor (or a test) learns the address
  process.stdout.write(`${JSON.stringify({ msg: 'listening', url, types })}\n`);
  // On SIGTERM: take no new connections, let the renders in flight answer, then close.
  onShutdownSignal(
    async (_signal, deadline) => {
      const { server } = running;
      const closed = new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
      });
      server.closeIdleConnections();
      if (!(await deadline.within(closed))) {
        log.warn('renders still in flight at the shutdown deadline; closing their connections');
      }
      server.closeAllConnections();
    },
    { log, timeoutMs: shutdownMs },
  );
}
