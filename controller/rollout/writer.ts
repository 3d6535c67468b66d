/**
 * The rollout controller's requests. status.rollout goes through the OSC's status writer
 * (controller/osc/status-writer.ts), with the OSC controller's part of the status, under its field
 * manager; the rollout controller's own (oscar-rollout) is left with the revision Secrets and the
 * grants. Grants are JSON merge patches of one node's spec.revision: cheaper for the API server
 * than an apply, and only this controller writes a node's spec. Every write asks for metadata only
 * in the answer.
 */
import { API_VERSION, type RevisionGrant, type RolloutStatus } from '../../api/schema.js';
import {
  ACCEPT_METADATA,
  CONTENT_APPLY_PATCH,
  CONTENT_MERGE_PATCH,
  isNotFound,
  type KubeHttp,
} from '../../kube/client.js';
import type { DataObject, KubeObject } from '../kube/types.js';
import { OSC_NODE_RESOURCE } from '../osc/controller.js';

export const ROLLOUT_FIELD_MANAGER = 'oscar-rollout';

export interface RolloutWriter {
  /** GET a Secret with its data (the reconcile Secret a revision is copied from). */
  readSecret(namespace: string, name: string): Promise<DataObject | undefined>;
  applyRevision(body: Record<string, unknown>): Promise<KubeObject | undefined>;
  /** Sets one node's grant; answers the node's new metadata (generation, resourceVersion). */
  grant(node: string, grant: RevisionGrant): Promise<KubeObject | undefined>;
  /** status.rollout, due now: resolves once a status write carrying it is stored. */
  patchRolloutStatus(
    namespace: string,
    name: string,
    rollout: RolloutStatus,
  ): Promise<KubeObject | undefined>;
  /** status.rollout as this pass computed it (not due yet: it rides along). No request. */
  offerRolloutStatus?(namespace: string, name: string, rollout: RolloutStatus | undefined): void;
}

/** The requests of RolloutWriter that are the rollout controller's own (not the status). */
export type RolloutRequests = Omit<RolloutWriter, 'patchRolloutStatus' | 'offerRolloutStatus'>;

/** A grant as a merge patch: fields the new grant lacks are removed (null), not kept. */
export function grantPatch(grant: RevisionGrant): Record<string, unknown> {
  return {
    spec: {
      revision: {
        ...grant,
        canary: grant.canary ?? null,
        disruption: grant.disruption ?? null,
        try: grant.try ?? null,
      },
    },
  };
}

export class HttpRolloutWriter implements RolloutRequests {
  constructor(private readonly http: KubeHttp) {}

  async readSecret(namespace: string, name: string): Promise<DataObject | undefined> {
    try {
      return await this.http.request<DataObject>(
        'GET',
        `/api/v1/namespaces/${namespace}/secrets/${name}`,
      );
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
  }

  async applyRevision(body: Record<string, unknown>): Promise<KubeObject> {
    const meta = body.metadata as { name: string; namespace: string };
    const stored = await this.http.request<KubeObject>(
      'PATCH',
      `/api/v1/namespaces/${meta.namespace}/secrets/${meta.name}`,
      {
        query: { fieldManager: ROLLOUT_FIELD_MANAGER, force: true },
        contentType: CONTENT_APPLY_PATCH,
        accept: ACCEPT_METADATA,
        body,
      },
    );
    return { metadata: stored.metadata };
  }

  async grant(node: string, grant: RevisionGrant): Promise<KubeObject | undefined> {
    try {
      const stored = await this.http.request<KubeObject>(
        'PATCH',
        `/apis/${API_VERSION}/${OSC_NODE_RESOURCE}/${encodeURIComponent(node)}`,
        {
          query: { fieldManager: ROLLOUT_FIELD_MANAGER },
          contentType: CONTENT_MERGE_PATCH,
          accept: ACCEPT_METADATA,
          body: grantPatch(grant),
        },
      );
      return { metadata: stored.metadata };
    } catch (error) {
      if (isNotFound(error)) return undefined; // the node left meanwhile
      throw error;
    }
  }
}
