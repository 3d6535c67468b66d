/**
 * `oscar render`: render an OperatingSystemConfig into user data. Its help and flags only; the work
 * is in the module it imports when it runs, so the command table loads nothing heavier than
 * commander.
 */
import { InvalidArgumentError, Option, type Command } from 'commander';
import { examples, FORMATS_HELP } from './help.js';
import type { PlaceholderFlags } from './placeholders.js';
import type { RenderCommandOptions } from './render.js';

export function registerRenderCommand(program: Command): void {
  examples(
    program
      .command('render')
      .description(
        'render an OperatingSystemConfig into user data (cloud-config, Ignition or a shell script); exit 1 on invalid input',
      )
      .argument('[file]', 'the OperatingSystemConfig YAML file (or -f)')
      .option('-f, --file <file>', 'the OperatingSystemConfig YAML file ("-" reads stdin)')
      .option('--format <format>', `output format, overriding spec.format (${FORMATS_HELP})`)
      .option('--out <file>', 'write the user data to this file (mode 0600) instead of stdout')
      .option('--gzip', 'gzip the whole payload (cloud-config only)')
      .option(
        '--explain',
        'print what each file, unit and package became (the user data then goes only to --out)',
      )
      .addOption(
        new Option('-o, --output <format>', 'print --explain as data (json, yaml)').argParser(
          (value: string) => {
            if (value === 'json' || value === 'yaml') return value;
            // before -o meant the output format everywhere, `render -o FILE` wrote the user data
            throw new InvalidArgumentError(
              `-o is the form of --explain (json or yaml); to write the user data to "${value}" use --out ${value}`,
            );
          },
        ),
      )
      .option(
        '--ref-dir <dir>',
        'data of referenced objects: DIR/secrets/<name>/<key> and DIR/configmaps/<name>/<key>',
      )
      .option(
        '--values <key=value...>',
        'substitute {{ values.KEY }} placeholders of a provision OSC (repeatable or comma-separated)',
      )
      .option('--machine <name>', 'substitute {{ machine.name }} (and {{ machine.namespace }})')
      .option('--cluster <name>', 'substitute {{ cluster.name }}')
      .option('--api-server <url>', 'substitute {{ apiServer.url }} (and {{ apiServer.endpoint }})')
      .action(
        async (
          file: string | undefined,
          opts: Omit<RenderCommandOptions, 'file'> & { file?: string } & PlaceholderFlags,
        ) => {
          const { oneFile } = await import('../support/input.js');
          await (
            await import('./render.js')
          ).renderCommand({
            ...opts,
            file: oneFile('render', file, opts.file),
          });
        },
      ),
    [
      'oscar render examples/ubuntu-provision.yaml > user-data',
      'oscar render -f examples/flatcar.yaml --out config.ign',
      'oscar render -f worker.yaml --format script --ref-dir ./refs',
      'oscar render -f worker.yaml --explain -o yaml',
      'oscar render -f provision.yaml --machine m1 --cluster c1 --values region=eu-1',
    ],
  );
}
