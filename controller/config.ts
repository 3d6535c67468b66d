/**
 * What the controller process is told (flags, or a test's options): the kubeconfig, the
 * namespaces, leader election, the HTTP endpoints, and what each controller needs.
 */
import type { Logger } from '../log/logger.js';
import type { RendererRegistry } from '../renderers/registry.js';
import type { Pipeline } from './osc/pipeline.js';

/** Per-machine bootstrap (OscarConfigs): on unless disabled. */
export interface BootstrapConfig {
  enabled: boolean;
  /** The API server machines reach (default: the controller's own kubeconfig server). */
  apiServerUrl?: string;
  /** Its CA, PEM (default: the controller's own kubeconfig CA). */
  caPem?: string;
  agentUrl?: string;
  agentSha256?: string;
  /** {{ cluster.name }} for machines without a Cluster API Cluster. */
  clusterName?: string;
  /** Bootstrap token lifetime; refreshed at half of it until the machine joins. Default 20 min. */
  tokenTtlMs?: number;
  /** How long a machine may go without asking for its identity before its config says so (default 10 min). */
  identityWaitMs?: number;
  /** The longest certificate the identity approver allows (default 7 days). */
  nodeCertificateMaxSeconds?: number;
}

export const DEFAULT_TOKEN_TTL_MS = 20 * 60_000;
export const DEFAULT_IDENTITY_WAIT_MS = 10 * 60_000;

export interface ControllerConfig {
  /** Path of a kubeconfig; empty: in-cluster, else $KUBECONFIG / ~/.kube/config. */
  kubeconfig?: string;
  /** --context: a kubeconfig context other than its current-context. */
  context?: string;
  /** Namespaces to watch; empty: all. */
  namespaces: string[];
  /** host:port for /metrics, /healthz, /readyz; "" or "0" disables; ":0" picks a free port. */
  metricsAddr: string;
  leaderElect: boolean;
  /** Namespace of the Lease (default: $POD_NAMESPACE, else the first watched namespace). */
  leaseNamespace?: string;
  leaseName?: string;
  leaseDurationMs: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  /** Reconciles in parallel. */
  concurrency?: number;
  identity?: string;
  watchTimeoutSeconds?: number;
  pipeline?: Pipeline;
  /** The renderers the bootstrap controller renders machines with (the pipeline's, if given). */
  registry?: RendererRegistry;
  bootstrap?: BootstrapConfig;
  /**
   * The OSC controller's cleanup finalizer (default false: garbage collection of the owner
   * references deletes the Secrets) and a Normal Event per Secret write (default false).
   */
  oscFinalizer?: boolean;
  oscRenderedEvents?: boolean;
  log?: Logger;
  /** The User-Agent of its API requests (default "oscar-controller"). */
  userAgent?: string;
  /** How long stop() may take (default 15 s). */
  shutdownTimeoutMs?: number;
  /** oscar's version, for oscar_controller_build_info. */
  version?: string;
}
