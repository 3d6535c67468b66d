/**
 * What the approver does to a machine's OperatingSystemConfigNode before it approves an identity
 * for a config UID (docs/identity.md, "Tenancy"). The object is cluster-wide and named after the
 * machine, so it may have been written under an earlier identity of that name: a deleted machine
 * of the same or another namespace, or an agent with other credentials. The rule is a class, not
 * a list of fields: **whatever is on the object when it passes to another identity is cleared**
 * — its status (applied revision, checksums, conditions, the OSC it followed), its spec (a grant),
 * its labels and annotations — so nothing a rollout or the extension reads of the newcomer comes
 * from the machine before it. Only its name, finalizers and owner references stay (no identity
 * writes those; dropping another controller's finalizer would skip its cleanup).
 *
 * Pure: the writer (writer.ts) reads the object, asks here, and sends the patches with the
 * object's resourceVersion as their precondition, so a write that raced the read is a conflict
 * retried from the top, never a partial claim.
 */
import { API_VERSION, OSC_NODE_KIND } from '../../api/constants.js';
import { CONFIG_UID_LABEL } from '../../api/identity.js';

/** The node object as the approver reads it (GET). */
export interface ClaimedNode {
  metadata: {
    name: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
}

export type NodeClaim =
  /** No object yet: create it, labelled, and nothing else. */
  | { action: 'create'; body: Record<string, unknown> }
  /** Already this identity's (a renewal, or a retried approval): no write. */
  | { action: 'keep' }
  /**
   * Another identity's, or nobody's: clear its status first (while its label still names the
   * old identity, so the old certificate may race it: the precondition catches that), then
   * relabel it and clear everything else in one write.
   */
  | {
      action: 'reset';
      status: Record<string, unknown>;
      object: (resourceVersion: string) => Record<string, unknown>;
    };

export function claimNode(node: ClaimedNode | undefined, machine: string, uid: string): NodeClaim {
  if (node === undefined) {
    return {
      action: 'create',
      body: {
        apiVersion: API_VERSION,
        kind: OSC_NODE_KIND,
        metadata: { name: machine, labels: { [CONFIG_UID_LABEL]: uid } },
      },
    };
  }
  if (node.metadata.labels?.[CONFIG_UID_LABEL] === uid) return { action: 'keep' };
  const rv = node.metadata.resourceVersion ?? '';
  return {
    action: 'reset',
    status: { metadata: { resourceVersion: rv }, status: null },
    object: (resourceVersion) => ({
      metadata: {
        resourceVersion,
        labels: { ...nulled(node.metadata.labels), [CONFIG_UID_LABEL]: uid },
        annotations: nulled(node.metadata.annotations),
      },
      spec: null,
    }),
  };
}

/** A JSON merge patch removing every key of `map`. */
function nulled(map: Record<string, string> | undefined): Record<string, null> {
  return Object.fromEntries(Object.keys(map ?? {}).map((k) => [k, null]));
}
