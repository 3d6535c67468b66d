/**
 * What the approver writes for a kubelet certificate it approves (controller/identity/kubelet.ts
 * decides), in this order, each step idempotent so a failure retries from the top: the config's
 * KubeletIdentity=True (and who still needs the token), the approval, the token's deletion when
 * the agent no longer needs it either, an Event. No Role: the Node authorizer and NodeRestriction
 * bound what system:node:<machine> may do.
 */
import { pendingConsumers } from '../bootstrap/consumers.js';
import type { ConfigObject } from '../bootstrap/types.js';
import type { BootstrapLink } from './bootstrap-link.js';
import type { CsrObject } from './decide.js';
import type { IdentityWriter } from './writer.js';

export interface KubeletApproval {
  kind: 'kubelet' | 'kubeletRenewal';
  machine: string;
  tokenId?: string;
}

export interface KubeletApprovalDeps {
  writer: IdentityWriter;
  bootstrap: BootstrapLink;
  count: (resource: string, verb: string) => void;
}

export async function approveKubelet(
  csr: CsrObject,
  d: KubeletApproval,
  config: ConfigObject,
  { writer, bootstrap, count }: KubeletApprovalDeps,
): Promise<void> {
  const name = csr.metadata.name;
  const key = `${config.metadata.namespace ?? ''}/${config.metadata.name}`;
  const first = d.kind === 'kubelet';
  const agentPending = pendingConsumers(config, bootstrap.consumed, 'kubelet').includes('agent');
  if (first) {
    await bootstrap.tokenConsumed(
      key,
      {
        reason: 'KubeletIdentityIssued',
        message: `Token consumed by kubelet's certificate request ${name} (user system:node:${d.machine}); kubelet renews with its certificate.`,
      },
      'kubelet',
    );
    count('oscarconfigs/status', 'apply');
  }
  await writer.decideCsr(csr, {
    type: 'Approved',
    reason: first ? 'OscarKubeletIdentity' : 'OscarKubeletRenewal',
    message: `oscar approved kubelet's client certificate for system:node:${d.machine} (${first ? "the machine's bootstrap token" : 'a renewal by the node itself'})`,
  });
  count('certificatesigningrequests/approval', 'update');
  const deleteToken = first && d.tokenId !== undefined && !agentPending;
  if (deleteToken && d.tokenId !== undefined) {
    await writer.deleteToken(d.tokenId);
    count('secrets', 'delete');
  }
  const tokenNote =
    d.tokenId === undefined
      ? ''
      : deleteToken
        ? `; bootstrap token ${d.tokenId} deleted`
        : `; bootstrap token ${d.tokenId} kept for the agent`;
  await bootstrap.event(config, {
    type: 'Normal',
    reason: first ? 'KubeletIdentityIssued' : 'KubeletIdentityRenewed',
    message: `Certificate request ${name} approved for system:node:${d.machine}${tokenNote}.`,
  });
  count('events', 'create');
}
