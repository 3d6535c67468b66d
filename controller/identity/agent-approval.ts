/**
 * What the approver writes for an agent's certificate it approves (controller/identity/decide.ts
 * decides), in this order, each step idempotent so a failure retries from the top: the config's
 * token marked consumed (a first identity), the machine's Role and RoleBinding (its own OSC's
 * Secrets, bound to the config's UID group), its node object claimed for that UID (an earlier
 * identity's object cleared: node-claim.ts) and the right to read it alone (a ClusterRole by name,
 * bound to the UID group, owned by the object), the approval, the token's deletion unless kubelet
 * still needs it, an Event. The kubelet's counterpart is kubelet-approval.ts.
 */
import { kubeletBootstraps, pendingConsumers } from '../bootstrap/consumers.js';
import type { ConfigObject } from '../bootstrap/types.js';
import type { BootstrapLink } from './bootstrap-link.js';
import type { CsrObject } from './decide.js';
import {
  machineGrantFor,
  type MachineGrant,
  nodeReaderBinding,
  nodeReaderRole,
  nodeRole,
  nodeRoleBinding,
} from '../shared/node-rbac.js';
import type { IdentityWriter } from './writer.js';

export const REASON_IDENTITY_ISSUED = 'IdentityIssued';

export interface AgentApproval {
  kind: 'bootstrap' | 'renewal';
  machine: string;
  /** The issuing config's UID: the certificate's group, the RoleBinding's subject, the node's label. */
  uid: string;
  /** Set for a first identity: the token to consume. */
  tokenId?: string;
}

export interface AgentApprovalDeps {
  writer: IdentityWriter;
  bootstrap: BootstrapLink;
  count: (resource: string, verb: string) => void;
}

export async function approveAgent(
  csr: CsrObject,
  d: AgentApproval,
  config: ConfigObject,
  { writer, bootstrap, count }: AgentApprovalDeps,
): Promise<void> {
  const name = csr.metadata.name;
  const key = `${config.metadata.namespace ?? ''}/${config.metadata.name}`;
  // the token stays while kubelet still needs it (the kubelet approval then deletes it)
  const kubeletPending =
    kubeletBootstraps(config) &&
    pendingConsumers(config, bootstrap.consumed, 'agent').includes('kubelet');
  if (d.tokenId !== undefined) {
    await bootstrap.tokenConsumed(key, {
      reason: REASON_IDENTITY_ISSUED,
      message: `Token consumed by the agent's certificate request ${name} (user oscar:node:${d.machine}); renewals use the certificate.`,
    });
    count('oscarconfigs/status', 'apply');
  }
  const grant = machineGrantFor(config, d.machine);
  await writer.apply(nodeRole(grant));
  await writer.apply(nodeRoleBinding(grant));
  count('roles', 'apply');
  count('rolebindings', 'apply');
  // before the approval: from the first certificate on, only this UID's may write the node object
  const claimed = await writer.claimNode(d.machine, d.uid);
  if (claimed === 'create') count('operatingsystemconfignodes', 'create');
  if (claimed === 'reset') {
    count('operatingsystemconfignodes/status', 'patch');
    count('operatingsystemconfignodes', 'patch');
  }
  await applyNodeReader(writer, grant, count);
  await writer.decideCsr(csr, {
    type: 'Approved',
    reason: d.kind === 'bootstrap' ? 'OscarNodeIdentity' : 'OscarNodeRenewal',
    message: `oscar approved the identity of machine ${d.machine} (${d.kind === 'bootstrap' ? 'its bootstrap token' : 'a renewal by the node itself'})`,
  });
  count('certificatesigningrequests/approval', 'update');
  if (d.tokenId !== undefined && !kubeletPending) {
    await writer.deleteToken(d.tokenId);
    count('secrets', 'delete');
  }
  await bootstrap.event(config, {
    type: 'Normal',
    reason: d.kind === 'bootstrap' ? 'IdentityIssued' : 'IdentityRenewed',
    message: `Certificate request ${name} approved for oscar:node:${d.machine} (config UID ${d.uid})${d.tokenId === undefined ? '' : kubeletPending ? `; bootstrap token ${d.tokenId} kept for kubelet` : `; bootstrap token ${d.tokenId} deleted`}.`,
  });
  count('events', 'create');
}

/**
 * The right to read its own node object and no other (controller/shared/node-rbac.ts): written
 * after the claim, which makes the object the ClusterRole is owned by. A renewal writes it again
 * (no change at steady state), so an identity issued before it gains it at its next renewal.
 */
async function applyNodeReader(
  writer: IdentityWriter,
  grant: MachineGrant,
  count: (resource: string, verb: string) => void,
): Promise<void> {
  const node = { name: grant.machine, uid: await writer.nodeUid(grant.machine) };
  count('operatingsystemconfignodes', 'get');
  await writer.apply(nodeReaderRole(grant, node));
  await writer.apply(nodeReaderBinding(grant, node));
  count('clusterroles', 'apply');
  count('clusterrolebindings', 'apply');
}
