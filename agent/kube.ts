/** Loading the agent's kubeconfig: a file when given, otherwise in-cluster or $KUBECONFIG. */
import { KubeConfig } from '@kubernetes/client-node';

export function loadKubeConfig(path?: string): KubeConfig {
  const kc = new KubeConfig();
  if (path !== undefined) kc.loadFromFile(path);
  else kc.loadFromDefault();
  if (!kc.getCurrentCluster()) {
    throw new Error(
      `no cluster in the kubeconfig${path ? ` ${path}` : ''}: pass --kubeconfig, or run in a pod with a service account`,
    );
  }
  return kc;
}
