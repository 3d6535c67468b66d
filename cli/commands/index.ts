/**
 * The command table: every subcommand's name, description, arguments and options — all that
 * `oscar --help` and `oscar X --help` need — and nothing heavier than commander. A command's
 * implementation (./X.js, with the controller, the renderers, express, the Kubernetes client …)
 * is imported only when that command runs, so `oscar agent` on a node does not carry the
 * controller in memory and help answers at once. Only type imports from the implementations here.
 * Add a new command here and put its work in its own module.
 */
import type { Command } from 'commander';
import { tuneHeapForLongRunning } from '../memory.js';
import type { AgentFlags } from './agent.js';
import type { ControllerOptions } from './controller.js';
import type { RenderCommandOptions } from './render.js';
import type { RolloutFlags } from './rollout.js';
import type { ServeOptions } from './renderer.js';
import type { UpFlags } from './up.js';

/** The formats of api/schema.ts FORMATS, spelled out so help does not load the schema. */
export const FORMATS_HELP = 'cloud-config, ignition, script';
/** renderers/webhook/server.ts RENDER_PATH, spelled out so help does not load express. */
export const RENDER_PATH_HELP = '/render';

export function registerCommands(program: Command): void {
  program
    .command('validate')
    .description(
      'validate OperatingSystemConfig YAML files (multi-document); exit 1 on any problem',
    )
    .option('-f, --file <file...>', 'files to validate')
    .argument('[files...]', 'more files to validate')
    .action(async (args: string[], opts: { file?: string[] }) => {
      await (await import('./validate.js')).validateCommand(program, args, opts);
    });

  program
    .command('render')
    .description(
      'render an OperatingSystemConfig into user data (cloud-config, Ignition or a shell script); exit 1 on invalid input',
    )
    .requiredOption('-f, --file <file>', 'the OperatingSystemConfig YAML file')
    .option('--format <format>', `output format, overriding spec.format (${FORMATS_HELP})`)
    .option('-o, --output <file>', 'write the user data to this file (mode 0600) instead of stdout')
    .option('--gzip', 'gzip the whole payload (cloud-config only)')
    .option(
      '--explain',
      'print a table of what each file, unit and package became (the user data then goes only to -o)',
    )
    .option(
      '--ref-dir <dir>',
      'data of referenced objects: DIR/secrets/<name>/<key> and DIR/configmaps/<name>/<key>',
    )
    .action(async (opts: RenderCommandOptions) => {
      await (await import('./render.js')).renderCommand(opts);
    });

  const renderer = program
    .command('renderer')
    .description(
      'external renderers: serve a built-in renderer over the oscar.dev/render/v1 protocol',
    );
  renderer
    .command('serve')
    .description(`serve built-in renderers over HTTP(S): POST ${RENDER_PATH_HELP}, GET /healthz`)
    .requiredOption(
      '--type <type...>',
      'spec.type(s) to serve (repeatable or comma-separated), such as ubuntu or flatcar',
    )
    .option('--listen <addr>', 'host:port to listen on (":0" picks a free port)', ':8443')
    .option('--tls-cert <path>', 'PEM certificate: serve HTTPS (with --tls-key)')
    .option('--tls-key <path>', 'PEM private key of --tls-cert')
    .option('--quiet', 'no per-request log lines', false)
    .action(async (opts: ServeOptions) => {
      await (await import('./renderer.js')).serveCommand(program, opts);
    });

  program
    .command('crd')
    .description("print oscar's CustomResourceDefinitions (kubectl apply -f -)")
    .action(async () => {
      (await import('./crd.js')).crdCommand();
    });

  program
    .command('controller')
    .description(
      'run the controller: render every OperatingSystemConfig into its Secret and keep status honest',
    )
    .option(
      '--kubeconfig <path>',
      'kubeconfig to use (default: in-cluster, $KUBECONFIG, ~/.kube/config)',
    )
    .option(
      '-n, --namespace <ns...>',
      'namespaces to watch (repeatable or comma-separated); default: all namespaces',
    )
    .option(
      '--metrics-addr <addr>',
      'host:port for /metrics, /healthz, /readyz ("0" disables)',
      ':8080',
    )
    .option('--leader-elect', 'elect a leader on a Lease so only one replica reconciles', false)
    .option(
      '--lease-namespace <ns>',
      'namespace of the Lease (default $POD_NAMESPACE or the first watched namespace)',
    )
    .option('--lease-name <name>', 'name of the Lease', 'oscar-controller')
    .option(
      '--lease-duration <duration>',
      'how long a Lease lasts without renewal (e.g. 15s)',
      '15s',
    )
    .option(
      '--concurrency <n>',
      'reconciles in parallel (mostly waiting on API round trips, so more than the CPUs)',
      '16',
    )
    .option('--log-level <level>', 'trace, debug, info, warn, error', 'info')
    // external renderers (renderers/webhook): type → URL, from a file or a mounted ConfigMap
    .option(
      '--renderers-config <path>',
      'YAML/JSON mapping spec.type → {url, formats, caFile|caBundle, timeoutSeconds} of external renderers (docs/renderer-protocol.md)',
    )
    .action(async (opts: ControllerOptions) => {
      tuneHeapForLongRunning(); // before the controller's modules load
      await (await import('./controller.js')).controllerCommand(program, opts);
    });

  program
    .command('agent')
    .description(
      'run the node agent: apply the revisions the controller grants (--osc), the latest reconcile Secret (--secret) or a local file (--file) in place; report per node',
    )
    .option('--file <file>', 'follow a local file (OSC YAML or canonical JSON) instead of a Secret')
    .option(
      '--kubeconfig <path>',
      'kubeconfig (default: $KUBECONFIG, ~/.kube/config, then in-cluster)',
    )
    .option('--namespace <ns>', 'namespace of the OSC and its Secrets')
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
    )
    .option(
      '--root <dir>',
      'root to apply into: "/" is this machine; a directory is local mode',
      '/',
    )
    .option('--state-dir <dir>', 'state directory (default /var/lib/oscar under the root)')
    .option('--metrics-addr <host:port>', 'serve /healthz and /metrics here (e.g. 127.0.0.1:9464)')
    .option('--once', 'apply the current desired state once and exit (exit 1 on failure)')
    .action(async (flags: AgentFlags) => {
      tuneHeapForLongRunning(); // before the agent's modules load: loading grows the heap too
      await (await import('./agent.js')).agentCommand(flags);
    });

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
        'kubeconfig (default: $KUBECONFIG, ~/.kube/config, then in-cluster)',
      );
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
  rolloutCommand(
    'status',
    'print the rollout; --watch waits until it completes (exit 0) or pauses on failures (exit 1)',
  )
    .option('-w, --watch', 'wait for the rollout to complete')
    .option('--timeout <duration>', 'with --watch: give up after this long (90s, 10m, 1h)', '10m')
    .action(run('rolloutStatus'));
  rolloutCommand('pause', 'grant the new revision to no further node (spec.rollout.paused)').action(
    run('rolloutPause'),
  );
  rolloutCommand(
    'resume',
    'continue a paused rollout: after a manual pause, a canary pause, or failures (failed nodes are retried)',
  ).action(run('rolloutResume'));
  rolloutCommand('undo', 'send every node back to the stable revision (or --to-revision)')
    .option('--to-revision <n>', 'the kept revision to go back to')
    .action(run('rolloutUndo'));

  program
    .command('plan')
    .description(
      'dry run of the agent: what applying a config (OSC YAML or canonical JSON) to a root would do, with reasons',
    )
    .requiredOption(
      '-f, --file <file>',
      'the desired config: OperatingSystemConfig YAML or canonical JSON',
    )
    .option('--root <dir>', 'root to compare against ("/" is this machine)', '/')
    .option('--state-dir <dir>', 'agent state directory (default /var/lib/oscar under the root)')
    .action(async (opts: { file: string; root: string; stateDir?: string }) => {
      await (await import('./plan.js')).planCommand(opts);
    });

  program
    .command('up')
    .description(
      'watch a folder of OperatingSystemConfigs (default examples/) and apply each to a sandbox root under .oscar/root/<name>/, printing the plan on every save',
    )
    .argument('[dir]', 'folder of OSC YAML files', 'examples')
    .option('--out <dir>', 'where the sandbox roots go', '.oscar')
    .option('--once', 'apply everything once and exit (exit 1 if anything failed)')
    .action(async (dir: string, flags: UpFlags) => {
      await (await import('./up.js')).upCommand(dir, flags);
    });

  program
    .command('version')
    .description('print the oscar version and the API version it serves')
    .action(async () => {
      (await import('./version.js')).versionCommand();
    });
}
