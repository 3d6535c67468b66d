/**
 * `oscar renderer`: serve a built-in renderer over the render protocol. Its help and flags only;
 * the work is in the module it imports when it runs, so the command table loads nothing heavier
 * than commander.
 */
import type { Command } from 'commander';
import { examples, longRunning, RENDER_PATH_HELP } from './help.js';
import type { ServeOptions } from './renderer.js';

export function registerRendererCommand(program: Command): void {
  const renderer = program
    .command('renderer')
    .description(
      'external renderers: serve a built-in renderer over the oscar.dev/render/v1 protocol',
    );

  examples(
    longRunning(
      renderer
        .command('serve')
        .description(
          `serve built-in renderers over HTTP(S): POST ${RENDER_PATH_HELP}, GET /healthz`,
        )
        .requiredOption(
          '--type <type...>',
          'spec.type(s) to serve (repeatable or comma-separated), such as ubuntu or flatcar',
        )
        .option('--listen <addr>', 'host:port to listen on (":0" picks a free port)', ':8443')
        .option('--tls-cert <path>', 'PEM certificate: serve HTTPS (with --tls-key)')
        .option('--tls-key <path>', 'PEM private key of --tls-cert')
        .option(
          '--concurrency <n>',
          'requests read and rendered at once; the others wait, unread, in arrival order (rendering is CPU work, and each body may be 16 MiB)',
          '2',
        )
        .option('--quiet', 'no per-request log lines', false),
    ).action(async (opts: ServeOptions) => {
      await (await import('./renderer.js')).serveCommand(program, opts);
    }),
    [
      'oscar renderer serve --type ubuntu,debian --listen 127.0.0.1:8443',
      'oscar renderer serve --type flatcar --tls-cert tls.crt --tls-key tls.key',
    ],
  );
}
