/**
 * The agent's cluster mode, wired once: the Secret source and the node reporter, with the
 * reporter learning which OSC the Secret belongs to from the Secret's own label (the source
 * reads it), so the node's status names its OSC without a second API call. `oscar agent
 * --secret` and the integration tests use this same wiring.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type { KubeHttp } from '../kube/client.js';
import type { Logger } from '../log/logger.js';
import { KubeReporter } from './report.js';
import { SecretSource } from './source-secret.js';

export interface FollowSecretOptions {
  namespace: string;
  secret: string;
  node: string;
  pollIntervalMs: number;
  log: Logger;
  /** Called once per API request, by the source and the reporter alike. */
  onRequest?: () => void;
  http?: KubeHttp;
  backoffMaxMs?: number;
}

export function followSecret(
  kc: KubeConfig,
  opts: FollowSecretOptions,
): { source: SecretSource; reporter: KubeReporter } {
  const shared = {
    log: opts.log,
    ...(opts.http ? { http: opts.http } : {}),
    ...(opts.onRequest ? { onRequest: opts.onRequest } : {}),
    ...(opts.backoffMaxMs !== undefined ? { backoffMaxMs: opts.backoffMaxMs } : {}),
  };
  const reporter = new KubeReporter(kc, {
    ...shared,
    node: opts.node,
    oscRef: { namespace: opts.namespace, secretName: opts.secret },
  });
  const source = new SecretSource(kc, {
    ...shared,
    namespace: opts.namespace,
    name: opts.secret,
    pollIntervalMs: opts.pollIntervalMs,
    onOscRef: (ref) => {
      reporter.setOscRef(ref);
    },
  });
  return { source, reporter };
}
