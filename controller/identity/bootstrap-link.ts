/**
 * What the approver needs of the bootstrap controller (same process, its caches). Its own module
 * so that the approver's parts (the agent's and kubelet's approvals) depend on it without
 * depending on the approver's controller.
 */
import type { BootstrapEvent, TokenConsumed } from '../bootstrap/reconcile.js';
import type { ConfigObject } from '../bootstrap/types.js';

export interface BootstrapLink {
  configForToken(id: string): ConfigObject | undefined;
  configsForMachine(machine: string): ConfigObject[];
  config(namespace: string, name: string): ConfigObject | undefined;
  readonly consumed: ReadonlyMap<string, TokenConsumed>;
  tokenConsumed(
    key: string,
    consumed: TokenConsumed,
    consumer?: 'agent' | 'kubelet',
  ): Promise<void>;
  event(config: ConfigObject, e: BootstrapEvent): Promise<void>;
}
