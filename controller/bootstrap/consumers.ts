/**
 * Who uses a machine's bootstrap token (docs/identity.md, "kubelet"): always the agent, which
 * trades it for its oscar:node:<machine> certificate; with spec.kubeletBootstrap also kubelet,
 * which trades it for its system:node:<machine> client certificate. The token lives until every
 * consumer's certificate is issued — the last approval deletes it — and, once the agent has its
 * certificate, it is no longer refreshed: it never outlives its TTL for kubelet's sake.
 *
 * Each consumer's issue is recorded in the config's status (NodeIdentity=True for the agent,
 * KubeletIdentity=True for kubelet) and, until the watch shows that status, in the approver's
 * in-process map under consumedKey(). Pure.
 */
import type { ConfigObject } from './types.js';

export type TokenConsumer = 'agent' | 'kubelet';

export const KUBELET_IDENTITY = 'KubeletIdentity' as const;

/** The in-process "consumed" map's key for one consumer of a config's token. */
export function consumedKey(configKey: string, consumer: TokenConsumer): string {
  return consumer === 'agent' ? configKey : `${configKey}#kubelet`;
}

export function kubeletBootstraps(config: ConfigObject): boolean {
  return (config.spec as { kubeletBootstrap?: boolean }).kubeletBootstrap === true;
}

export function consumersOf(config: ConfigObject): TokenConsumer[] {
  return kubeletBootstraps(config) ? ['agent', 'kubelet'] : ['agent'];
}

function issued(config: ConfigObject, type: string): boolean {
  return (config.status?.conditions ?? []).some(
    (c) => c.type === type && c.status === 'True' && c.reason === 'Issued',
  );
}

/** The consumer's certificate was issued (status, or the approver's map before the watch shows it). */
export function consumerDone(
  config: ConfigObject,
  consumer: TokenConsumer,
  consumed?: ReadonlyMap<string, unknown>,
): boolean {
  const key = `${config.metadata.namespace ?? ''}/${config.metadata.name}`;
  if (consumed?.has(consumedKey(key, consumer)) === true) return true;
  return issued(config, consumer === 'agent' ? 'NodeIdentity' : KUBELET_IDENTITY);
}

/** The consumers that still need the token, in a fixed order (agent, kubelet). */
export function pendingConsumers(
  config: ConfigObject,
  consumed?: ReadonlyMap<string, unknown>,
  alsoDone?: TokenConsumer,
): TokenConsumer[] {
  return consumersOf(config).filter((c) => c !== alsoDone && !consumerDone(config, c, consumed));
}

/** What BootstrapTokenAvailable says while some consumers still need the token. */
export function awaitingMessage(tokenId: string, pending: readonly TokenConsumer[]): string {
  const who = pending.map((c) => (c === 'agent' ? "the agent's" : "kubelet's")).join(' and ');
  return `Token ${tokenId} is kept until ${who} certificate is issued${pending.includes('agent') ? ' (refreshed until the agent has its certificate)' : ' (no longer refreshed: it expires at its TTL)'}.`;
}
