/**
 * The identity approver's writes as API requests (field manager oscar-identity): a CSR's
 * Approved or Denied condition through its approval subresource, the machine's Role and
 * RoleBinding by server-side apply, the machine's OperatingSystemConfigNode claimed for the
 * issuing config's UID (its label; the admission policy lets only that UID's certificate write
 * it; an earlier identity's object is cleared: node-claim.ts), the used bootstrap token's deletion.
 */
import {
  CONTENT_APPLY_PATCH,
  CONTENT_MERGE_PATCH,
  ACCEPT_METADATA,
  isNotFound,
  type KubeHttp,
} from '../../kube/client.js';
import { BOOTSTRAP_TOKEN_NAMESPACE } from '../../api/bootstrap/constants.js';
import { API_VERSION } from '../../api/constants.js';
import type { KubeObject } from '../kube/types.js';
import { tokenSecretName } from '../bootstrap/token.js';
import { IDENTITY_FIELD_MANAGER } from '../shared/node-rbac.js';
import type { CsrObject } from './decide.js';
import { claimNode, type ClaimedNode, type NodeClaim } from './node-claim.js';

export const CSR_PATH = '/apis/certificates.k8s.io/v1/certificatesigningrequests';
const NODES_PATH = `/apis/${API_VERSION}/operatingsystemconfignodes`;

export interface CsrCondition {
  type: 'Approved' | 'Denied';
  reason: string;
  message: string;
}

export interface IdentityWriter {
  /** Adds the condition through /approval; a stale resourceVersion is a conflict (retried). */
  decideCsr(csr: CsrObject, condition: CsrCondition): Promise<void>;
  /** Server-side apply of a Role, RoleBinding, ClusterRole or ClusterRoleBinding. */
  apply(object: Record<string, unknown>): Promise<void>;
  /** The machine's node object's uid (for the owner of its reader ClusterRole). */
  nodeUid(machine: string): Promise<string>;
  /**
   * The machine's OperatingSystemConfigNode labelled with the config UID whose certificate may
   * write it: created if missing; if another identity's (an earlier machine of that name), reset
   * (node-claim.ts): everything on it cleared. Returns the writes made, for the counts.
   */
  claimNode(machine: string, uid: string): Promise<NodeClaim['action']>;
  deleteToken(id: string): Promise<void>;
}

const RBAC_RESOURCES: Readonly<Record<string, string>> = {
  Role: 'roles',
  RoleBinding: 'rolebindings',
  ClusterRole: 'clusterroles',
  ClusterRoleBinding: 'clusterrolebindings',
};

/** "namespaces/NS/roles", or "clusterroles" for a cluster-scoped kind. */
function rbacPath(kind: unknown, namespace: string | undefined): string {
  const resource = typeof kind === 'string' ? RBAC_RESOURCES[kind] : undefined;
  if (resource === undefined) throw new Error(`not an RBAC kind: ${String(kind)}`);
  return kind === 'Role' || kind === 'RoleBinding'
    ? `namespaces/${namespace ?? ''}/${resource}`
    : resource;
}

export class HttpIdentityWriter implements IdentityWriter {
  constructor(private readonly http: KubeHttp) {}

  async decideCsr(csr: CsrObject, condition: CsrCondition): Promise<void> {
    const now = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
    await this.http.request('PUT', `${CSR_PATH}/${csr.metadata.name}/approval`, {
      query: { fieldManager: IDENTITY_FIELD_MANAGER },
      accept: ACCEPT_METADATA,
      body: {
        apiVersion: 'certificates.k8s.io/v1',
        kind: 'CertificateSigningRequest',
        metadata: csr.metadata,
        spec: csr.spec,
        status: {
          ...csr.status,
          conditions: [
            ...(csr.status?.conditions ?? []),
            {
              type: condition.type,
              status: 'True',
              reason: condition.reason,
              message: condition.message.slice(0, 1024),
              lastUpdateTime: now,
              lastTransitionTime: now,
            },
          ],
        },
      },
    });
  }

  async apply(object: Record<string, unknown>): Promise<void> {
    const meta = object.metadata as { name: string; namespace?: string };
    await this.http.request(
      'PATCH',
      `/apis/rbac.authorization.k8s.io/v1/${rbacPath(object.kind, meta.namespace)}/${meta.name}`,
      {
        query: { fieldManager: IDENTITY_FIELD_MANAGER, force: true },
        contentType: CONTENT_APPLY_PATCH,
        accept: ACCEPT_METADATA,
        body: object,
      },
    );
  }

  async nodeUid(machine: string): Promise<string> {
    const node = await this.http.request<KubeObject>(
      'GET',
      `${NODES_PATH}/${encodeURIComponent(machine)}`,
      { accept: ACCEPT_METADATA },
    );
    const uid = node.metadata.uid;
    if (!uid) throw new Error(`OperatingSystemConfigNode ${machine} has no uid`);
    return uid;
  }

  /**
   * Read, decide (node-claim.ts), write with the read's resourceVersion as precondition: a
   * concurrent write (the old certificate's report, a grant) is a 409 and the approval is retried
   * from the top; a create that finds the object made meanwhile too.
   */
  async claimNode(machine: string, uid: string): Promise<NodeClaim['action']> {
    const path = `${NODES_PATH}/${encodeURIComponent(machine)}`;
    let node: ClaimedNode | undefined;
    try {
      node = await this.http.request<ClaimedNode>('GET', path);
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
    const claim = claimNode(node, machine, uid);
    const write = { query: { fieldManager: IDENTITY_FIELD_MANAGER }, accept: ACCEPT_METADATA };
    if (claim.action === 'create') {
      await this.http.request('POST', NODES_PATH, { ...write, body: claim.body });
    } else if (claim.action === 'reset') {
      const cleared = await this.http.request<KubeObject>('PATCH', `${path}/status`, {
        ...write,
        contentType: CONTENT_MERGE_PATCH,
        body: claim.status,
      });
      await this.http.request('PATCH', path, {
        ...write,
        contentType: CONTENT_MERGE_PATCH,
        body: claim.object(cleared.metadata.resourceVersion ?? ''),
      });
    }
    return claim.action;
  }

  async deleteToken(id: string): Promise<void> {
    try {
      await this.http.request(
        'DELETE',
        `/api/v1/namespaces/${BOOTSTRAP_TOKEN_NAMESPACE}/secrets/${tokenSecretName(id)}`,
      );
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
  }
}
