/**
 * Cordon, drain and uncordon a Node through the API server, as Cluster API's and OpenShift's
 * drain controllers do: the controller holds the eviction right, nodes never do. One call of
 * drain() is one step (cordon if needed, evict what is left, look again) and never waits: the
 * rollout controller calls it again on its next pass until the node is empty, so a drain blocked
 * by a PodDisruptionBudget holds no worker and survives a controller restart.
 *
 * Evictions go through the Eviction API (policy/v1), so the API server itself enforces every
 * PodDisruptionBudget: a refused eviction (429) names the pod, and the budget that covers it is
 * named in the result. Only a Node oscar cordoned (annotation oscar.dev/cordoned) is uncordoned:
 * one an operator cordoned stays so.
 */
import { GROUP } from '../../api/constants.js';
import {
  ApiError,
  CONTENT_JSON,
  CONTENT_MERGE_PATCH,
  isNotFound,
  type KubeHttp,
} from '../../kube/client.js';
import { budgetOf, podKey, podsToDrain, type PdbLike, type PodLike } from './pods.js';

/** On a Node oscar cordoned: so it uncordons only what it cordoned. */
export const ANNOTATION_CORDONED = `${GROUP}/cordoned`;

export interface DrainResult {
  /** No pod the drain evicts is left on the node. */
  drained: boolean;
  /** For people: what the drain waits for. */
  message: string;
  /** A pod whose eviction was refused ("namespace/name"), and the budget that covers it. */
  pod?: string;
  podDisruptionBudget?: string;
}

export interface NodeDrainer {
  drain(node: string): Promise<DrainResult>;
  uncordon(node: string): Promise<void>;
}

interface NodeObject {
  metadata: { name: string; annotations?: Record<string, string> };
  spec?: { unschedulable?: boolean };
}

interface List<T> {
  items: T[];
}

const nodePath = (node: string): string => `/api/v1/nodes/${encodeURIComponent(node)}`;

export class HttpNodeDrainer implements NodeDrainer {
  constructor(private readonly http: KubeHttp) {}

  private async readNode(node: string): Promise<NodeObject | undefined> {
    try {
      return await this.http.request<NodeObject>('GET', nodePath(node));
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
  }

  /** Marks the Node unschedulable (and oscar's), unless it already is unschedulable. */
  private async cordon(node: string): Promise<void> {
    const n = await this.readNode(node);
    if (!n || n.spec?.unschedulable === true) return; // gone, or cordoned already (by us or not)
    await this.http.request('PATCH', nodePath(node), {
      contentType: CONTENT_MERGE_PATCH,
      body: {
        metadata: { annotations: { [ANNOTATION_CORDONED]: 'true' } },
        spec: { unschedulable: true },
      },
    });
  }

  private async podsOn(node: string): Promise<PodLike[]> {
    const list = await this.http.request<List<PodLike>>('GET', '/api/v1/pods', {
      query: { fieldSelector: `spec.nodeName=${node}` },
    });
    return list.items;
  }

  /** The eviction's answer: undefined when accepted (or the pod is gone), else the refusal. */
  private async evict(pod: PodLike): Promise<ApiError | undefined> {
    const ns = pod.metadata.namespace ?? '';
    try {
      await this.http.request(
        'POST',
        `/api/v1/namespaces/${encodeURIComponent(ns)}/pods/${encodeURIComponent(pod.metadata.name)}/eviction`,
        {
          contentType: CONTENT_JSON,
          body: {
            apiVersion: 'policy/v1',
            kind: 'Eviction',
            metadata: { name: pod.metadata.name, namespace: ns },
          },
        },
      );
      return undefined;
    } catch (error) {
      if (isNotFound(error)) return undefined;
      if (error instanceof ApiError) return error;
      throw error;
    }
  }

  private async budgetsIn(namespace: string): Promise<PdbLike[]> {
    const list = await this.http.request<List<PdbLike>>(
      'GET',
      `/apis/policy/v1/namespaces/${encodeURIComponent(namespace)}/poddisruptionbudgets`,
    );
    return list.items;
  }

  async drain(node: string): Promise<DrainResult> {
    await this.cordon(node);
    const { evict, terminating } = podsToDrain(await this.podsOn(node));
    let refused: { pod: PodLike; error: ApiError } | undefined;
    for (const pod of evict) {
      const error = await this.evict(pod);
      if (error && !refused) refused = { pod, error };
    }
    const left = podsToDrain(await this.podsOn(node));
    const remaining = left.evict.length + left.terminating.length;
    if (remaining === 0) return { drained: true, message: 'drained' };
    if (refused) {
      const pdb =
        refused.error.status === 429
          ? budgetOf(refused.pod, await this.budgetsIn(refused.pod.metadata.namespace ?? ''))
          : undefined;
      const by = pdb ? ` by PodDisruptionBudget ${pdb}` : '';
      return {
        drained: false,
        message: `${String(remaining)} pod(s) left; the eviction of ${podKey(refused.pod)} was refused${by}: ${refused.error.message}`,
        pod: podKey(refused.pod),
        ...(pdb ? { podDisruptionBudget: pdb } : {}),
      };
    }
    const waiting = [...left.terminating, ...left.evict].slice(0, 3).map(podKey);
    return {
      drained: false,
      message: `${String(remaining)} pod(s) left, waiting for ${waiting.join(', ')} to end${terminating.length > 0 ? ' (terminating)' : ''}`,
    };
  }

  async uncordon(node: string): Promise<void> {
    const n = await this.readNode(node);
    if (n?.metadata.annotations?.[ANNOTATION_CORDONED] !== 'true') return;
    await this.http.request('PATCH', nodePath(node), {
      contentType: CONTENT_MERGE_PATCH,
      body: {
        metadata: { annotations: { [ANNOTATION_CORDONED]: null } },
        spec: { unschedulable: null },
      },
    });
  }
}
