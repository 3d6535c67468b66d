/**
 * `oscar capi …`: the command table of the Cluster API commands (the work is in ./capi.ts, loaded
 * when a command runs, so `oscar --help` loads none of it).
 */
import type { Command } from 'commander';
import type { CapiPreviewFlags } from './capi.js';
import { examples, outputOption } from './help.js';

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
        "before a rollout: will machines be updated in place through oscar, or replaced? For two reconcile OSCs (FROM TO), or per Machine of a MachineDeployment moved to a new OscarConfigTemplate (--machine-deployment MD TEMPLATE). The Runtime Extension's own decision; exit 2 with --detailed-exitcode when any is replaced",
      )
      .argument(
        '<from>',
        'the reconcile OSC machines follow now (a file, or an OSC in the cluster); with --machine-deployment, the new OscarConfigTemplate (a file, or one in the cluster)',
      )
      .argument(
        '[to]',
        'the reconcile OSC the new template names: a file, or an OSC in the cluster',
      )
      .option(
        '--machine-deployment <name>',
        'preview each Machine of this MachineDeployment, were its bootstrap configRef moved to the template given',
      )
      .option(
        '-n, --namespace <ns>',
        'namespace of the OSCs and Cluster API objects in the cluster',
        'default',
      )
      .option(
        '--kubeconfig <path>',
        'kubeconfig (default: $KUBECONFIG, ~/.kube/config, then the in-cluster ServiceAccount)',
      )
      .option('--context <name>', 'the kubeconfig context to use (default: its current-context)')
      .addOption(outputOption('the decision'))
      .option(
        '--detailed-exitcode',
        'exit 0 when machines are updated in place (or unchanged), 2 when any is replaced, 1 on an error',
      )
      .action(async (from: string, to: string | undefined, flags: CapiPreviewFlags) => {
        await (await import('./capi.js')).capiPreviewCommand(from, to, flags);
      }),
    [
      'oscar capi preview worker-v1 worker-v2 -n machines     # two reconcile OSCs in the cluster',
      'oscar capi preview old.yaml new.yaml --detailed-exitcode   # two files, offline; exit 2: replaced',
      'oscar capi preview worker-v1 new.yaml -o json',
      'oscar capi preview --machine-deployment workers workers-v2 -n machines   # per Machine',
    ],
  );
}
