/**
 * `oscar validate`: check OperatingSystemConfig files as the controller would. Its help and flags
 * only; the work is in the module it imports when it runs, so the command table loads nothing
 * heavier than commander.
 */
import type { Command } from 'commander';
import { examples, outputOption } from './help.js';
import type { ValidateOptions } from './validate.js';

export function registerValidateCommand(program: Command): void {
  examples(
    program
      .command('validate')
      .description(
        'check OperatingSystemConfig files as the controller would: schema, deep checks, spec.type and format, a dry render; exit 1 on any problem',
      )
      .option('-f, --file <file...>', 'files to validate ("-" reads stdin)')
      .argument('[files...]', 'more files to validate')
      .option('--strict', 'fail on warnings too (a provision payload above 16 KiB, …)')
      .addOption(outputOption('the results'))
      .option(
        '--renderers-config <path>',
        "the controller's external renderers file: their types are valid spec.type values",
      )
      .option(
        '--ref-dir <dir>',
        'data of referenced objects (DIR/secrets/<name>/<key>, DIR/configmaps/<name>/<key>), to dry-render OSCs that reference them',
      )
      .option(
        '--values <key=value...>',
        'substitute {{ values.KEY }} placeholders of a provision OSC (repeatable or comma-separated)',
      )
      .option('--machine <name>', 'substitute {{ machine.name }} (and {{ machine.namespace }})')
      .option('--cluster <name>', 'substitute {{ cluster.name }}')
      .option('--api-server <url>', 'substitute {{ apiServer.url }} (and {{ apiServer.endpoint }})')
      .action(async (args: string[], opts: ValidateOptions) => {
        await (await import('./validate.js')).validateCommand(program, args, opts);
      }),
    [
      'oscar validate -f worker.yaml',
      'oscar validate examples/*.yaml --strict',
      'kubectl get osc worker -o yaml | oscar validate -f -',
      'oscar validate -f all.yaml -o json          # results as data',
      'oscar validate -f osc.yaml --renderers-config renderers.yaml   # accept external types',
      'oscar validate -f provision.yaml --machine m1 --values region=eu-1   # placeholders substituted',
    ],
  );
}
