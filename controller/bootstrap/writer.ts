/**
 * The bootstrap controller's writes as API requests. Field manager oscar-bootstrap. Every write
 * asks for the stored object's metadata only: Secret data (user data, token secrets) never comes
 * back over the wire, and nothing of it is logged (API errors keep only the Status message, which
 * names objects, never their data).
 */
import {
  BOOTSTRAP_API_VERSION,
  BOOTSTRAP_TOKEN_NAMESPACE,
  OSCAR_CONFIG_KIND,
  OSCAR_CONFIG_RESOURCE,
} from '../../api/bootstrap/constants.js';
import type { OscarConfigStatus } from '../../api/bootstrap/schema.js';
import {
  ACCEPT_METADATA,
  ApiError,
  CONTENT_APPLY_PATCH,
  CONTENT_MERGE_PATCH,
  isConflict,
  isNotFound,
  type KubeHttp,
} from '../../kube/client.js';
import type { KubeObject } from '../kube/types.js';
import {
  SecretExistsError,
  TokenConflictError,
  TokenGoneError,
  type BootstrapEvent,
  type BootstrapWriter,
} from './reconcile.js';
import { IDENTITY_FIELD_MANAGER, RBAC_API_VERSION } from '../shared/node-rbac.js';
import { tokenSecretName } from './token.js';
import { API_VERSION } from '../../api/constants.js';
import { CONFIG_UID_LABEL } from '../../api/identity.js';
import type { ConfigObject } from './types.js';
import { eventName } from '../runtime/event-name.js';

export const BOOTSTRAP_FIELD_MANAGER = 'oscar-bootstrap';

/** Whether every conflict of a failed apply is with this controller's own field manager. */
export function onlyOwnConflicts(message: string): boolean {
  const managers = [...message.matchAll(/conflicts? with "([^"]+)"/g)].map((m) => m[1]);
  return managers.length > 0 && managers.every((m) => m === BOOTSTRAP_FIELD_MANAGER);
}

export function configPath(namespace: string, name?: string): string {
  const base = `/apis/${BOOTSTRAP_API_VERSION}/namespaces/${namespace}/${OSCAR_CONFIG_RESOURCE}`;
  return name === undefined ? base : `${base}/${name}`;
}

const NODES_PATH = `/apis/${API_VERSION}/operatingsystemconfignodes`;

const tokenPath = (id: string): string =>
  `/api/v1/namespaces/${BOOTSTRAP_TOKEN_NAMESPACE}/secrets/${tokenSecretName(id)}`;

function metadataOf(stored: KubeObject | undefined): KubeObject | undefined {
  return stored ? { metadata: stored.metadata } : undefined;
}

export class HttpBootstrapWriter implements BootstrapWriter {
  constructor(
    private readonly http: KubeHttp,
    private readonly instance: string,
  ) {}

  async applyToken(body: Record<string, unknown>): Promise<void> {
    const meta = body.metadata as { name: string };
    const apply = (force: boolean): Promise<unknown> =>
      this.http.request(
        'PATCH',
        `/api/v1/namespaces/${BOOTSTRAP_TOKEN_NAMESPACE}/secrets/${meta.name}`,
        {
          query: { fieldManager: BOOTSTRAP_FIELD_MANAGER, ...(force ? { force: true } : {}) },
          contentType: CONTENT_APPLY_PATCH,
          accept: ACCEPT_METADATA,
          body,
        },
      );
    try {
      // No force: a token Secret written by anyone else conflicts instead of being taken over.
      await apply(false);
    } catch (error) {
      if (!isConflict(error)) throw error;
      // Our own refreshes (merge patches) own the expiration as another manager entry: a
      // conflict with nobody but ourselves is ours to resolve.
      if (onlyOwnConflicts((error as Error).message)) {
        await apply(true);
        return;
      }
      throw new TokenConflictError((error as Error).message);
    }
  }

  async refreshToken(id: string, expiration: string): Promise<void> {
    try {
      await this.http.request('PATCH', tokenPath(id), {
        contentType: CONTENT_MERGE_PATCH,
        accept: ACCEPT_METADATA,
        query: { fieldManager: BOOTSTRAP_FIELD_MANAGER },
        body: { data: { expiration: Buffer.from(expiration).toString('base64') } },
      });
    } catch (error) {
      if (isNotFound(error)) throw new TokenGoneError(`bootstrap token ${id} is gone`);
      throw error;
    }
  }

