import { Command } from 'commander';
import { registerCommands } from './commands/index.js';
import { runProgram } from './run.js';
import { VERSION } from './support/version.js';

export function buildProgram(): Command {
  const program = new Command('oscar')
    .description(
      'OS Config Agent & Renderer: declare node units and files once, render them per OS, keep nodes in sync',
    )
    .version(VERSION, '-v, --version')
    .option('--debug', 'print the stack trace of an error (errors are one line without it)')
    .showHelpAfterError()
    .addHelpText(
      'after',
      [
        '',
        'Examples:',
        '  oscar up                                  # examples/ applied to sandbox roots, on every save',
        '  oscar validate -f my-osc.yaml --strict    # as the controller would check it',
        '  oscar plan -f my-osc.yaml --root /        # what the agent would do here, with diffs',
        '  oscar COMMAND --help                      # each command, with examples (docs/cli.md)',
        '',
      ].join('\n'),
    );
  registerCommands(program);
  return program;
}

export { reportError } from './run.js';

export async function main(argv: string[]): Promise<void> {
  await runProgram(buildProgram(), argv);
}
