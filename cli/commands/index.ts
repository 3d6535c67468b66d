/**
 * The command table: every subcommand's name, description, arguments, options and examples — all
 * that `oscar --help` and `oscar X --help` need — and nothing heavier than commander. A command's
 * implementation (./X.js, with the controller, the renderers, express, the Kubernetes client …)
 * is imported only when that command runs, so `oscar agent` on a node does not carry the
 * controller in memory and help answers at once. Only type imports from the implementations here.
 * A command registers itself from its own module (./X-command.ts: help and flags only) and
 * does its work in another (./X.ts); a new command is one line in COMMANDS.
 *
 * Conventions every command follows (docs/cli.md): `-f -` reads stdin; `-o json|yaml` prints the
 * result as data; errors name `file:line` and the field; exit 0 on success, 1 on any error
 * (`oscar plan --detailed-exitcode`: 2 when there are changes); no stack trace unless --debug.
 * The long-running commands (controller, agent, renderer serve, up) share --log-format,
 * --log-level and --shutdown-timeout.
 */
import type { Command } from 'commander';
import { registerValidateCommand } from './validate-command.js';
import { registerRenderCommand } from './render-command.js';
import { registerRendererCommand } from './renderer-command.js';
import { registerExtensionCommand } from './extension-command.js';
import { registerUserDataCommand } from './user-data-command.js';
import { registerCrdCommand } from './crd-command.js';
import { registerControllerCommand } from './controller-command.js';
import { registerRolloutCommand } from './rollout-command.js';
import { registerUpCommand } from './up-command.js';
import { registerCapiCommand } from './capi-command.js';
import { registerCompletionCommand } from './completion-command.js';
import {
  registerAgentCommand,
  registerPlanCommand,
  registerVersionCommand,
} from './node-commands.js';

export { DEFAULT_SHUTDOWN_TIMEOUT, FORMATS_HELP, RENDER_PATH_HELP } from './help.js';

/** Every command, in the order `oscar --help` lists them; a new command is one line here. */
const COMMANDS: ((program: Command) => void)[] = [
  registerValidateCommand,
  registerRenderCommand,
  registerRendererCommand,
  registerExtensionCommand,
  registerUserDataCommand,
  registerCrdCommand,
  registerControllerCommand,
  registerAgentCommand,
  registerPlanCommand,
  registerRolloutCommand,
  registerUpCommand,
  registerCapiCommand,
  registerCompletionCommand,
  registerVersionCommand,
];

export function registerCommands(program: Command): void {
  for (const register of COMMANDS) register(program);
}
