/**
 * The reconciler's writes as API requests. The Secret and the status are server-side applied
 * (field manager oscar-controller): fields oscar stopped setting (config.json after a switch to
 * config.json.gz, warnings that went away) are removed, fields others own are kept. An apply that
 * changes nothing is not stored, so it makes no watch event either.
 *
 * Every write asks for the stored object's metadata only (PartialObjectMetadata): the API server
 * then does not serialize a Secret's data or an OSC's 40-file spec into each response, and the
 * controller neither parses nor holds them — the caller knows what it sent.
 */
import { randomBytes } from 'node:crypto';
import { API_VERSION, OSC_KIND, type OperatingSystemConfigStatus } from '../../api/schema.js';
import { FINALIZER, type EventInput, type Writer } from './reconcile.js';
import {
  ACCEPT_METADATA,
  CONTENT_APPLY_PATCH,
  isNotFound,
  type KubeHttp,
} from '../../kube/client.js';
import type { KubeObject, OscObject } from '../kube/types.js';

export const FIELD_MANAGER = 'oscar-controller';
export const OSC_RESOURCE = 'operatingsystemconfigs';
const OSC_BASE = `/apis/${API_VERSION}`;

export function oscPath(namespace: string, name?: string): string {
  const base = `${OSC_BASE}/namespaces/${namespace}/${OSC_RESOURCE}`;
  return name === undefined ? base : `${base}/${name}`;
}

export class HttpWriter implements Writer {
  constructor(
    private readonly http: KubeHttp,
    /** reportingInstance of Events: the pod or host name. */
    private readonly instance: string,
  ) {}

  async applySecret(body: Record<string, unknown>): Promise<KubeObject> {
    const meta = body.metadata as { name: string; namespace: string };
    const stored = await this.http.request<KubeObject>(
      'PATCH',
      `/api/v1/namespaces/${meta.namespace}/secrets/${meta.name}`,
      {
        query: { fieldManager: FIELD_MANAGER, force: true },
        contentType: CONTENT_APPLY_PATCH,
        accept: ACCEPT_METADATA,
        body,
      },
    );
    return { metadata: stored.metadata };
  }

  async deleteSecret(namespace: string, name: string): Promise<void> {
    try {
      await this.http.request('DELETE', `/api/v1/namespaces/${namespace}/secrets/${name}`);
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
  }

  async patchStatus(
    namespace: string,
    name: string,
    status: OperatingSystemConfigStatus,
  ): Promise<KubeObject> {
    // The whole status is ours, nodes included: a field left out of the apply is removed.
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
        metadata: { name: `${osc.metadata.name}.${randomBytes(8).toString('hex')}`, namespace },
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
