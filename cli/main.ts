import { Command } from 'commander';
import { registerCommands } from './commands/index.js';
import { VERSION } from './version.js';

export function buildProgram(): Command {
  const program = new Command('oscar')
    .description(
      'OS Config Agent & Renderer: declare node units and files once, render them per OS, keep nodes in sync',
    )
    .version(VERSION, '-v, --version')
    .showHelpAfterError();
  registerCommands(program);
  return program;
}

export async function main(argv: string[]): Promise<void> {
  await buildProgram().parseAsync(argv);
}
