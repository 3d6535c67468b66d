/**
 * `oscar user-data`: print a machine's user data. Its help and flags only; the work is in the
 * module it imports when it runs, so the command table loads nothing heavier than commander.
 */
import type { Command } from 'commander';
import { examples } from './help.js';
import type { UserDataOptions } from './user-data.js';

export function registerUserDataCommand(program: Command): void {
  examples(
    program
      .command('user-data')
      .description(
        "print a machine's user data from its OscarConfig (the Secret in status.dataSecretName)",
      )
      .argument('<name>', 'the OscarConfig')
      .option('-n, --namespace <ns>', 'its namespace', 'default')
      .option(
        '--kubeconfig <path>',
        'kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, then in-cluster)',
      )
      .option('--context <name>', 'the kubeconfig context to use (default: its current-context)')
      .option('--out <file>', 'write it to this file (mode 0600) instead of stdout')
      .action(async (name: string, opts: UserDataOptions) => {
        await (await import('./user-data.js')).userDataCommand(program, name, opts);
      }),
    [
      'oscar user-data worker-1 -n machines > user-data',
      'oscar user-data worker-1 --out worker-1.ud',
    ],
  );
}
