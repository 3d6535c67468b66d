/**
 * The entry point of the agent's single executable (hack/agent/build.ts): only the commands a node
 * runs (agent, plan, version), so the executable carries no controller, renderers, express or
 * Kubernetes client library. CommonJS once bundled (a single executable application runs a
 * CommonJS script), so no top-level await here.
 */
import { Command } from 'commander';
import {
  registerAgentCommand,
  registerPlanCommand,
  registerVersionCommand,
} from './commands/node-commands.js';
import { runProgram } from './run.js';
import { VERSION } from './support/version.js';

export function buildAgentProgram(): Command {
  const program = new Command('oscar-agent')
    .description(
      "oscar's node agent: applies the OperatingSystemConfig its node follows, in place (the full `oscar` command has the rest)",
    )
    .version(VERSION, '-v, --version')
    .option('--debug', 'print the stack trace of an error (errors are one line without it)')
    .showHelpAfterError();
  registerAgentCommand(program);
  registerPlanCommand(program);
  registerVersionCommand(program);
  return program;
}

runProgram(buildAgentProgram(), process.argv).catch((error: unknown) => {
  process.stderr.write(`oscar-agent: ${String(error)}\n`);
  process.exit(1);
});
