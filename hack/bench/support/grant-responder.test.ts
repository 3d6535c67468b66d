import { describe, expect, it } from 'vitest';
import { resolvePolicy } from '../../../api/rollout.js';
import type { OperatingSystemConfigNodeStatus, RevisionGrant } from '../../../api/schema.js';
import { nodeStateOf } from '../../../controller/rollout/node-index.js';
import { planRollout, type Revision } from '../../../controller/rollout/planner.js';
import { answerPatch } from './grant-responder.js';

const S: Revision = { number: 1, checksum: 'a'.repeat(64), secretName: 'oscar-w-rev-0' };
const T: Revision = { number: 2, checksum: 'b'.repeat(64), secretName: 'oscar-w-rev-1' };
const NOW = Date.parse('2026-12-04T10:00:00Z');

/** A JSON merge patch (RFC 7386) laid over `target`. */
function merge(target: unknown, patch: unknown): unknown {
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) return patch;
  const base =
    typeof target === 'object' && target !== null && !Array.isArray(target)
      ? (target as Record<string, unknown>)
      : {};
  const changes = patch as Record<string, unknown>;
  const keys = new Set([...Object.keys(base), ...Object.keys(changes)]);
  const out: Record<string, unknown> = {};
  for (const k of keys) {
    if (!(k in changes)) out[k] = base[k];
    else if (changes[k] !== null) out[k] = merge(base[k], changes[k]);
  }
  return out;
}

/** The rollout's node counts as the real planner makes them for one node with this status. */
function countsOf(grant: RevisionGrant, generation: number, status: unknown): unknown {
  const node = {
    metadata: { name: 'n1', generation },
    spec: { revision: grant },
    status: status as OperatingSystemConfigNodeStatus,
  };
  const state = nodeStateOf(node);
  if (!state) throw new Error('the node does not follow grants');
  const plan = planRollout({
    namespace: 'ns',
    osc: 'w',
    policy: resolvePolicy({ soakSeconds: 10 }),
    rendered: T,
    revisions: [S, T],
    nodes: [state.state],
    memory: undefined,
    resumeToken: undefined,
    reportedFailures: new Set(),
    now: new Date(NOW),
  });
  return plan.status?.nodes;
}

const tried: RevisionGrant = {
  namespace: 'ns',
  osc: 'w',
  number: 2,
  secretName: T.secretName,
  checksum: T.checksum,
  grantedTime: new Date(NOW).toISOString(),
  try: { soakSeconds: 10, deadlineSeconds: 600 },
};
/** The status part of a report (the patch is of the node object). */
function statusOf(...args: Parameters<typeof answerPatch>): unknown {
  return answerPatch(...args).status;
}

const joined = {
  source: 'Grant',
  oscRef: { namespace: 'ns', name: 'w' },
  appliedChecksum: S.checksum,
};

describe('the bench nodes answer their grants as the grant-mode agent does', () => {
  it('in try mode: Verifying with the applied checksum and a deadline, which the planner counts as updating', () => {
    const verifying = merge(joined, statusOf(tried, 2, 'Verifying', S.checksum, NOW)) as {
      appliedChecksum: string;
      revision: { phase: string; deadline?: string; previousChecksum?: string };
    };
    expect(verifying.appliedChecksum).toBe(T.checksum);
    expect(verifying.revision.phase).toBe('Verifying');
    expect(verifying.revision.deadline).toBe('2026-12-04T10:10:10Z');
    expect(verifying.revision.previousChecksum).toBe(S.checksum);
    expect(countsOf(tried, 2, verifying)).toMatchObject({ updating: 1, updated: 0 });
  });

  it('then Confirmed: the deadline removed, and the planner counts the node updated', () => {
    const verifying = merge(joined, statusOf(tried, 2, 'Verifying', S.checksum, NOW));
    const confirmed = merge(verifying, statusOf(tried, 2, 'Confirmed', S.checksum, NOW)) as {
      revision: { phase: string; reason: string; deadline?: string };
    };
    expect(confirmed.revision).toMatchObject({ phase: 'Confirmed', reason: 'Healthy' });
    expect(confirmed.revision.deadline).toBeUndefined();
    expect(countsOf(tried, 2, confirmed)).toMatchObject({ updating: 0, updated: 1 });
  });

  it('an answer to an older grant (another generation) is not counted as the answer', () => {
    const stale = merge(joined, statusOf(tried, 1, 'Confirmed', S.checksum, NOW));
    expect(countsOf(tried, 2, stale)).toMatchObject({ updated: 0 });
  });

  it('without try mode (a first revision): Confirmed at once, with the applied checksum', () => {
    const plain: RevisionGrant = { ...tried };
    delete plain.try;
    const patch = answerPatch(plain, 1, 'Confirmed', undefined, NOW) as {
      status: { appliedChecksum?: string; revision: { phase: string; reason: string } };
    };
    expect(patch.status.appliedChecksum).toBe(T.checksum);
    expect(patch.status.revision).toMatchObject({ phase: 'Confirmed', reason: 'Applied' });
  });
});
