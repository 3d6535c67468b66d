/**
 * `oscar up`: apply a folder of OSCs to sandbox roots. Its help and flags only; the work is in the
 * module it imports when it runs, so the command table loads nothing heavier than commander.
 */
import type { Command } from 'commander';
import { examples, longRunning } from './help.js';
import type { UpFlags } from './up.js';

export function registerUpCommand(program: Command): void {
  examples(
    longRunning(
      program
        .command('up')
        .description(
          'watch a folder of OperatingSystemConfigs (default examples/) and apply each to a sandbox root under .oscar/root/<name>/, printing the plan on every save',
        )
        .argument('[dir]', 'folder of OSC YAML files', 'examples')
        .option('--out <dir>', 'where the sandbox roots go', '.oscar')
        .option('--once', 'apply everything once and exit (exit 1 if anything failed)'),
    ).action(async (dir: string, flags: UpFlags) => {
      await (await import('./up.js')).upCommand(dir, flags);
    }),
    [
      'oscar up                       # examples/ → .oscar/root/<name>/',
      'oscar up my-oscs/ --once',
    ],
  );
}
