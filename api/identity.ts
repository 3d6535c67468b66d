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
/**
 * The second organisation (group) of a node's certificate: the UID of the OscarConfig that issued
 * it. Node users are cluster-wide and named after machines, so a machine name reused after its
 * machine was deleted would be the same user; the group is not. The machine's RoleBinding names
 * this group alone, its OperatingSystemConfigNode carries the UID (CONFIG_UID_LABEL), and a
 * renewal keeps it (docs/identity.md, "The subject").
 */
export const CONFIG_GROUP_PREFIX = 'oscar:config:';
/** The label on an OperatingSystemConfigNode naming the config UID whose node may write it. */
export const CONFIG_UID_LABEL = 'oscar.dev/config-uid';
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

export function configGroup(uid: string): string {
  return `${CONFIG_GROUP_PREFIX}${uid}`;
}

/** The config UIDs that a user's groups name (one for a certificate of today's form, none for an older one). */
export function configUidsOf(groups: readonly string[]): string[] {
  return groups
    .filter((g) => g.startsWith(CONFIG_GROUP_PREFIX) && g.length > CONFIG_GROUP_PREFIX.length)
    .map((g) => g.slice(CONFIG_GROUP_PREFIX.length));
}
