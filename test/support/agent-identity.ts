/**
 * One node's agent identity as deploy/agent-rbac.yaml grants it (the ServiceAccount
 * oscar-agent-<node>, its Role and ClusterRole): the manifest with its placeholders filled in,
 * for suites and benches that apply it with their own kubectl; the user and groups a client
 * certificate of that ServiceAccount carries; a token of it and a kubeconfig that uses the token.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { stringify } from 'yaml';
import type { KubeHttp } from '../../kube/client.js';
import type { Cluster } from './cluster.js';
import { repoRoot } from './tools.js';

export interface AgentRbacFor {
  /** One node, or several (one document set each, joined by ---). */
  node: string | readonly string[];
  namespace: string;
  /** The reconcile OSC the node follows (its Secrets are the ones the Role names). */
  osc: string;
}

/** deploy/agent-rbac.yaml with NODE_NAME, NAMESPACE and OSC_NAME substituted. */
export async function agentRbacManifest(o: AgentRbacFor): Promise<string> {
  const template = await readFile(join(repoRoot, 'deploy', 'agent-rbac.yaml'), 'utf8');
  const nodes = typeof o.node === 'string' ? [o.node] : o.node;
  return nodes
    .map((node) =>
      template
        .replaceAll('NODE_NAME', node)
        .replaceAll('NAMESPACE', o.namespace)
        .replaceAll('OSC_NAME', o.osc),
    )
    .join('\n---\n');
}

/** Applies agentRbacManifest(o) with the cluster's kubectl; throws with kubectl's stderr. */
export async function applyAgentRbac(
  cluster: Pick<Cluster, 'kubectl'>,
  o: AgentRbacFor,
): Promise<void> {
  const applied = await cluster.kubectl(['apply', '-f', '-'], await agentRbacManifest(o));
  if (applied.code !== 0)
    throw new Error(`kubectl apply deploy/agent-rbac.yaml: ${applied.stderr}`);
}

/** The user and groups of the agent's ServiceAccount, for a client certificate. */
export function agentIdentity(ns: string, node: string): { user: string; groups: string[] } {
  return {
    user: agentUser(ns, node),
    groups: ['system:serviceaccounts', `system:serviceaccounts:${ns}`, 'system:authenticated'],
  };
}

/** The agent ServiceAccount's user name. */
export function agentUser(ns: string, node: string): string {
  return `system:serviceaccount:${ns}:oscar-agent-${node}`;
}

/** A token of the agent's ServiceAccount from the TokenRequest API, as a node's provision step gets one. */
export async function agentToken(
  admin: KubeHttp,
  ns: string,
  node: string,
  expirationSeconds = 3600,
): Promise<string> {
  const tr = await admin.request<{ status: { token: string } }>(
    'POST',
    `/api/v1/namespaces/${ns}/serviceaccounts/oscar-agent-${node}/token`,
    {
      body: {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: { expirationSeconds },
      },
    },
  );
  return tr.status.token;
}

/**
 * A kubeconfig (YAML) that authenticates with a token file: `caPath` and `tokenFile` as the agent
 * will see them (inside a node they are the paths of a bind mount, not the host's).
 */
export function tokenKubeconfig(o: { server: string; caPath: string; tokenFile: string }): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    'current-context': 'agent',
    clusters: [{ name: 'test', cluster: { server: o.server, 'certificate-authority': o.caPath } }],
    users: [{ name: 'agent', user: { tokenFile: o.tokenFile } }],
    contexts: [{ name: 'agent', context: { cluster: 'test', user: 'agent' } }],
  });
}
