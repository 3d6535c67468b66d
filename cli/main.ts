import { Command } from 'commander';
import { registerCommands } from './commands/index.js';
import { VERSION } from './version.js';

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

/** The command a failure belongs to (`oscar controller`), for the one-line error. */
function commandName(argv: readonly string[]): string {
  const sub = argv.slice(2).find((a) => !a.startsWith('-'));
  return sub ? `oscar ${sub}` : 'oscar';
}

/**
 * An error as a person reads it: one line naming the command and what to do. Its stack only with
 * --debug (or OSCAR_DEBUG=1): a stack trace tells an operator nothing and hides the message.
 */
export function reportError(error: unknown, argv: readonly string[], debug: boolean): string {
  const message = error instanceof Error ? error.message : String(error);
  const head = `${commandName(argv)}: ${message}`;
  if (debug && error instanceof Error && error.stack) return `${head}\n${error.stack}`;
  return head;
}

export async function main(argv: string[]): Promise<void> {
  const debug = argv.includes('--debug') || process.env.OSCAR_DEBUG === '1';
  // Failures outside the command's own await (a timer, a stream): the same one line, exit 1.
  const fatal = (error: unknown): void => {
    process.stderr.write(`${reportError(error, argv, debug)}\n`);
    process.exit(1);
  };
  process.on('uncaughtException', fatal);
  process.on('unhandledRejection', fatal);
  try {
    await buildProgram().parseAsync(argv);
  } catch (error) {
    process.stderr.write(`${reportError(error, argv, debug)}\n`);
    process.exitCode = 1;
    // a long-running command that failed while starting may hold a timer or a socket: end anyway
    setTimeout(() => process.exit(1), 1_000).unref();
  }
}
