/**
 * What every command's help shares: the examples block, -o, and the flags of the long-running
 * commands. Nothing heavier than commander: the agent's own executable (cli/agent-main.ts) and the
 * full command table (./index.ts) both build on it.
 */
import { Option, type Command } from 'commander';

/** The formats of api/schema.ts FORMATS, spelled out so help does not load the schema. */
export const FORMATS_HELP = 'cloud-config, ignition, script';
/** renderers/webhook/server.ts RENDER_PATH, spelled out so help does not load express. */
export const RENDER_PATH_HELP = '/render';

/** How long SIGTERM may take before the process ends anyway (cli/support/shutdown.ts). */
export const DEFAULT_SHUTDOWN_TIMEOUT = '15s';

/** The examples block of a command's help. */
export function examples(command: Command, lines: string[]): Command {
  return command.addHelpText('after', `\nExamples:\n${lines.map((l) => `  ${l}`).join('\n')}\n`);
}

export function outputOption(what: string): Option {
  return new Option('-o, --output <format>', `print ${what} as data`).choices(['json', 'yaml']);
}

/** The flags of every long-running command: how it logs and how long it may take to stop. */
export function longRunning(command: Command): Command {
  return command
    .addOption(
      new Option(
        '--log-format <format>',
        'json, or text for a person (default: json in a pod and when stderr is not a terminal, else text)',
      ).choices(['json', 'text']),
    )
    .addOption(
      new Option('--log-level <level>', 'how much to log (default: $OSCAR_LOG_LEVEL, else info)')
        .choices(['trace', 'debug', 'info', 'warn', 'error', 'silent'])
        .default(undefined),
    )
    .option(
      '--shutdown-timeout <duration>',
      'longest time from SIGTERM to exit: work in flight finishes or is cut off (the agent journals it)',
      DEFAULT_SHUTDOWN_TIMEOUT,
    );
}
