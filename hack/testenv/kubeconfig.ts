// Renders self-contained kubeconfig files (all certificates embedded) so a test,
// kubectl or a process in a node container can use one file and nothing else.
import { stringify } from 'yaml';

export type Credentials =
  { kind: 'clientCert'; certPem: string; keyPem: string } | { kind: 'token'; token: string };

export interface KubeconfigInput {
  /** Name used for the cluster, user and context entries. */
  name: string;
  server: string;
  caPem: string;
  credentials: Credentials;
  namespace?: string;
}

const b64 = (s: string): string => Buffer.from(s, 'utf8').toString('base64');

export function renderKubeconfig(input: KubeconfigInput): string {
  if (!input.server.startsWith('https://')) {
    throw new Error(`kubeconfig server ${JSON.stringify(input.server)} must be an https:// URL`);
  }
  const user =
    input.credentials.kind === 'token'
      ? { token: input.credentials.token }
      : {
          'client-certificate-data': b64(input.credentials.certPem),
          'client-key-data': b64(input.credentials.keyPem),
        };
  const context: Record<string, string> = { cluster: input.name, user: input.name };
  if (input.namespace !== undefined) context.namespace = input.namespace;
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      {
        name: input.name,
        cluster: { server: input.server, 'certificate-authority-data': b64(input.caPem) },
      },
    ],
    users: [{ name: input.name, user }],
    contexts: [{ name: input.name, context }],
    'current-context': input.name,
    preferences: {},
  });
}
