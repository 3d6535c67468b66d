/**
 * What a reconcile OSC renders, read the way a node reads it: its reconcile Secret, decoded and
 * checked against its checksum. The extension decides from exactly the config the agent would
 * receive, so its answer and the agent's refusal come from the same input and the same rule.
 */
import type { ResolvedConfig } from '../../api/resolved.js';
import {
  ANNOTATION_CHECKSUM,
  decodeConfigData,
  LABEL_OSC,
  LABEL_PURPOSE,
  secretNameFor,
} from '../../api/secret.js';
import { isNotFound, type KubeHttp } from '../../kube/client.js';

export interface ReconcileState {
  osc: string;
  secretName: string;
  checksum: string;
  config: ResolvedConfig;
}

/** Either the state or why there is none, in a sentence that names the fix. */
export type ReconcileLookup = ReconcileState | { missing: string };

export interface ReconcileStates {
  get(namespace: string, osc: string): Promise<ReconcileLookup>;
}

interface SecretObject {
  metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> };
  data?: Record<string, string>;
}

export class KubeReconcileStates implements ReconcileStates {
  constructor(private readonly http: KubeHttp) {}

  async get(namespace: string, osc: string): Promise<ReconcileLookup> {
    const secretName = secretNameFor(osc, 'reconcile');
    let secret: SecretObject;
    try {
      secret = await this.http.request<SecretObject>(
        'GET',
        `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets/${encodeURIComponent(secretName)}`,
      );
    } catch (error) {
      if (isNotFound(error)) {
        return {
          missing: `OperatingSystemConfig ${namespace}/${osc} has no reconcile Secret ${secretName}: create the OSC (purpose: reconcile) and let it render (kubectl get osc ${osc} -n ${namespace})`,
        };
      }
      throw error;
    }
    const labels = secret.metadata?.labels ?? {};
    if (labels[LABEL_OSC] !== osc || labels[LABEL_PURPOSE] !== 'reconcile') {
      return { missing: `Secret ${namespace}/${secretName} is not the reconcile Secret of ${osc}` };
    }
    const data: Record<string, Buffer> = {};
    for (const [k, v] of Object.entries(secret.data ?? {})) data[k] = Buffer.from(v, 'base64');
    try {
      const decoded = decodeConfigData(data, secret.metadata?.annotations?.[ANNOTATION_CHECKSUM]);
      return { osc, secretName, checksum: decoded.checksum, config: decoded.config };
    } catch (error) {
      return { missing: `Secret ${namespace}/${secretName}: ${(error as Error).message}` };
    }
  }
}
