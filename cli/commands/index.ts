/**
 * The command table: every subcommand's name, description, arguments, options and examples — all
 * that `oscar --help` and `oscar X --help` need — and nothing heavier than commander. A command's
 * implementation (./X.js, with the controller, the renderers, express, the Kubernetes client …)
 * is imported only when that command runs, so `oscar agent` on a node does not carry the
 * controller in memory and help answers at once. Only type imports from the implementations here.
 * Add a new command here and put its work in its own module.
 *
 * Conventions every command follows (docs/cli.md): `-f -` reads stdin; `-o json|yaml` prints the
 * result as data; errors name `file:line` and the field; exit 0 on success, 1 on any error
 * (`oscar plan --detailed-exitcode`: 2 when there are changes); no stack trace unless --debug.
 * The long-running commands (controller, agent, renderer serve, up) share --log-format,
 * --log-level and --shutdown-timeout.
 */
import { Argument, InvalidArgumentError, Option, type Command } from 'commander';
import { tuneHeapForLongRunning } from '../memory.js';
import { registerCapiCommands } from './capi-command.js';
import type { ControllerOptions } from './controller.js';
import type { ExtensionServeOptions } from './extension.js';
import type { PlaceholderFlags } from './placeholders.js';
import type { RenderCommandOptions } from './render.js';
import type { RolloutFlags } from './rollout.js';
import type { ServeOptions } from './renderer.js';
import type { UpFlags } from './up.js';
import type { UserDataOptions } from './user-data.js';
import type { ValidateOptions } from './validate.js';
import { examples, longRunning, outputOption } from './help.js';
import {
  registerAgentCommand,
  registerPlanCommand,
  registerVersionCommand,
} from './node-commands.js';

/** The formats of api/schema.ts FORMATS, spelled out so help does not load the schema. */
export const FORMATS_HELP = 'cloud-config, ignition, script';
/** renderers/webhook/server.ts RENDER_PATH, spelled out so help does not load express. */
export const RENDER_PATH_HELP = '/render';
export { DEFAULT_SHUTDOWN_TIMEOUT } from './help.js';