  async deleteToken(id: string): Promise<void> {
    try {
      await this.http.request('DELETE', tokenPath(id));
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
  }

  async deleteNode(machine: string, configUid: string): Promise<boolean> {
    const path = `${NODES_PATH}/${encodeURIComponent(machine)}`;
    let node: KubeObject;
    try {
      node = await this.http.request<KubeObject>('GET', path, { accept: ACCEPT_METADATA });
    } catch (error) {
      if (isNotFound(error)) return false;
      throw error;
    }
    if (node.metadata.labels?.[CONFIG_UID_LABEL] !== configUid) return false;
    try {
      // a relabel for a new machine between the read and here changes the resourceVersion: 409
      await this.http.request('DELETE', path, {
        body: {
          apiVersion: 'v1',
          kind: 'DeleteOptions',
          preconditions: {
            uid: node.metadata.uid,
            resourceVersion: node.metadata.resourceVersion,
          },
        },
      });
    } catch (error) {
      if (isNotFound(error)) return false;
      throw error;
    }
    return true;
  }

  async createDataSecret(body: Record<string, unknown>): Promise<KubeObject | undefined> {
    const meta = body.metadata as { namespace: string };
    try {
      const stored = await this.http.request<KubeObject>(
        'POST',
        `/api/v1/namespaces/${meta.namespace}/secrets`,
        { query: { fieldManager: BOOTSTRAP_FIELD_MANAGER }, accept: ACCEPT_METADATA, body },
      );
      return metadataOf(stored);
    } catch (error) {
      if (error instanceof ApiError && error.status === 409) {
        throw new SecretExistsError(error.message);
      }
      throw error;
    }
  }

  async replaceDataSecret(body: Record<string, unknown>): Promise<KubeObject | undefined> {
    const meta = body.metadata as { name: string; namespace: string };
    const stored = await this.http.request<KubeObject>(
      'PATCH',
      `/api/v1/namespaces/${meta.namespace}/secrets/${meta.name}`,
      {
        query: { fieldManager: BOOTSTRAP_FIELD_MANAGER, force: true },
        contentType: CONTENT_APPLY_PATCH,
        accept: ACCEPT_METADATA,
        body,
      },
    );
    return metadataOf(stored);
  }

  async patchStatus(
    namespace: string,
    name: string,
    status: OscarConfigStatus,
  ): Promise<KubeObject | undefined> {
    const stored = await this.http.request<KubeObject>(
      'PATCH',
      `${configPath(namespace, name)}/status`,
      {
        query: { fieldManager: BOOTSTRAP_FIELD_MANAGER, force: true },
        contentType: CONTENT_APPLY_PATCH,
        accept: ACCEPT_METADATA,
        body: {
          apiVersion: BOOTSTRAP_API_VERSION,
          kind: OSCAR_CONFIG_KIND,
          metadata: { name, namespace },
          status,
        },
      },
    );
    return metadataOf(stored);
  }

  async event(config: ConfigObject, e: BootstrapEvent): Promise<void> {
    const namespace = config.metadata.namespace ?? 'default';
    const now = new Date().toISOString();
    await this.http.request('POST', `/api/v1/namespaces/${namespace}/events`, {
      body: {
        apiVersion: 'v1',
        kind: 'Event',
        metadata: { name: eventName(config.metadata.name), namespace },
        involvedObject: {
          apiVersion: BOOTSTRAP_API_VERSION,
          kind: OSCAR_CONFIG_KIND,
          name: config.metadata.name,
          namespace,
          uid: config.metadata.uid,
          resourceVersion: config.metadata.resourceVersion,
        },
        type: e.type,
        reason: e.reason,
        message: e.message.slice(0, 1024),
        source: { component: BOOTSTRAP_FIELD_MANAGER },
        reportingComponent: `oscar.dev/${BOOTSTRAP_FIELD_MANAGER}`,
        reportingInstance: this.instance,
        firstTimestamp: now,
        lastTimestamp: now,
        count: 1,
      },
    });
  }

  async applyNodeRole(body: Record<string, unknown>): Promise<KubeObject | undefined> {
    const meta = body.metadata as { name: string; namespace: string };
    // the approver's field manager: the Role has one writer of its rules, whichever controller
    // of this process writes them
    const stored = await this.http.request<KubeObject>(
      'PATCH',
      `/apis/${RBAC_API_VERSION}/namespaces/${meta.namespace}/roles/${meta.name}`,
      {
        query: { fieldManager: IDENTITY_FIELD_MANAGER, force: true },
        contentType: CONTENT_APPLY_PATCH,
        accept: ACCEPT_METADATA,
        body,
      },
    );
    return metadataOf(stored);
  }
}
