/**
 * The Secret object the controller applies for one OperatingSystemConfig, following the
 * contract in api/secret.ts, and the test that tells whether an existing Secret already holds it.
 */
import { createHash } from 'node:crypto';
import { API_VERSION, OSC_KIND, type Purpose } from '../../api/schema.js';
import { ANNOTATION_CHECKSUM, LABEL_OSC, LABEL_PURPOSE } from '../../api/secret.js';
import type { KubeObject, OwnerReference } from '../kube/types.js';

/**
 * sha256 over every data key and value. oscar.dev/checksum covers the canonical config only; this
 * one also moves when the rendering of the same config changes (a renderer upgrade), so such a
 * change is written too, and an unchanged one is not.
 */
export const ANNOTATION_DATA_CHECKSUM = 'oscar.dev/data-checksum';

/** Cluster API's bootstrap data Secrets carry this type; reconcile Secrets are plain Opaque. */
export const PROVISION_SECRET_TYPE = 'cluster.x-k8s.io/secret';

export function dataChecksum(data: Readonly<Record<string, Buffer>>): string {
  const hash = createHash('sha256');
  for (const key of Object.keys(data).sort()) {
    hash
      .update(key)
      .update('\0')
      .update(data[key] ?? Buffer.alloc(0))
      .update('\0');
  }
  return hash.digest('hex');
}

export function dataSize(data: Readonly<Record<string, Buffer>>): number {
  let n = 0;
  for (const [k, v] of Object.entries(data)) n += k.length + v.length;
  return n;
}

export interface OwnerInfo {
  name: string;
  namespace: string;
  uid: string;
}

export function ownerReference(owner: OwnerInfo): OwnerReference {
  return {
    apiVersion: API_VERSION,
    kind: OSC_KIND,
    name: owner.name,
    uid: owner.uid,
    controller: true,
    blockOwnerDeletion: true,
  };
}

export interface DesiredSecret {
  name: string;
  purpose: Purpose;
  checksum: string;
  dataChecksum: string;
}

/** The Secret as oscar writes it: the body of its create, the source of its update patch. */
export function secretBody(
  owner: OwnerInfo,
  desired: DesiredSecret,
  data: Readonly<Record<string, Buffer>>,
): Record<string, unknown> {
  const encoded: Record<string, string> = {};
  for (const key of Object.keys(data).sort())
    encoded[key] = (data[key] ?? Buffer.alloc(0)).toString('base64');
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: desired.name,
      namespace: owner.namespace,
      labels: { [LABEL_OSC]: owner.name, [LABEL_PURPOSE]: desired.purpose },
      annotations: {
        [ANNOTATION_CHECKSUM]: desired.checksum,
        [ANNOTATION_DATA_CHECKSUM]: desired.dataChecksum,
      },
      ownerReferences: [ownerReference(owner)],
    },
    type: desired.purpose === 'provision' ? PROVISION_SECRET_TYPE : 'Opaque',
    data: encoded,
  };
}

/** True when the existing Secret (metadata is enough) already is the desired one. */
export function secretUpToDate(
  existing: KubeObject | undefined,
  owner: OwnerInfo,
  desired: DesiredSecret,
): boolean {
  if (!existing) return false;
  const m = existing.metadata;
  return (
    m.annotations?.[ANNOTATION_CHECKSUM] === desired.checksum &&
    m.annotations[ANNOTATION_DATA_CHECKSUM] === desired.dataChecksum &&
    m.labels?.[LABEL_OSC] === owner.name &&
    m.labels[LABEL_PURPOSE] === desired.purpose &&
    (m.ownerReferences ?? []).some((r) => r.uid === owner.uid && r.controller === true)
  );
}

/** One operation of a JSON patch (RFC 6902). */
export interface JsonPatchOp {
  op: 'add' | 'replace';
  path: string;
  value: unknown;
}

/** A JSON pointer segment: `~` and `/` escaped (RFC 6901). */
function pointer(key: string): string {
  return key.replaceAll('~', '~0').replaceAll('/', '~1');
}

/** Ours set key by key into a map that may already hold others' keys. */
function mapOps(
  path: string,
  existing: object | undefined,
  ours: Record<string, string>,
): JsonPatchOp[] {
  if (!existing) return [{ op: 'add', path, value: ours }];
  return Object.entries(ours).map(([k, v]) => ({
    op: 'add',
    path: `${path}/${pointer(k)}`,
    value: v,
  }));
}

/**
 * The update of an existing Secret to `body` (from secretBody), as a JSON patch: the data replaced
 * whole, so keys oscar no longer renders go (config.json after a switch to config.json.gz); oscar's
 * labels, annotations and owner reference set without touching others'; and the cached
 * resourceVersion as a precondition (409 Conflict when the Secret changed since). A server-side
 * apply would do the same merge at about twice the API server's CPU (hack/bench/write-cost.ts), and
 * could not remove keys first written by a create, which the apply's field manager does not own.
 */
export function secretUpdatePatch(
  existing: KubeObject,
  body: Record<string, unknown>,
): JsonPatchOp[] {
  const ours = body.metadata as {
    labels: Record<string, string>;
    annotations: Record<string, string>;
    ownerReferences: OwnerReference[];
  };
  const m = existing.metadata;
  const ops: JsonPatchOp[] = [
    { op: 'replace', path: '/metadata/resourceVersion', value: m.resourceVersion },
    ...mapOps('/metadata/labels', m.labels, ours.labels),
    ...mapOps('/metadata/annotations', m.annotations, ours.annotations),
  ];
  const owner = ours.ownerReferences[0];
  const refs = m.ownerReferences ?? [];
  if (owner && !refs.some((r) => r.uid === owner.uid && r.controller === true)) {
    // One controller per object: an OSC deleted and created again under the same name hands
    // the Secret over (its old reference would make the API server refuse the new one).
    const others = refs.filter((r) => r.uid !== owner.uid && r.controller !== true);
    ops.push({ op: 'add', path: '/metadata/ownerReferences', value: [...others, owner] });
  }
  ops.push({ op: 'add', path: '/data', value: body.data });
  return ops;
}

/**
 * Whether a Secret that already has the name of an OSC's output is oscar's to write: it names an
 * OperatingSystemConfig of that name as its controller (this OSC, or one deleted and created again
 * under the same name, which secretUpdatePatch hands the Secret over from). Anything else — an
 * app's credentials, a Secret someone made by hand — is never modified: overwriting it would lose
 * its data and change what other workloads mount. The bootstrap controller refuses the same case
 * for its user data Secrets (controller/bootstrap, reason SecretNameTaken).
 */
export function secretIsOscars(existing: KubeObject, oscName: string): boolean {
  return (existing.metadata.ownerReferences ?? []).some(
    (r) =>
      r.controller === true &&
      r.kind === OSC_KIND &&
      r.apiVersion === API_VERSION &&
      r.name === oscName,
  );
}

/** The condition message when an output's name is taken by a Secret that is not oscar's. */
export function secretNameTakenMessage(
  namespace: string,
  secretName: string,
  oscName: string,
): string {
  return `A Secret named ${secretName} already exists in namespace ${namespace} and was not made by oscar for OperatingSystemConfig ${oscName}; it is left untouched. Rename the OperatingSystemConfig, or delete or rename that Secret.`;
}
