/**
 * A reconcile Secret written the way the controller writes one (encodeConfigData, the checksum
 * annotation, the OSC label), for suites and benches that run an agent in Secret mode without the
 * controller.
 */
import { ANNOTATION_CHECKSUM, encodeConfigData, LABEL_OSC } from '../../api/secret.js';
import { isNotFound, type KubeHttp } from '../../kube/client.js';
import type { Desired } from '../../agent/state.js';

export interface ReconcileSecretRef {
  namespace: string;
  name: string;
  /** The OSC label; without it the Secret carries no label. */
  osc?: string;
}

/** Replaces the Secret with `desired`, or creates it; resolves to the desired checksum. */
export async function putReconcileSecret(
  admin: KubeHttp,
  ref: ReconcileSecretRef,
  desired: Desired,
): Promise<string> {
  const body = {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: ref.name,
      namespace: ref.namespace,
      ...(ref.osc !== undefined ? { labels: { [LABEL_OSC]: ref.osc } } : {}),
      annotations: { [ANNOTATION_CHECKSUM]: desired.checksum },
    },
    data: Object.fromEntries(
      Object.entries(encodeConfigData(desired.bytes)).map(([k, v]) => [k, v.toString('base64')]),
    ),
  };
  const path = `/api/v1/namespaces/${ref.namespace}/secrets`;
  try {
    await admin.request('PUT', `${path}/${ref.name}`, { body });
  } catch (error) {
    if (!isNotFound(error)) throw error;
    await admin.request('POST', path, { body });
  }
  return desired.checksum;
}
