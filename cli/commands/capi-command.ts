/**
 * `oscar capi`: Cluster API: preview of in-place update or replacement. Its help and flags only;
 * the work is in the module it imports when it runs, so the command table loads nothing heavier
 * than commander.
 */
import type { Command } from 'commander';
import { examples, outputOption } from './help.js';
import type { CapiPreviewFlags } from './capi.js';

export function registerCapiCommand(program: Command): void {
  const capi = program
    .command('capi')
    .description(
      'Cluster API: what oscar and Cluster API will do with your machines (docs/cluster-api.md)',
    );

  examples(
    capi
      .command('preview')
      .description(
        "before a rollout: will machines whose reconcileRef moves FROM → TO be updated in place through oscar, or replaced? The Runtime Extension's own decision; exit 2 with --detailed-exitcode when they are replaced",
      )
      .argument('<from>', 'the reconcile OSC machines follow now: a file, or an OSC in the cluster')
      .argument(
        '<to>',
        'the reconcile OSC the new template names: a file, or an OSC in the cluster',
      )
      .option('-n, --namespace <ns>', 'namespace of the OSCs in the cluster', 'default')
      .option(
        '--kubeconfig <path>',
        'kubeconfig (default: $KUBECONFIG, ~/.kube/config, then the in-cluster ServiceAccount)',
      )
      .option('--context <name>', 'the kubeconfig context to use (default: its current-context)')
      .addOption(outputOption('the decision'))
      .option(
        '--detailed-exitcode',
        'exit 0 when machines are updated in place (or unchanged), 2 when they are replaced, 1 on an error',
      )
      .action(async (from: string, to: string, flags: CapiPreviewFlags) => {
        await (await import('./capi.js')).capiPreviewCommand(from, to, flags);
      }),
    [
      'oscar capi preview worker-v1 worker-v2 -n machines     # two reconcile OSCs in the cluster',
      'oscar capi preview old.yaml new.yaml --detailed-exitcode   # two files, offline; exit 2: replaced',
      'oscar capi preview worker-v1 new.yaml -o json',
    ],
  );
}
