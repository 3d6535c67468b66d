import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { defaultRegistry } from '../../renderers/registry.js';
import {
  RENDER_PATH,
  createRendererApp,
  listen,
  parseListen,
} from '../../renderers/webhook/server.js';

export interface ServeOptions {
  type: string[];
  listen: string;
  tlsCert?: string;
  tlsKey?: string;
  quiet?: boolean;
}

/** `oscar renderer serve` (flags in ./index.ts). */
export async function serveCommand(program: Command, opts: ServeOptions): Promise<void> {
  const registry = defaultRegistry();
  const types = opts.type.flatMap((t) => t.split(',')).filter(Boolean);
  const unknown = types.filter((t) => registry.get(t) === undefined);
  if (unknown.length > 0) {
    program.error(
      `oscar renderer serve: --type ${unknown.join(', ')}: no built-in renderer; known types: ${registry.types().join(', ')}`,
    );
  }
  if ((opts.tlsCert === undefined) !== (opts.tlsKey === undefined)) {
    program.error('oscar renderer serve: --tls-cert and --tls-key go together');
  }
  let address;
  try {
    address = parseListen(opts.listen);
  } catch (error) {
    program.error(`oscar renderer serve: ${(error as Error).message}`);
  }
  const tls =
    opts.tlsCert !== undefined && opts.tlsKey !== undefined
      ? { cert: await readFile(opts.tlsCert), key: await readFile(opts.tlsKey) }
      : undefined;
  const app = createRendererApp(registry, types, {
    ...(opts.quiet
      ? {}
      : {
          onRequest: (e) => {
            process.stderr.write(
              `${JSON.stringify({ msg: 'render', ...e, ms: Math.round(e.ms * 10) / 10 })}\n`,
            );
          },
        }),
  });
  const running = await listen(app, { ...address, ...(tls ? { tls } : {}) });
  // one machine-readable line on stdout, so a supervisor (or a test) learns the address
  process.stdout.write(
    `${JSON.stringify({ msg: 'listening', url: `${running.url}${RENDER_PATH}`, types })}\n`,
  );
  const stop = (): void => {
    void running.close().then(() => process.exit(0));
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}
