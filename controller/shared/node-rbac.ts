/**
 * What one machine's certificate may read, as RBAC objects the approver writes when it issues
 * the identity (docs/identity.md): a Role in the machine's namespace naming only the Secrets of
 * the reconcile OSC it follows (the latest reconcile Secret and the five revision slots), bound
 * to the group oscar:config:<config UID> alone — the second organisation of the certificates this
 * config issued, so a certificate of an earlier machine of the same name (another config, another
 * UID) reads nothing here although its user, oscar:node:<machine>, is the same. Both are owned by the machine's OscarConfig, so the
 * garbage collector removes them with the machine. What it may write (its own
 * OperatingSystemConfigNode) is the shared ClusterRole oscar:node and the
 * ValidatingAdmissionPolicy oscar-node-own-object in deploy/identity/.
 *
 * The Role follows the config: when spec.reconcileRef changes (Cluster API's in-place update, or
 * an operator), the bootstrap reconcile rewrites it for the new OSC (controller/bootstrap/
 * reconcile.ts, phase "node access"), before any grant of the new OSC can reach the node.
 */
import { BOOTSTRAP_API_VERSION, OSCAR_CONFIG_KIND } from '../../api/bootstrap/constants.js';
import { API_VERSION, GROUP, OSC_NODE_KIND, ROLLOUT_LIMITS } from '../../api/constants.js';
import { configGroup } from '../../api/identity.js';
import { revisionSecretName, secretNameFor } from '../../api/secret.js';

/**
 * The approver's field manager. The bootstrap controller writes a machine's Role under it too, so
 * the Role's rules have one writer whichever controller of this process writes them; it lives
 * here, below both controllers, so that neither imports the other for it.
 */
export const IDENTITY_FIELD_MANAGER = 'oscar-identity';

export const RBAC_API_VERSION = 'rbac.authorization.k8s.io/v1';

export function nodeRoleName(machine: string): string {
  return `oscar-node-${machine}`;
}

export interface MachineGrant {
  machine: string;
  namespace: string;
  /** The reconcile OSC the machine follows. */
  osc: string;
  config: { name: string; uid: string };
}

/** Labels on every Role and RoleBinding the approver writes (the bootstrap controller watches them). */
export const NODE_RBAC_LABELS: Readonly<Record<string, string>> = {
  'app.kubernetes.io/managed-by': 'oscar-controller',
};
export const NODE_RBAC_SELECTOR = 'app.kubernetes.io/managed-by=oscar-controller';

/** What the machine of this config may read: the Secrets of the config's reconcile OSC now. */
export function machineGrantFor(
  config: {
    metadata: { name: string; namespace?: string; uid?: string };
    spec: { reconcileRef: { name: string } };
  },
  machine: string,
): MachineGrant {
  return {
    machine,
    namespace: config.metadata.namespace ?? '',
    osc: config.spec.reconcileRef.name,
    config: { name: config.metadata.name, uid: config.metadata.uid ?? '' },
  };
}

/**
 * Whether a stored Role already grants what `desired` does and is the one this config owns:
 * the rules alone decide (the approver's labels and owner do not change with the config).
 */
export function nodeRoleCurrent(
  stored: { rules?: unknown },
  desired: Record<string, unknown>,
): boolean {
  return rulesKey(stored.rules) === rulesKey(desired.rules);
}

/**
 * The rules by value, whatever the order of each rule's keys: the API server gives them back in
 * its own order (verbs first), so comparing the JSON text never matched a stored Role and every
 * pass of its config applied it again (15 applies for 2 machines in hack/bench/capi-nodes.ts).
 */
function rulesKey(rules: unknown): string {
  if (!Array.isArray(rules)) return '';
  return JSON.stringify(
    rules.map((r: Record<string, unknown> | null) => [
      r?.apiGroups,
      r?.resources,
      r?.resourceNames,
      r?.verbs,
      r?.nonResourceURLs,
    ]),
  );
}

function owner(g: MachineGrant): Record<string, unknown> {
  return {
    apiVersion: BOOTSTRAP_API_VERSION,
    kind: OSCAR_CONFIG_KIND,
    name: g.config.name,
    uid: g.config.uid,
  };
}

