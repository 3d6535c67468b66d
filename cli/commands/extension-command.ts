/**
 * `oscar extension`: serve Cluster API's in-place update hooks. Its help and flags only; the work
 * is in the module it imports when it runs, so the command table loads nothing heavier than
 * commander.
 */
import type { Command } from 'commander';
import { examples, longRunning } from './help.js';
import type { ExtensionServeOptions } from './extension.js';

export function registerExtensionCommand(program: Command): void {
  const extension = program
    .command('extension')
    .description(
      "Cluster API's Runtime Extension: in-place machine updates through oscar (docs/cluster-api.md)",
    );

  examples(
    longRunning(
      extension
        .command('serve')
        .description(
          'serve the in-place update hooks over HTTPS: discovery, CanUpdateMachineSet, CanUpdateMachine, UpdateMachine',
        )
        .option(
          '--kubeconfig <path>',
          'kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, then the in-cluster ServiceAccount)',
        )
        .option('--context <name>', 'the kubeconfig context to use (default: its current-context)')
        .option('--listen <addr>', 'host:port to listen on (":0" picks a free port)', ':9443')
        .option(
          '--concurrency <n>',
          'hook calls read and handled at once; the others wait, unread, in arrival order (each body may be 8 MiB)',
          '4',
        )
        .option(
          '--metrics-addr <addr>',
          'host:port for /metrics and /healthz over plain HTTP, apart from the hooks (default: none)',
        )
        .requiredOption(
          '--tls-cert <path>',
          "PEM serving certificate (the ExtensionConfig's caBundle signs it)",
        )
        .requiredOption('--tls-key <path>', 'PEM private key of --tls-cert'),
    ).action(async (opts: ExtensionServeOptions) => {
      await (await import('./extension.js')).extensionServeCommand(program, opts);
    }),
    ['oscar extension serve --tls-cert /tls/tls.crt --tls-key /tls/tls.key --listen :9443'],
  );
}
