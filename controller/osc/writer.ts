/**
 * The reconciler's writes as API requests. A new Secret is a plain create, an existing one a JSON
 * patch that replaces its data and sets oscar's metadata beside others' (see secretUpdatePatch):
 * measured against server-side apply on the test API server, half the API server's CPU per Secret
 * (hack/bench/write-cost.ts). The status is server-side applied whole (field manager
 * oscar-controller), status.rollout included: the OSC controller's and the rollout controller's
 * parts go out together through one writer per OSC (status-writer.ts). Fields oscar stopped
 * setting (warnings that went away, a finished drain) are removed; a JSON merge patch or a PUT of
 * the status subresource measured no cheaper, since the API server re-validates and field-manages
 * the whole OSC either way.
 *
 * Every write asks for the stored object's metadata only (PartialObjectMetadata): the API server
 * then does not serialize a Secret's data or an OSC's 40-file spec into each response, and the
 * controller neither parses nor holds them — the caller knows what it sent.
 */
import { API_VERSION, OSC_KIND, type OperatingSystemConfigStatus } from '../../api/schema.js';
import { FINALIZER, type EventInput, type Writer } from './reconcile.js';
import {
  ACCEPT_METADATA,
  CONTENT_APPLY_PATCH,
  CONTENT_JSON_PATCH,
  isConflict,
  isNotFound,
  type KubeHttp,
} from '../../kube/client.js';
import type { KubeObject, OscObject } from '../kube/types.js';
import { secretUpdatePatch } from './secret-object.js';
import { eventName } from '../runtime/event-name.js';

export const FIELD_MANAGER = 'oscar-controller';
export const OSC_RESOURCE = 'operatingsystemconfigs';
const OSC_BASE = `/apis/${API_VERSION}`;

export function oscPath(namespace: string, name?: string): string {
  const base = `${OSC_BASE}/namespaces/${namespace}/${OSC_RESOURCE}`;
  return name === undefined ? base : `${base}/${name}`;
}

function secretPath(namespace: string, name: string): string {
  return `/api/v1/namespaces/${namespace}/secrets/${name}`;
}

export class HttpWriter implements Writer {
  constructor(
    private readonly http: KubeHttp,
    /** reportingInstance of Events: the pod or host name. */
    private readonly instance: string,
  ) {}

  async createSecret(body: Record<string, unknown>): Promise<KubeObject | 'exists'> {
    const meta = body.metadata as { namespace: string };
    try {
      const stored = await this.http.request<KubeObject>(
        'POST',
        `/api/v1/namespaces/${meta.namespace}/secrets`,
        { query: { fieldManager: FIELD_MANAGER }, accept: ACCEPT_METADATA, body },
      );
      return { metadata: stored.metadata };
    } catch (error) {
      if (isConflict(error)) return 'exists';
      throw error;
    }
  }

  async secretMeta(namespace: string, name: string): Promise<KubeObject> {
    const stored = await this.http.request<KubeObject>('GET', secretPath(namespace, name), {
      accept: ACCEPT_METADATA,
    });
    return { metadata: stored.metadata };
  }

  async updateSecret(existing: KubeObject, body: Record<string, unknown>): Promise<KubeObject> {
    const stored = await this.http.request<KubeObject>(
      'PATCH',
      secretPath(existing.metadata.namespace ?? '', existing.metadata.name),
      {
        query: { fieldManager: FIELD_MANAGER },
        contentType: CONTENT_JSON_PATCH,
        accept: ACCEPT_METADATA,
        body: secretUpdatePatch(existing, body),
      },
    );
    return { metadata: stored.metadata };
  }

  async deleteSecret(namespace: string, name: string): Promise<void> {
    try {
      await this.http.request('DELETE', secretPath(namespace, name));
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
  }

  async patchStatus(
    namespace: string,
    name: string,
    status: OperatingSystemConfigStatus,
  ): Promise<KubeObject> {
    // The whole status is ours, nodes and rollout included: a field left out of the apply is
    // removed (once an upgraded OSC's legacy manager is released: releaseStatus).
    const stored = await this.http.request<KubeObject>(
      'PATCH',
      `${oscPath(namespace, name)}/status`,
      {
        query: { fieldManager: FIELD_MANAGER, force: true },
        contentType: CONTENT_APPLY_PATCH,
        accept: ACCEPT_METADATA,
        body: {
          apiVersion: API_VERSION,
          kind: OSC_KIND,
          metadata: { name, namespace },
          status,
        },
      },
    );
    return { metadata: stored.metadata };
  }

  /**
   * Applies an empty status as `manager`: it owns no status field any more, and the fields no
   * other manager owns are removed (the upgrade from the rollout controller's own field manager).
   * Idempotent, so no precondition is needed: it removes only what nobody claims.
   */
  async releaseStatus(namespace: string, name: string, manager: string): Promise<KubeObject> {
    const stored = await this.http.request<KubeObject>(
      'PATCH',
      `${oscPath(namespace, name)}/status`,
      {
        query: { fieldManager: manager },
        contentType: CONTENT_APPLY_PATCH,
        accept: ACCEPT_METADATA,
        body: { apiVersion: API_VERSION, kind: OSC_KIND, metadata: { name, namespace } },
      },
    );
    return { metadata: stored.metadata };
  }

  async setFinalizer(
    namespace: string,
    name: string,
    present: boolean,
  ): Promise<KubeObject | undefined> {
    // Applying without the finalizer releases oscar's ownership of it, which removes it while
    // leaving other controllers' finalizers alone.
    const metadata: Record<string, unknown> = { name, namespace };
    if (present) metadata.finalizers = [FINALIZER];
    try {
      const stored = await this.http.request<KubeObject>('PATCH', oscPath(namespace, name), {
        query: { fieldManager: `${FIELD_MANAGER}-finalizer`, force: true },
        contentType: CONTENT_APPLY_PATCH,
        accept: ACCEPT_METADATA,
        body: { apiVersion: API_VERSION, kind: OSC_KIND, metadata },
      });
      return { metadata: stored.metadata };
    } catch (error) {
      // Already gone: nothing left to finalize.
      if (!present && isNotFound(error)) return undefined;
      throw error;
    }
  }

  async event(osc: OscObject, e: EventInput): Promise<void> {
    const namespace = osc.metadata.namespace ?? 'default';
    const now = new Date().toISOString();
    await this.http.request('POST', `/api/v1/namespaces/${namespace}/events`, {
      body: {
        apiVersion: 'v1',
        kind: 'Event',
        metadata: { name: eventName(osc.metadata.name), namespace },
        involvedObject: {
          apiVersion: API_VERSION,
          kind: OSC_KIND,
          name: osc.metadata.name,
          namespace,
          uid: osc.metadata.uid,
          resourceVersion: osc.metadata.resourceVersion,
        },
        type: e.type,
        reason: e.reason,
        message: e.message.slice(0, 1024),
        source: { component: FIELD_MANAGER },
        reportingComponent: `oscar.dev/${FIELD_MANAGER}`,
        reportingInstance: this.instance,
        firstTimestamp: now,
        lastTimestamp: now,
        count: 1,
      },
    });
  }
}
