/**
 * `oscar controller`: run the controller. Its help and flags only; the work is in the module it
 * imports when it runs, so the command table loads nothing heavier than commander.
 */
import type { Command } from 'commander';
import { examples, longRunning } from './help.js';
import { tuneHeapForLongRunning } from '../support/memory.js';
import type { ControllerOptions } from './controller.js';

export function registerControllerCommand(program: Command): void {
  const command = program
    .command('controller')
    .description(
      'run the controller: render every OperatingSystemConfig into its Secret and keep status honest',
    );
  examples(
    longRunning(bootstrapFlags(renderingFlags(processFlags(command)))).action(
      async (opts: ControllerOptions) => {
        tuneHeapForLongRunning(); // before the controller's modules load
        await (await import('./controller.js')).controllerCommand(program, opts);
      },
    ),
    [
      'oscar controller --kubeconfig ~/.kube/config -n team-a,team-b',
      'oscar controller --leader-elect --log-format json      # as the Deployment runs it',
      'oscar controller --renderers-config /etc/oscar/renderers.yaml',
    ],
  );
}

/** Where the controller connects and what it watches, its endpoints and its leader election. */
function processFlags(command: Command): Command {
  return command
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
    );
}

/** How OSCs are rendered and written: concurrency, external renderers, finalizer, Events. */
function renderingFlags(command: Command): Command {
  return (
    command
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
      .option(
        '--osc-rendered-events',
        "a Normal Event per Secret written (one more write per render; the OSC's status says the same)",
        false,
      )
      .option('--no-osc-rendered-events', 'no Normal Event per Secret written (the default)')
  );
}

/** Per-machine bootstrap (OscarConfigs, docs/bootstrap.md) and the node identities it issues. */
function bootstrapFlags(command: Command): Command {
  return command
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
    );
}
