/**
 * The agent's grant mode, wired once (`oscar agent --osc`, the integration tests and the scale
 * bench use this): the grant source on the node's OperatingSystemConfigNode, the node reporter,
 * try state, health probes and the agent's loop with the grant admission that ties them together. One HTTP client is
 * shared by the source and the reporter, so the connectivity proof resets both.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { HttpKubeClient, type KubeHttp } from '../../kube/client.js';
import { errorFields, type Logger } from '../../log/logger.js';
import { rebootRequired } from '../reboot/required.js';
import { fanOut, type Reporter } from '../loop.js';
import type { ApplyDeps } from '../apply.js';
import type { DriftHooks } from '../model/drift.js';
import { KubeReporter } from '../report.js';
import { GrantSource } from '../rollout/grant-source.js';
import type { Agent } from '../agent.js';
import { nodeApplier, type Applier } from '../applier.js';
import {
  grantedAgent,
  type GrantAdmission,
  type GrantReporter,
} from '../rollout/grant-admission.js';
import type { Grant } from '../rollout/grant.js';
import {
  LOCAL_UNIT_PROBE,
  NodeHealthProbe,
  SystemctlUnitProbe,
  type HealthProbe,
  type UnitProbe,
} from '../rollout/health.js';
import { KubeNodeReadiness, type NodeReadinessProbe } from '../reboot/node-ready.js';
import { RebootHooks, SystemctlRebooter, type Rebooter } from '../reboot/reboot.js';
import type { VerifyStep } from '../rollout/soak.js';
import { TryState } from '../rollout/try-state.js';

export interface FollowGrantsOptions {
  namespace: string;
  osc: string;
  node: string;
  deps: ApplyDeps;
  pollIntervalMs: number;
  log: Logger;
  /** Log and metrics reporters: told what the node reporter is told. */
  observers?: Reporter[];
  /** The drift monitor (its reports go to the node reporter and the observers by the caller). */
  drift?: DriftHooks;
  onRequest?: () => void;
  http?: KubeHttp;
  /** Overrides for the scale bench: memory instead of the node. */
  applier?: Applier;
  health?: HealthProbe;
  units?: UnitProbe;
  tryState?: TryState;
  onApplyStart?: (grant: Grant) => void;
  /** A simulated reboot (hack/bench/reboot-drain.ts); on a node, `systemctl reboot`. */
  rebooter?: Rebooter;
  /**
   * After a reboot, the Node's Ready in the new boot (default: GET of its own Node with the
   * agent's identity, compared with the machine's boot id on a node, by the condition alone on a
   * directory root).
   */
  nodeReady?: NodeReadinessProbe;
  /** Steps after a tried revision's apply, before the soak (after the reboot step on a node). */
  verifySteps?: VerifyStep[];
  backoffMaxMs?: number;
  tickMs?: number;
}

/** The node reporter, with the log and metrics reporters told the same things. */
function withObservers(kube: KubeReporter, observers: readonly Reporter[]): GrantReporter {
  return {
    ...fanOut([kube, ...observers]),
    setSource: (source, ref) => {
      kube.setSource(source, ref);
    },
    setRevision: (r) => {
      kube.setRevision(r);
    },
    mark: () => kube.mark(),
    writtenAfter: (m) => kube.writtenAfter(m),
    flush: () => kube.flush(),
  };
}

/**
 * After every apply (and at start), whether the node asks for a reboot — a package may have left
 * /var/run/reboot-required — into status.rebootRequired.
 */
function rebootRequiredObserver(o: FollowGrantsOptions, kube: KubeReporter): Reporter {
  const look = (): void => {
    rebootRequired(o.deps.root).then(
      (required) => {
        kube.setRebootRequired(required);
      },
      (error: unknown) => {
        o.log.debug({ ...errorFields(error) }, 'cannot tell whether the node needs a reboot');
      },
    );
  };
  const nothing = (): void => undefined;
  return {
    restored: look,
    applied: look,
    desired: nothing,
    failed: nothing,
    sourceFailed: nothing,
  };
}

export interface GrantWiring {
  agent: Agent<GrantAdmission>;
  reporter: KubeReporter;
  source: GrantSource;
  http: KubeHttp;
}

export function followGrants(kc: KubeConfig, o: FollowGrantsOptions): GrantWiring {
  const http = o.http ?? new HttpKubeClient(kc);
  const shared = {
    log: o.log,
    http,
    ...(o.onRequest ? { onRequest: o.onRequest } : {}),
    ...(o.backoffMaxMs !== undefined ? { backoffMaxMs: o.backoffMaxMs } : {}),
  };
  const reporter = new KubeReporter(kc, {
    ...shared,
    node: o.node,
    oscRef: { namespace: o.namespace, name: o.osc },
  });
  const source = new GrantSource({
    ...shared,
    namespace: o.namespace,
    osc: o.osc,
    node: o.node,
    pollIntervalMs: o.pollIntervalMs,
  });
  const onNode = o.deps.root === '/';
  const applier = o.applier ?? nodeApplier(o.deps, o.log);
  const tryState = o.tryState ?? new TryState(o.deps.stateDir, o.deps.root);
  // On a node, Reboot-level revisions reboot through systemd inside the try (agent/reboot/)
  const rebooter = o.rebooter ?? (onNode ? new SystemctlRebooter() : undefined);
  const reboot = rebooter
    ? new RebootHooks({
        root: o.deps.root,
        stateDir: o.deps.stateDir,
        rebooter,
        tryState,
        applier,
        log: o.log,
        nodeReady:
          o.nodeReady ??
          new KubeNodeReadiness(
            http,
            o.node,
            onNode ? undefined : () => Promise.resolve(undefined),
          ),
      })
    : undefined;
  const agent = grantedAgent({
    source,
    reporter: withObservers(reporter, [
      ...(o.observers ?? []),
      rebootRequiredObserver(o, reporter),
    ]),
    applier,
    tryState,
    health: o.health ?? new NodeHealthProbe(o.deps.root),
    units: o.units ?? (onNode ? new SystemctlUnitProbe() : LOCAL_UNIT_PROBE),
    scope: { namespace: o.namespace, osc: o.osc },
    resetConnections: () => http.resetConnections?.(),
    owners: o.deps.owners,
    log: o.log,
    ...(o.drift ? { drift: o.drift } : {}),
    verifySteps: [...(reboot ? [reboot.step()] : []), ...(o.verifySteps ?? [])],
    ...(reboot ? { lifecycle: reboot } : {}),
    ...(o.onApplyStart ? { onApplyStart: o.onApplyStart } : {}),
    ...(o.tickMs !== undefined ? { tickMs: o.tickMs } : {}),
  });
  return { agent, reporter, source, http };
}
