/**
 * `oscar completion`: print a shell completion script. Its help and flags only; the work is in the
 * module it imports when it runs, so the command table loads nothing heavier than commander.
 */
import { Argument, type Command } from 'commander';
import { examples } from './help.js';

export function registerCompletionCommand(program: Command): void {
  examples(
    program
      .command('completion')
      .description('print a shell completion script for oscar (bash, zsh or fish)')
      .addArgument(new Argument('<shell>', 'the shell').choices(['bash', 'zsh', 'fish']))
      .action(async (shell: 'bash' | 'zsh' | 'fish') => {
        const { completionScript } = await import('../support/completion.js');
        process.stdout.write(completionScript(program, shell));
      }),
    [
      'oscar completion bash > /etc/bash_completion.d/oscar',
      'source <(oscar completion bash)          # or in ~/.bashrc',
      'source <(oscar completion zsh)           # in ~/.zshrc',
      'oscar completion fish | source           # in ~/.config/fish/config.fish',
    ],
  );
}
