/**
 * `oscar rollout`: the rollout of a reconcile OSC: status, pause, resume, undo. Its help and flags
 * only; the work is in the module it imports when it runs, so the command table loads nothing
 * heavier than commander.
 */
import type { Command } from 'commander';
import { examples } from './help.js';
import type { RolloutFlags } from './rollout.js';

export function registerRolloutCommand(program: Command): void {
  const rollout = program
    .command('rollout')
    .description(
      'the rollout of a reconcile OperatingSystemConfig to the nodes that follow grants (docs/rollouts.md)',
    );

  const rolloutCommand = (
    name: 'status' | 'pause' | 'resume' | 'undo',
    description: string,
  ): Command =>
    rollout
      .command(name)
      .description(description)
      .argument('<osc>', 'the OperatingSystemConfig')
      .option('-n, --namespace <ns>', 'its namespace', 'default')
      .option(
        '--kubeconfig <path>',
        'kubeconfig (default: $KUBECONFIG, ~/.kube/config, then the in-cluster ServiceAccount)',
      )
      .option('--context <name>', 'the kubeconfig context to use (default: its current-context)');

  const run =
    (f: 'rolloutStatus' | 'rolloutPause' | 'rolloutResume' | 'rolloutUndo') =>
    async (osc: string, flags: RolloutFlags): Promise<void> => {
      try {
        process.exitCode = await (await import('./rollout.js'))[f](osc, flags);
      } catch (error) {
        process.stderr.write(`oscar rollout: ${(error as Error).message}
`);
        process.exitCode = 1;
      }
    };

  examples(
    rolloutCommand(
      'status',
      'print the rollout; --watch waits until it completes (exit 0) or pauses on failures (exit 1)',
    )
      .option('-w, --watch', 'wait for the rollout to complete')
      .option('--timeout <duration>', 'with --watch: give up after this long (90s, 10m, 1h)', '10m')
      .action(run('rolloutStatus')),
    [
      'oscar rollout status worker-reconcile -n default',
      'oscar rollout status worker-reconcile --watch --timeout 30m',
    ],
  );

  examples(
    rolloutCommand(
      'pause',
      'grant the new revision to no further node (spec.rollout.paused)',
    ).action(run('rolloutPause')),
    ['oscar rollout pause worker-reconcile -n default'],
  );

  examples(
    rolloutCommand(
      'resume',
      'continue a paused rollout: after a manual pause, a canary pause, or failures (failed nodes are retried)',
    ).action(run('rolloutResume')),
    ['oscar rollout resume worker-reconcile -n default'],
  );

  examples(
    rolloutCommand('undo', 'send every node back to the stable revision (or --to-revision)')
      .option('--to-revision <n>', 'the kept revision to go back to')
      .action(run('rolloutUndo')),
    [
      'oscar rollout undo worker-reconcile -n default',
      'oscar rollout undo worker-reconcile --to-revision 3',
    ],
  );
}
