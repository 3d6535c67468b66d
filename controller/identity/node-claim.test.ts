import { describe, expect, it } from 'vitest';
import { CONFIG_UID_LABEL } from '../../api/identity.js';
import { claimNode, type ClaimedNode } from './node-claim.js';

/** A node object an earlier machine `m` (config UID old-uid) left: granted, applied, reporting. */
function leftBehind(labels: Record<string, string> = { [CONFIG_UID_LABEL]: 'old-uid' }) {
  return {
    metadata: {
      name: 'm',
      resourceVersion: '41',
      labels: { ...labels, team: 'a' },
      annotations: { note: 'x' },
    },
    spec: { revision: { osc: 'rec', namespace: 'ns', number: 3, checksum: 'sha256:aa' } },
    status: {
      oscRef: { namespace: 'ns', name: 'rec' },
      appliedChecksum: 'sha256:aa',
      source: 'Grant',
      revision: { number: 3, checksum: 'sha256:aa', phase: 'Confirmed' },
      conditions: [{ type: 'Applied', status: 'True' }],
    },
  } satisfies ClaimedNode;
}

/** The object after the two merge patches, as the API server would merge them. */
function applyReset(node: ClaimedNode, uid: string): Record<string, unknown> {
  const claim = claimNode(node, 'm', uid);
  if (claim.action !== 'reset') throw new Error(`expected a reset, got ${claim.action}`);
  const patch = claim.object('42') as {
    metadata: { labels: Record<string, string | null>; annotations: Record<string, null> };
    spec?: null;
  };
  const labels = { ...node.metadata.labels, ...patch.metadata.labels };
  const annotations = { ...node.metadata.annotations, ...patch.metadata.annotations };
  const drop = (m: Record<string, string | null>) =>
    Object.fromEntries(Object.entries(m).filter(([, v]) => v !== null));
  const status = (claim.status as { status: unknown }).status;
  return {
    labels: drop(labels),
    annotations: drop(annotations),
    ...('spec' in patch && patch.spec === null ? {} : { spec: node.spec }),
    ...(status === null ? {} : { status: node.status }),
  };
}

describe('claimNode: the node object passes to a new identity with nothing of the old one', () => {
  it('creates a missing object labelled with the UID, and nothing else', () => {
    expect(claimNode(undefined, 'm', 'new-uid')).toEqual({
      action: 'create',
      body: {
        apiVersion: 'oscar.dev/v1alpha1',
        kind: 'OperatingSystemConfigNode',
        metadata: { name: 'm', labels: { [CONFIG_UID_LABEL]: 'new-uid' } },
      },
    });
  });

  it("keeps its own identity's object as it is (a renewal writes nothing)", () => {
    expect(claimNode(leftBehind({ [CONFIG_UID_LABEL]: 'uid' }), 'm', 'uid')).toEqual({
      action: 'keep',
    });
  });

  it("clears an earlier identity's status, grant, labels and annotations; only the new label stays", () => {
    expect(applyReset(leftBehind(), 'new-uid')).toEqual({
      labels: { [CONFIG_UID_LABEL]: 'new-uid' },
      annotations: {},
    });
  });

  it("clears an unlabelled object too (an agent's with other credentials, or of the form before UIDs)", () => {
    expect(applyReset(leftBehind({}), 'new-uid')).toEqual({
      labels: { [CONFIG_UID_LABEL]: 'new-uid' },
      annotations: {},
    });
  });

  it('resets an object with no labels or annotations at all', () => {
    const bare = { metadata: { name: 'm', resourceVersion: '7' }, status: { source: 'Grant' } };
    const claim = claimNode(bare, 'm', 'new-uid');
    expect(claim.action).toBe('reset');
    if (claim.action === 'reset') {
      expect(claim.object('8')).toEqual({
        metadata: {
          resourceVersion: '8',
          labels: { [CONFIG_UID_LABEL]: 'new-uid' },
          annotations: {},
        },
        spec: null,
      });
    }
  });

  it('writes the status first, preconditioned on the resourceVersion read; the relabel on the one after it', () => {
    const claim = claimNode(leftBehind(), 'm', 'new-uid');
    if (claim.action !== 'reset') throw new Error('expected a reset');
    expect(claim.status).toEqual({ metadata: { resourceVersion: '41' }, status: null });
    expect(claim.object('42')).toMatchObject({ metadata: { resourceVersion: '42' }, spec: null });
  });
});