export function registerCommands(program: Command): void {
  examples(
    program
      .command('validate')
      .description(
        'check OperatingSystemConfig files as the controller would: schema, deep checks, spec.type and format, a dry render; exit 1 on any problem',
      )
      .option('-f, --file <file...>', 'files to validate ("-" reads stdin)')
      .argument('[files...]', 'more files to validate')
      .option('--strict', 'fail on warnings too (a provision payload above 16 KiB, …)')
      .addOption(outputOption('the results'))
      .option(
        '--renderers-config <path>',
        "the controller's external renderers file: their types are valid spec.type values",
      )
      .option(
        '--ref-dir <dir>',
        'data of referenced objects (DIR/secrets/<name>/<key>, DIR/configmaps/<name>/<key>), to dry-render OSCs that reference them',
      )
      .option(
        '--values <key=value...>',
        'substitute {{ values.KEY }} placeholders of a provision OSC (repeatable or comma-separated)',
      )
      .option('--machine <name>', 'substitute {{ machine.name }} (and {{ machine.namespace }})')
      .option('--cluster <name>', 'substitute {{ cluster.name }}')
      .option('--api-server <url>', 'substitute {{ apiServer.url }}')
      .action(async (args: string[], opts: ValidateOptions) => {
        await (await import('./validate.js')).validateCommand(program, args, opts);
      }),
    [
      'oscar validate -f worker.yaml',
      'oscar validate examples/*.yaml --strict',
      'kubectl get osc worker -o yaml | oscar validate -f -',
      'oscar validate -f all.yaml -o json          # results as data',
      'oscar validate -f osc.yaml --renderers-config renderers.yaml   # accept external types',
      'oscar validate -f provision.yaml --machine m1 --values region=eu-1   # placeholders substituted',
    ],
  );

  examples(
    program
      .command('render')
      .description(
        'render an OperatingSystemConfig into user data (cloud-config, Ignition or a shell script); exit 1 on invalid input',
      )
      .argument('[file]', 'the OperatingSystemConfig YAML file (or -f)')
      .option('-f, --file <file>', 'the OperatingSystemConfig YAML file ("-" reads stdin)')
      .option('--format <format>', `output format, overriding spec.format (${FORMATS_HELP})`)
      .option('--out <file>', 'write the user data to this file (mode 0600) instead of stdout')
      .option('--gzip', 'gzip the whole payload (cloud-config only)')
      .option(
        '--explain',
        'print what each file, unit and package became (the user data then goes only to --out)',
      )
      .addOption(
        new Option('-o, --output <format>', 'print --explain as data (json, yaml)').argParser(
          (value: string) => {
            if (value === 'json' || value === 'yaml') return value;
            // before -o meant the output format everywhere, `render -o FILE` wrote the user data
            throw new InvalidArgumentError(
              `-o is the form of --explain (json or yaml); to write the user data to "${value}" use --out ${value}`,
            );
          },
        ),
      )
      .option(
        '--ref-dir <dir>',
        'data of referenced objects: DIR/secrets/<name>/<key> and DIR/configmaps/<name>/<key>',
      )
      .option(
        '--values <key=value...>',
        'substitute {{ values.KEY }} placeholders of a provision OSC (repeatable or comma-separated)',
      )
      .option('--machine <name>', 'substitute {{ machine.name }} (and {{ machine.namespace }})')
      .option('--cluster <name>', 'substitute {{ cluster.name }}')
      .option('--api-server <url>', 'substitute {{ apiServer.url }}')
      .action(
        async (
          file: string | undefined,
          opts: Omit<RenderCommandOptions, 'file'> & { file?: string } & PlaceholderFlags,
        ) => {
          const { oneFile } = await import('../input.js');
          await (
            await import('./render.js')
          ).renderCommand({
            ...opts,
            file: oneFile('render', file, opts.file),
          });
        },
      ),
    [
      'oscar render examples/ubuntu-provision.yaml > user-data',
      'oscar render -f examples/flatcar.yaml --out config.ign',
      'oscar render -f worker.yaml --format script --ref-dir ./refs',
      'oscar render -f worker.yaml --explain -o yaml',
      'oscar render -f provision.yaml --machine m1 --cluster c1 --values region=eu-1',
    ],
  );

  const renderer = program
    .command('renderer')
    .description(
      'external renderers: serve a built-in renderer over the oscar.dev/render/v1 protocol',
    );
  examples(
    longRunning(
      renderer
        .command('serve')
        .description(
          `serve built-in renderers over HTTP(S): POST ${RENDER_PATH_HELP}, GET /healthz`,
        )
        .requiredOption(
          '--type <type...>',
          'spec.type(s) to serve (repeatable or comma-separated), such as ubuntu or flatcar',
        )
        .option('--listen <addr>', 'host:port to listen on (":0" picks a free port)', ':8443')
        .option('--tls-cert <path>', 'PEM certificate: serve HTTPS (with --tls-key)')
        .option('--tls-key <path>', 'PEM private key of --tls-cert')
        .option('--quiet', 'no per-request log lines', false),
    ).action(async (opts: ServeOptions) => {
      await (await import('./renderer.js')).serveCommand(program, opts);
    }),
    [
      'oscar renderer serve --type ubuntu,debian --listen 127.0.0.1:8443',
      'oscar renderer serve --type flatcar --tls-cert tls.crt --tls-key tls.key',
    ],
  );

  const extension = program
    .command('extension')
    .description(
      "Cluster API's Runtime Extension: in-place machine updates through oscar (docs/cluster-api.md)",
    );
  examples(
    longRunning(
      extension
        .command('serve')
        .description(
          'serve the in-place update hooks over HTTPS: discovery, CanUpdateMachineSet, CanUpdateMachine, UpdateMachine',
        )
        .option(
          '--kubeconfig <path>',
          'kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, then the in-cluster ServiceAccount)',
        )
        .option('--context <name>', 'the kubeconfig context to use (default: its current-context)')
        .option('--listen <addr>', 'host:port to listen on (":0" picks a free port)', ':9443')
        .option(
          '--metrics-addr <addr>',
          'host:port for /metrics and /healthz over plain HTTP, apart from the hooks (default: none)',
        )
        .requiredOption(
          '--tls-cert <path>',
          "PEM serving certificate (the ExtensionConfig's caBundle signs it)",
        )
        .requiredOption('--tls-key <path>', 'PEM private key of --tls-cert'),
    ).action(async (opts: ExtensionServeOptions) => {
      await (await import('./extension.js')).extensionServeCommand(program, opts);
    }),
    [
      'oscar extension serve --tls-cert /tls/tls.crt --tls-key /tls/tls.key --listen :9443 --metrics-addr :8080',
    ],
  );

  examples(
    program
      .command('user-data')
      .description(
        "print a machine's user data from its OscarConfig (the Secret in status.dataSecretName)",
      )
      .argument('<name>', 'the OscarConfig')
      .option('-n, --namespace <ns>', 'its namespace', 'default')
      .option(
        '--kubeconfig <path>',
        'kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, then in-cluster)',
      )
      .option('--context <name>', 'the kubeconfig context to use (default: its current-context)')
      .option('--out <file>', 'write it to this file (mode 0600) instead of stdout')
      .action(async (name: string, opts: UserDataOptions) => {
        await (await import('./user-data.js')).userDataCommand(program, name, opts);
      }),
    [
      'oscar user-data worker-1 -n machines > user-data',
      'oscar user-data worker-1 --out worker-1.ud',
    ],
  );

  examples(
    program
      .command('crd')
      .description("print oscar's CustomResourceDefinitions (kubectl apply -f -)")
      .action(async () => {
        (await import('./crd.js')).crdCommand();
      }),
    ['oscar crd | kubectl apply -f -'],
  );

  examples(
    longRunning(
      program
        .command('controller')
        .description(
          'run the controller: render every OperatingSystemConfig into its Secret and keep status honest',
        )
        .option(
          '--kubeconfig <path>',
          'kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, then the in-cluster ServiceAccount)',
        )
        .option('--context <name>', 'the kubeconfig context to use (default: its current-context)')
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
        // external renderers (renderers/webhook): type → URL, from a file or a mounted ConfigMap
        .option(
          '--renderers-config <path>',
          'YAML/JSON mapping spec.type → {url, formats, caFile|caBundle, timeoutSeconds} of external renderers (docs/renderer-protocol.md)',
        )
        .option(
          '--osc-finalizer',
          'a cleanup finalizer on OSCs (their Secrets are otherwise deleted by the garbage collector through their owner references): one more write per new OSC, for clusters without kube-controller-manager',
          false,
        )
        .option('--no-osc-rendered-events', 'no Normal Event per Secret written (Warnings stay)')
        // per-machine bootstrap (OscarConfigs, docs/bootstrap.md)
        .option('--no-bootstrap', 'do not reconcile OscarConfigs (per-machine bootstrap)')
        .option(
          '--bootstrap-api-server <url>',
          "the API server URL machines use (default: the controller's kubeconfig server)",
        )
        .option(
          '--bootstrap-ca-file <path>',
          "PEM CA machines verify the API server with (default: the controller's kubeconfig CA)",
        )
        .option('--agent-url <url>', 'where machines download the oscar agent (http or https)')
        .option('--agent-sha256 <hex>', "the agent's sha256, checked before it is installed")
        .option(
          '--cluster-name <name>',
          '{{ cluster.name }} for machines without a Cluster API Cluster',
        )
        .option(
          '--bootstrap-token-ttl <duration>',
          "a bootstrap token's lifetime; refreshed at half of it until the machine joins",
          '20m',
        )
        .option(
          '--node-identity-timeout <duration>',
          'how long a machine may go without asking for its certificate before its OscarConfig says so (NodeIdentity=False, an Event)',
          '10m',
        )
        .option(
          '--node-certificate-max-lifetime <duration>',
          "the longest client certificate the approver lets a node's agent ask for (docs/identity.md)",
          '168h',
        ),
    ).action(async (opts: ControllerOptions) => {
      tuneHeapForLongRunning(); // before the controller's modules load
      await (await import('./controller.js')).controllerCommand(program, opts);
    }),
    [
      'oscar controller --kubeconfig ~/.kube/config -n team-a,team-b',
      'oscar controller --leader-elect --log-format json      # as the Deployment runs it',
      'oscar controller --renderers-config /etc/oscar/renderers.yaml',
    ],
  );

  registerAgentCommand(program);

  registerPlanCommand(program);

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

  registerCapiCommands(program);

  examples(
    program
      .command('completion')
      .description('print a shell completion script for oscar (bash, zsh or fish)')
      .addArgument(new Argument('<shell>', 'the shell').choices(['bash', 'zsh', 'fish']))
      .action(async (shell: 'bash' | 'zsh' | 'fish') => {
        const { completionScript } = await import('../completion.js');
        process.stdout.write(completionScript(program, shell));
      }),
    [
      'oscar completion bash > /etc/bash_completion.d/oscar',
      'source <(oscar completion bash)          # or in ~/.bashrc',
      'source <(oscar completion zsh)           # in ~/.zshrc',
      'oscar completion fish | source           # in ~/.config/fish/config.fish',
    ],
  );

  registerVersionCommand(program);
}
