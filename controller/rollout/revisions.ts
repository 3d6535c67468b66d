/**
 * Revisions: every rendering of a reconcile OSC that a rollout may hand to nodes is kept in a
 * revision Secret — a copy of the reconcile Secret's config, labelled with the OSC and its
 * revision number, annotated with its checksum (what agents verify) and its disruption digest.
 * They live in ROLLOUT_LIMITS.revisionSlots fixed names per OSC (api/secret.ts
 * revisionSecretName, so RBAC can name them); a new revision takes a free slot, else the slot of
 * the oldest revision nothing pins (the stable and target revisions, an undo's target, and any
 * revision a node is granted are pinned).
 */
import { ROLLOUT_LIMITS } from '../../api/constants.js';
import {
  ANNOTATION_CHECKSUM,
  ANNOTATION_DISRUPTION,
  ANNOTATION_DISRUPTION_DRAIN,
  ANNOTATION_DISRUPTION_REBOOT,
  LABEL_OSC,
  LABEL_PURPOSE,
  LABEL_REVISION,
  PURPOSE_REVISION,
  revisionSecretName,
} from '../../api/secret.js';
import type { KubeObject } from '../kube/types.js';
import { ownerReference, type OwnerInfo } from '../osc/secret-object.js';
import type { Revision } from './planner.js';

export interface Slot {
  slot: number;
  secretName: string;
  revision?: Revision;
}

/** The OSC's revision slots as the (metadata-only) cache shows them. */
export function readSlots(oscName: string, owned: readonly KubeObject[]): Slot[] {
  const byName = new Map(owned.map((s) => [s.metadata.name, s]));
  const slots: Slot[] = [];
  for (let slot = 0; slot < ROLLOUT_LIMITS.revisionSlots; slot++) {
    const secretName = revisionSecretName(oscName, slot);
    const s = byName.get(secretName);
    const number = Number(s?.metadata.labels?.[LABEL_REVISION]);
    const checksum = s?.metadata.annotations?.[ANNOTATION_CHECKSUM];
    if (
      s &&
      s.metadata.labels?.[LABEL_OSC] === oscName &&
      Number.isInteger(number) &&
      number > 0 &&
      checksum !== undefined &&
      /^[0-9a-f]{64}$/.test(checksum)
    ) {
      const a = s.metadata.annotations ?? {};
      const disruption = a[ANNOTATION_DISRUPTION];
      const drainDigest = a[ANNOTATION_DISRUPTION_DRAIN];
      const rebootDigest = a[ANNOTATION_DISRUPTION_REBOOT];
      slots.push({
        slot,
        secretName,
        revision: {
          number,
          checksum,
          secretName,
          ...(disruption ? { disruption } : {}),
          ...(drainDigest ? { drainDigest } : {}),
          ...(rebootDigest ? { rebootDigest } : {}),
        },
      });
    } else {
      slots.push({ slot, secretName });
    }
  }
  return slots;
}

export function revisionsOf(slots: readonly Slot[]): Revision[] {
  return slots.flatMap((s) => (s.revision ? [s.revision] : []));
}

/** The slot a new revision goes to: a free one, else the oldest unpinned; undefined: all pinned. */
export function chooseSlot(slots: readonly Slot[], pinned: ReadonlySet<number>): Slot | undefined {
  const free = slots.find((s) => !s.revision);
  if (free) return free;
  return slots
    .filter((s) => s.revision && !pinned.has(s.revision.number))
    .sort((a, b) => (a.revision?.number ?? 0) - (b.revision?.number ?? 0))[0];
}

/** Revision numbers only grow: above every kept one and every one the status remembers. */
export function nextRevisionNumber(slots: readonly Slot[], remembered: readonly number[]): number {
  let max = 0;
  for (const s of slots) max = Math.max(max, s.revision?.number ?? 0);
  for (const n of remembered) max = Math.max(max, n);
  return max + 1;
}

export interface NewRevision {
  owner: OwnerInfo;
  secretName: string;
  number: number;
  checksum: string;
  disruption: string;
  drainDigest: string;
  rebootDigest: string;
  /** config.json or config.json.gz, as the reconcile Secret holds it (already verified). */
  data: Readonly<Record<string, Buffer>>;
}

/** The server-side apply body of a revision Secret. */
export function revisionSecretBody(r: NewRevision): Record<string, unknown> {
  const data: Record<string, string> = {};
  for (const key of Object.keys(r.data).sort()) {
    data[key] = (r.data[key] ?? Buffer.alloc(0)).toString('base64');
  }
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: r.secretName,
      namespace: r.owner.namespace,
      labels: {
        [LABEL_OSC]: r.owner.name,
        [LABEL_PURPOSE]: PURPOSE_REVISION,
        [LABEL_REVISION]: String(r.number),
      },
      annotations: {
        [ANNOTATION_CHECKSUM]: r.checksum,
        [ANNOTATION_DISRUPTION]: r.disruption,
        [ANNOTATION_DISRUPTION_DRAIN]: r.drainDigest,
        [ANNOTATION_DISRUPTION_REBOOT]: r.rebootDigest,
      },
      ownerReferences: [ownerReference(r.owner)],
    },
    type: 'Opaque',
    data,
  };
}
