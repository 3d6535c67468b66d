/**
 * `oscar crd`: print oscar's CustomResourceDefinitions. Its help and flags only; the work is in the
 * module it imports when it runs, so the command table loads nothing heavier than commander.
 */
import type { Command } from 'commander';
import { examples } from './help.js';

export function registerCrdCommand(program: Command): void {
  examples(
    program
      .command('crd')
      .description("print oscar's CustomResourceDefinitions (kubectl apply -f -)")
      .action(async () => {
        (await import('./crd.js')).crdCommand();
      }),
    ['oscar crd | kubectl apply -f -'],
  );
}
