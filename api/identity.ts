/**
 * A node's own identity (docs/bootstrap.md, "The node's identity"): the names the agent asks for
 * and the controller's approver insists on, in one place. A machine's agent trades its bootstrap
 * token for a short-lived client certificate, subject CN=oscar:node:<machine>, O=oscar:nodes,
 * from the API server's client signer; RBAC and a ValidatingAdmissionPolicy then bind what that
 * user may read and write to the machine's name.
 */
export const NODE_SIGNER = 'kubernetes.io/kube-apiserver-client';
export const NODE_USER_PREFIX = 'oscar:node:';
/** The one organisation (group) of every node's certificate. */
export const NODES_GROUP = 'oscar:nodes';
/** What the agent asks for; the approver allows these and "key encipherment". */
export const NODE_USAGES = ['digital signature', 'client auth'] as const;
export const ALLOWED_USAGES: readonly string[] = [
  'digital signature',
  'key encipherment',
  'client auth',
];
/** The longest certificate the approver allows by default (--node-certificate-max-lifetime). */
export const DEFAULT_MAX_CERTIFICATE_SECONDS = 7 * 24 * 3600;
/** What the agent asks for by default (--certificate-lifetime): the longest allowed. */
export const DEFAULT_CERTIFICATE_SECONDS = DEFAULT_MAX_CERTIFICATE_SECONDS;
/** The API server's lower bound for spec.expirationSeconds. */
export const MIN_CERTIFICATE_SECONDS = 600;

export function nodeUser(machine: string): string {
  return `${NODE_USER_PREFIX}${machine}`;
}

/** The machine a node user names, or undefined for any other user. */
export function machineOfUser(user: string): string | undefined {
  return user.startsWith(NODE_USER_PREFIX) && user.length > NODE_USER_PREFIX.length
    ? user.slice(NODE_USER_PREFIX.length)
    : undefined;
}

/** The CSR name for a key: the machine and a digest of its public key (a restart finds it again). */
export function csrNameFor(machine: string, publicKeyDigest: string): string {
  return `oscar-${machine}-${publicKeyDigest.slice(0, 10)}`;
}
