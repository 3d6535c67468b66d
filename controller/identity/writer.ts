/**
 * The identity approver's writes as API requests (field manager oscar-identity): a CSR's
 * Approved or Denied condition through its approval subresource, the machine's Role and
 * RoleBinding by server-side apply, the machine's OperatingSystemConfigNode claimed for the
 * issuing config's UID (its label; the admission policy lets only that UID's certificate write
 * it), the used bootstrap token's deletion.
 */
import {
  CONTENT_APPLY_PATCH,
  ACCEPT_METADATA,
  isNotFound,
  type KubeHttp,
} from '../../kube/client.js';
import { BOOTSTRAP_TOKEN_NAMESPACE } from '../../api/bootstrap/constants.js';
import { API_VERSION, OSC_NODE_KIND } from '../../api/constants.js';
import { CONFIG_UID_LABEL } from '../../api/identity.js';
import { tokenSecretName } from '../bootstrap/token.js';
import type { CsrObject } from './decide.js';

export const IDENTITY_FIELD_MANAGER = 'oscar-identity';
export const CSR_PATH = '/apis/certificates.k8s.io/v1/certificatesigningrequests';

export interface CsrCondition {
  type: 'Approved' | 'Denied';
  reason: string;
  message: string;
}

export interface IdentityWriter {
  /** Adds the condition through /approval; a stale resourceVersion is a conflict (retried). */
  decideCsr(csr: CsrObject, condition: CsrCondition): Promise<void>;
  apply(object: Record<string, unknown>): Promise<void>;
  /**
   * The machine's OperatingSystemConfigNode labelled with the config UID whose certificate may
   * write it: created if missing, relabelled if an earlier machine of that name left it.
   */
  claimNode(machine: string, uid: string): Promise<void>;
  deleteToken(id: string): Promise<void>;
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
    const meta = object.metadata as { name: string; namespace: string };
    const kind = object.kind === 'Role' ? 'roles' : 'rolebindings';
    await this.http.request(
      'PATCH',
      `/apis/rbac.authorization.k8s.io/v1/namespaces/${meta.namespace}/${kind}/${meta.name}`,
      {
        query: { fieldManager: IDENTITY_FIELD_MANAGER, force: true },
        contentType: CONTENT_APPLY_PATCH,
        accept: ACCEPT_METADATA,
        body: object,
      },
    );
  }

  async claimNode(machine: string, uid: string): Promise<void> {
    await this.http.request(
      'PATCH',
      `/apis/${API_VERSION}/operatingsystemconfignodes/${encodeURIComponent(machine)}`,
      {
        query: { fieldManager: IDENTITY_FIELD_MANAGER, force: true },
        contentType: CONTENT_APPLY_PATCH,
        accept: ACCEPT_METADATA,
        body: {
          apiVersion: API_VERSION,
          kind: OSC_NODE_KIND,
          metadata: { name: machine, labels: { [CONFIG_UID_LABEL]: uid } },
        },
      },
    );
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
