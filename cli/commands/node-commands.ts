/**
 * The commands a node runs — agent, plan, version — registered apart from the rest of the command
 * table, so the agent's single executable (cli/agent-main.ts, hack/agent/build.ts) carries only
 * them: no controller, renderers, express or Kubernetes client library. ./index.ts registers them
 * too, for the full `oscar`. Only type imports from the implementations here.
 */
import type { Command } from 'commander';
import { limitJitForAgent, tuneHeapForLongRunning } from '../support/memory.js';
import type { AgentFlags } from './agent.js';
import { examples, longRunning, outputOption } from './help.js';
import type { PlanOptions } from './plan.js';

/** What the agent follows: grants (--osc), a Secret or a file, and the node it reports as. */
function sourceOptions(c: Command): Command {
  return c
    .option(
      '--file <file>',
      'follow a local file (OSC YAML or canonical JSON) instead of a Secret ("-": read stdin once)',
    )
    .option('-n, --namespace <ns>', 'namespace of the OSC and its Secrets')
    .option(
      '--osc <name>',
      'grant mode: apply the revisions of this reconcile OSC that the controller grants this node, in try mode (docs/rollouts.md)',
    )
    .option(
      '--secret <name>',
      'follow the latest reconcile Secret with this name (no rollout gate)',
    )
    .option(
      '--node <name>',
      "this node's name: the OperatingSystemConfigNode the agent reports to (default: $NODE_NAME)",
    )
    .option(
      '--poll-interval <seconds>',
      'metadata-only poll of the Secret, the safety net under the watch',
      '120',
    );
}

/** How the agent reaches the API server: a kubeconfig, or the node's own certificate. */
function credentialOptions(c: Command): Command {
  return c
    .option(
      '--kubeconfig <path>',
      'kubeconfig (default: $KUBECONFIG, ~/.kube/config, then the in-cluster ServiceAccount)',
    )
    .option('--context <name>', 'the kubeconfig context to use (default: its current-context)')
    .option(
      '--bootstrap-kubeconfig <path>',
      "the machine's bootstrap kubeconfig (docs/identity.md): the agent trades its token for a certificate of its own, kept in --cert-dir and renewed",
    )
    .option(
      '--config-uid <uid>',
      "with --bootstrap-kubeconfig: the UID of the machine's OscarConfig, which its certificate is bound to (the user data passes it)",
    )
    .option('--cert-dir <dir>', "where the node's key and certificate live", '/var/lib/oscar/pki')
    .option(
      '--certificate-lifetime <duration>',
      "the node certificate's lifetime to ask for (at most the controller's --node-certificate-max-lifetime)",
      '168h',
    );
}

/** Where the agent applies, keeps its state and serves its health. */
function nodeOptions(c: Command): Command {
  return c
    .option(
      '--root <dir>',
      'root to apply into: "/" is this machine; a directory is local mode',
      '/',
    )
    .option('--state-dir <dir>', 'state directory (default /var/lib/oscar under the root)')
    .option('--metrics-addr <host:port>', 'serve /healthz and /metrics here (e.g. 127.0.0.1:9464)')
    .option('--once', 'apply the current desired state once and exit (exit 1 on failure)');
}

/** How the agent watches for drift. */
function driftOptions(c: Command): Command {
  return c
    .option(
      '--drift-audit-interval <seconds>',
      'full drift audit (hashes, modes, owners, unit states) this often; inotify reports in between (0: only at start and before applies)',
      '300',
    )
    .option(
      '--drift-revert-backoff <seconds>',
      'with driftPolicy Revert: the wait before a second revert in a row, doubling with each further one (up to 5 min; 10 quiet minutes reset it; 0: no backoff)',
      '1',
    )
    .option('--no-drift', 'do not watch for drift (files or units changed by someone else)');
}

/** The agent's flags (AgentFlags, ./agent.ts), in groups. */
function agentOptions(c: Command): Command {
  return driftOptions(nodeOptions(credentialOptions(sourceOptions(c))));
}

export function registerAgentCommand(program: Command): void {
  examples(
    longRunning(
      agentOptions(
        program
          .command('agent')
          .description(
            'run the node agent: apply the revisions the controller grants (--osc), the latest reconcile Secret (--secret) or a local file (--file) in place; report per node',
          ),
      ),
    ).action(async (flags: AgentFlags) => {
      tuneHeapForLongRunning(); // before the agent's modules load: loading grows the heap too
      limitJitForAgent();
      await (await import('./agent.js')).agentCommand(flags);
    }),
    [
      'oscar agent -n default --osc worker-reconcile --node "$(hostname)"   # grant mode',
      'oscar agent -n default --secret oscar-worker-reconcile-reconcile --node "$(hostname)"   # the Secret of OSC worker-reconcile',
      'oscar agent --file osc.yaml --root /tmp/node           # local mode, no cluster',
      'cat osc.yaml | oscar agent --file - --once --root /tmp/node',
    ],
  );
}

export function registerPlanCommand(program: Command): void {
  examples(
    program
      .command('plan')
      .description(
        'dry run of the agent: what applying a config (OSC YAML or canonical JSON) to a root would do, with reasons and diffs',
      )
      .argument('[file]', 'the desired config (or -f)')
      .option(
        '-f, --file <file>',
        'the desired config: OperatingSystemConfig YAML or canonical JSON ("-" reads stdin)',
      )
      .option('--root <dir>', 'root to compare against ("/" is this machine)', '/')
      .option('--state-dir <dir>', 'agent state directory (default /var/lib/oscar under the root)')
      .addOption(outputOption('the plan'))
      .option(
        '--detailed-exitcode',
        'exit 0 when there is nothing to do, 2 when there are changes, 1 on an error',
      )
      .option('--no-diff', 'no unified diffs of the files that would change')
      .option(
        '--diff-private',
        'also diff files that are not world-readable (their content may be a credential)',
      )
      .action(
        async (file: string | undefined, opts: Omit<PlanOptions, 'file'> & { file?: string }) => {
          const { oneFile } = await import('../support/input.js');
          await (
            await import('./plan.js')
          ).planCommand({ ...opts, file: oneFile('plan', file, opts.file) });
        },
      ),
    [
      'oscar plan -f examples/generic.yaml --root .oscar/root/generic-edge',
      'oscar plan -f osc.yaml --detailed-exitcode; echo $?   # 0 nothing to do, 2 changes, 1 error',
      'kubectl get secret oscar-worker-reconcile-reconcile -o jsonpath="{.data.config\\.json}" | base64 -d | oscar plan -f -',
      'oscar plan osc.yaml --root / -o json',
    ],
  );
}

export function registerVersionCommand(program: Command): void {
  examples(
    program
      .command('version')
      .description('print the oscar version and the API version it serves')
      .addOption(outputOption('the versions'))
      .action(async (opts: { output?: 'json' | 'yaml' }) => {
        (await import('./version.js')).versionCommand(opts);
      }),
    ['oscar version', 'oscar version -o json'],
  );
}
