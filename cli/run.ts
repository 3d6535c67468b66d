/**
 * Running a command program: one line per error naming the command (its stack only with --debug),
 * exit 1. Shared by the full `oscar` (./main.ts) and the agent's own executable (./agent-main.ts).
 */
import type { Command } from 'commander';

/** The command a failure belongs to (`oscar controller`), for the one-line error. */
function commandName(program: string, argv: readonly string[]): string {
  const sub = argv.slice(2).find((a) => !a.startsWith('-'));
  return sub ? `${program} ${sub}` : program;
}

/**
 * An error as a person reads it: one line naming the command and what to do. Its stack only with
 * --debug (or OSCAR_DEBUG=1): a stack trace tells an operator nothing and hides the message.
 */
export function reportError(
  error: unknown,
  argv: readonly string[],
  debug: boolean,
  program = 'oscar',
): string {
  const message = error instanceof Error ? error.message : String(error);
  const head = `${commandName(program, argv)}: ${message}`;
  if (debug && error instanceof Error && error.stack) return `${head}\n${error.stack}`;
  return head;
}

export async function runProgram(program: Command, argv: string[]): Promise<void> {
  const debug = argv.includes('--debug') || process.env.OSCAR_DEBUG === '1';
  const name = program.name();
  // Failures outside the command's own await (a timer, a stream): the same one line, exit 1.
  const fatal = (error: unknown): void => {
    process.stderr.write(`${reportError(error, argv, debug, name)}\n`);
    process.exit(1);
  };
  // `oscar crd | head`: a reader that closed the pipe wants no more, which is not an error
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'EPIPE') process.exit(0);
    fatal(error);
  });
  process.on('uncaughtException', fatal);
  process.on('unhandledRejection', fatal);
  try {
    await program.parseAsync(argv);
  } catch (error) {
    process.stderr.write(`${reportError(error, argv, debug, name)}\n`);
    process.exitCode = 1;
    // a long-running command that failed while starting may hold a timer or a socket: end anyway
    setTimeout(() => process.exit(1), 1_000).unref();
  }
}
