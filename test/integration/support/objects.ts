// Small helpers around @kubernetes/client-node's generic object API for tests.
import {
  ApiException,
  KubernetesObjectApi,
  type KubeConfig,
  type KubernetesObject,
} from '@kubernetes/client-node';

export const OSC_API_VERSION = 'oscar.dev/v1alpha1';

export function objectApi(kc: KubeConfig): KubernetesObjectApi {
  return KubernetesObjectApi.makeApiClient(kc);
}

/** The API server's refusal: HTTP code and the Status message (which names the field). */
export interface Refusal {
  code: number;
  message: string;
}

function statusMessage(body: unknown): string {
  if (typeof body === 'string') {
    try {
      return statusMessage(JSON.parse(body));
    } catch {
      return body;
    }
  }
  if (typeof body === 'object' && body !== null && 'message' in body) {
    return String(body.message);
  }
  return JSON.stringify(body);
}

/** Runs `op`, expecting the API server to refuse it; returns the refusal (fails if it succeeded). */
export async function refusal(op: () => Promise<unknown>): Promise<Refusal> {
  try {
    await op();
  } catch (err) {
    if (err instanceof ApiException) {
      return { code: err.code, message: statusMessage(err.body) };
    }
    throw err;
  }
  throw new Error('the API server accepted a request the test expected it to refuse');
}

export type { KubernetesObject };