export function nodeRole(g: MachineGrant): Record<string, unknown> {
  const revisions: string[] = [];
  for (let slot = 0; slot < ROLLOUT_LIMITS.revisionSlots; slot++) {
    revisions.push(revisionSecretName(g.osc, slot));
  }
  return {
    apiVersion: RBAC_API_VERSION,
    kind: 'Role',
    metadata: {
      name: nodeRoleName(g.machine),
      namespace: g.namespace,
      labels: { ...NODE_RBAC_LABELS },
      ownerReferences: [owner(g)],
    },
    rules: [
      // --secret mode: get, and list+watch with fieldSelector metadata.name (RBAC matches
      // resourceNames against that selector).
      {
        apiGroups: [''],
        resources: ['secrets'],
        resourceNames: [secretNameFor(g.osc, 'reconcile')],
        verbs: ['get', 'list', 'watch'],
      },
      // grant mode: the granted revision Secret, by name.
      { apiGroups: [''], resources: ['secrets'], resourceNames: revisions, verbs: ['get'] },
    ],
  };
}

export function nodeRoleBinding(g: MachineGrant): Record<string, unknown> {
  return {
    apiVersion: RBAC_API_VERSION,
    kind: 'RoleBinding',
    metadata: {
      name: nodeRoleName(g.machine),
      namespace: g.namespace,
      labels: { ...NODE_RBAC_LABELS },
      ownerReferences: [owner(g)],
    },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: nodeRoleName(g.machine) },
    subjects: [
      { apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: configGroup(g.config.uid) },
    ],
  };
}

/**
 * What one machine's certificate may read of the cluster-wide node objects and Nodes: its own, by name (get,
 * and list+watch with fieldSelector metadata.name, which RBAC matches against resourceNames). Node
 * objects are cluster-scoped and named after machines of every namespace, and a report carries a
 * failing unit's journal lines, drifted paths and the OSC it follows: with read rights on the whole
 * resource, a node of one namespace read every other namespace's machines (docs/identity.md,
 * tenancy). A ClusterRole per machine, bound to the config's UID group like its Role, owned by the
 * node object it names, so the garbage collector removes it with that object (deleted with its
 * config: controller/bootstrap/reconcile.ts).
 */
export function nodeReaderRole(
  g: MachineGrant,
  node: { name: string; uid: string },
): Record<string, unknown> {
  return {
    apiVersion: RBAC_API_VERSION,
    kind: 'ClusterRole',
    metadata: {
      name: nodeRoleName(g.machine),
      labels: { ...NODE_RBAC_LABELS },
      ownerReferences: [nodeOwner(node)],
    },
    rules: [
      {
        apiGroups: [GROUP],
        resources: ['operatingsystemconfignodes'],
        resourceNames: [g.machine],
        verbs: ['get', 'list', 'watch'],
      },
      // its Kubernetes Node (named after the machine: the approver signs kubelet's certificate
      // for system:node:<machine> only), read after a reboot inside try mode: Ready in the new
      // boot before a Reboot-level revision is confirmed (agent/reboot/node-ready.ts)
      { apiGroups: [''], resources: ['nodes'], resourceNames: [g.machine], verbs: ['get'] },
    ],
  };
}

export function nodeReaderBinding(
  g: MachineGrant,
  node: { name: string; uid: string },
): Record<string, unknown> {
  return {
    apiVersion: RBAC_API_VERSION,
    kind: 'ClusterRoleBinding',
    metadata: {
      name: nodeRoleName(g.machine),
      labels: { ...NODE_RBAC_LABELS },
      ownerReferences: [nodeOwner(node)],
    },
    roleRef: {
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'ClusterRole',
      name: nodeRoleName(g.machine),
    },
    subjects: [
      { apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: configGroup(g.config.uid) },
    ],
  };
}

function nodeOwner(node: { name: string; uid: string }): Record<string, unknown> {
  return { apiVersion: API_VERSION, kind: OSC_NODE_KIND, name: node.name, uid: node.uid };
}
