import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { disruptionDigests } from '../../api/disruption.js';
import { resolvePolicy, scaledCount } from '../../api/rollout.js';
import type { GrantPhase, RolloutPolicy, RolloutStatus } from '../../api/schema.js';
import {
  NODE_REPORT_GRACE_MS,
  planRollout,
  type NodeState,
  type Revision,
  type RolloutInput,
  type RolloutPlan,
} from './planner.js';

const S: Revision = {
  number: 1,
  checksum: 'a'.repeat(64),
  secretName: 'oscar-w-rev-0',
  disruption: 'd1',
  drainDigest: 'n1',
  rebootDigest: 'r1',
};
const T: Revision = {
  number: 2,
  checksum: 'b'.repeat(64),
  secretName: 'oscar-w-rev-1',
  disruption: 'd2',
  drainDigest: 'n1',
  rebootDigest: 'r1',
};
const T0 = Date.parse('2026-12-03T10:00:00Z');

/** A fleet in memory: nodes the planner grants to, agents that answer, time that moves. */
class Fleet {
  nodes = new Map<string, NodeState>();
  memory: RolloutStatus | undefined;
  reported = new Set<string>();
  now = T0;
  resumeToken: string | undefined;
  revisions: Revision[] = [S, T];
  rendered: Revision = S;
  plans: RolloutPlan[] = [];

  constructor(
    n: number,
    public policy: RolloutPolicy = {},
  ) {
    for (let i = 0; i < n; i++) {
      const name = `node-${String(i).padStart(3, '0')}`;
      this.nodes.set(name, { name, generation: 0, degraded: false });
    }
  }

  plan(): RolloutPlan {
    const input: RolloutInput = {
      namespace: 'ns',
      osc: 'w',
      policy: resolvePolicy(this.policy),
      rendered: this.rendered,
      revisions: this.revisions,
      nodes: [...this.nodes.values()],
      memory: this.memory,
      resumeToken: this.resumeToken,
      reportedFailures: this.reported,
      now: new Date(this.now),
    };
    const p = planRollout(input);
    for (const { node, grant } of p.grants) {
      const n = this.nodes.get(node);
      if (!n) throw new Error(`grant to unknown node ${node}`);
      n.grant = grant;
      n.generation++;
    }
    for (const k of p.newlyReported) this.reported.add(k);
    this.memory = p.status;
    this.plans.push(p);
    return p;
  }

  /** The agent of `name` answers its grant. */
  answer(name: string, phase: GrantPhase): void {
    const n = this.nodes.get(name);
    if (!n?.grant) throw new Error(`${name} has no grant`);
    n.report = {
      observedGeneration: n.generation,
      number: n.grant.number,
      checksum: n.grant.checksum,
      phase,
      reason: phase,
      message: '',
      lastTransitionTime: new Date(this.now).toISOString(),
    };
    if (phase === 'Confirmed' || phase === 'Verifying') n.appliedChecksum = n.grant.checksum;
  }

  /** Every node on `rev`, confirmed: a finished earlier rollout. */
  settle(): void {
    this.plan();
    for (const n of this.nodes.values()) this.answer(n.name, 'Confirmed');
    this.plan();
  }

  granted(rev: Revision): NodeState[] {
    return [...this.nodes.values()].filter((n) => n.grant?.checksum === rev.checksum);
  }

  inFlight(rev: Revision): NodeState[] {
    return this.granted(rev).filter(
      (n) =>
        !(
          n.report?.observedGeneration === n.generation &&
          ['Confirmed', 'RolledBack', 'Failed'].includes(n.report.phase)
        ),
    );
  }
}

describe('planRollout: tables', () => {
  it('the first revision an OSC has is stable at once: every node gets it, without try mode', () => {
    const f = new Fleet(3);
    const p = f.plan();
    expect(p.grants.map((g) => g.node)).toEqual(['node-000', 'node-001', 'node-002']);
    expect(p.grants.every((g) => g.grant.try === undefined && g.grant.number === 1)).toBe(true);
    expect(p.status?.stableRevision).toBe(1);
    for (const n of f.nodes.values()) f.answer(n.name, 'Confirmed');
    expect(f.plan().status).toMatchObject({ phase: 'Complete', nodes: { updated: 3, total: 3 } });
  });

  it('grants a new revision in try mode to maxUnavailable nodes at a time, by name', () => {
    const f = new Fleet(5, {
      maxUnavailable: 2,
      soakSeconds: 30,
      healthChecks: [{ name: 'k', httpGet: { port: 10248 } }],
    });
    f.settle();
    f.rendered = T;
    const p = f.plan();
    expect(p.grants.map((g) => g.node)).toEqual(['node-000', 'node-001']);
    expect(p.grants[0]?.grant).toMatchObject({
      number: 2,
      secretName: 'oscar-w-rev-1',
      checksum: T.checksum,
      try: {
        soakSeconds: 30,
        deadlineSeconds: 600,
        healthChecks: [{ name: 'k', httpGet: { port: 10248 } }],
      },
    });
    expect(p.events.map((e) => e.reason)).toEqual(['RolloutStarted', 'Wave']);
    expect(p.status).toMatchObject({
      revision: 2,
      stableRevision: 1,
      phase: 'Progressing',
      wave: 1,
      waves: 3,
    });
    // Nothing more until one of them finishes.
    f.answer('node-000', 'Verifying');
    expect(f.plan().grants).toEqual([]);
    f.answer('node-000', 'Confirmed');
    expect(f.plan().grants.map((g) => g.node)).toEqual(['node-002']);
    expect(f.memory?.nodes).toEqual({
      total: 5,
      updated: 1,
      updating: 2,
      failed: 0,
      rolledBack: 0,
      rollingBack: 0,
      pending: 2,
    });
  });

  it('a percentage rounds down but is at least 1; the failure threshold rounds up', () => {
    const f = new Fleet(7, { maxUnavailable: '10%', failureThreshold: '10%' });
    f.settle();
    f.rendered = T;
    expect(f.plan().grants).toHaveLength(1);
    expect(f.memory).toMatchObject({ maxUnavailable: 1, failureThreshold: 1 });
    expect(scaledCount('10%', 7, 'up')).toBe(1);
  });

  it('pauses by itself at the failure threshold, resumes by handing failed nodes the stable revision', () => {
    const f = new Fleet(6, { maxUnavailable: 3, failureThreshold: 2 });
    f.settle();
    f.rendered = T;
    f.plan();
    f.answer('node-000', 'RolledBack');
    let p = f.plan();
    expect(p.events.map((e) => e.reason)).toEqual(['NodeRolledBack', 'Wave']);
    expect(p.grants.map((g) => g.node)).toEqual(['node-003']); // 1 failure < 2: keep going
    f.answer('node-001', 'Failed');
    p = f.plan();
    expect(p.status).toMatchObject({ phase: 'Paused', pauseReason: 'FailureThreshold' });
    expect(p.events.map((e) => [e.type, e.reason])).toEqual([
      ['Warning', 'NodeFailed'],
      ['Warning', 'RolloutPaused'],
    ]);
    expect(p.grants).toEqual([]);
    expect(f.plan().events).toEqual([]); // said once
    f.resumeToken = '2026-12-03T10:05:00Z';
    p = f.plan();
    expect(p.grants.map((g) => [g.node, g.grant.number, g.grant.try])).toEqual([
      ['node-000', 1, undefined],
      ['node-001', 1, undefined],
    ]);
    expect(p.status?.phase).toBe('Progressing');
    expect(p.status?.observedResume).toBe('2026-12-03T10:05:00Z');
    expect(p.events.map((e) => e.reason)).toEqual(['Resumed']);
    // the same token again resumes nothing
    expect(f.plan().events).toEqual([]);
  });

  it('a canary wave goes first; then the rollout waits for a resume', () => {
    const f = new Fleet(10, { maxUnavailable: 5, canary: { nodes: 2 } });
    f.settle();
    f.rendered = T;
    let p = f.plan();
    expect(p.grants.map((g) => [g.node, g.grant.canary])).toEqual([
      ['node-000', true],
      ['node-001', true],
    ]);
    f.answer('node-000', 'Confirmed');
    expect(f.plan().grants).toEqual([]);
    f.answer('node-001', 'Confirmed');
    p = f.plan();
    expect(p.events.map((e) => e.reason)).toEqual(['CanaryComplete', 'RolloutPaused']);
    expect(p.status).toMatchObject({ phase: 'Paused', pauseReason: 'Canary' });
    f.now += 3600_000;
    expect(f.plan().grants).toEqual([]); // no time limit: only a resume continues
    f.resumeToken = 'go';
    p = f.plan();
    expect(p.grants.map((g) => g.node)).toEqual([
      'node-002',
      'node-003',
      'node-004',
      'node-005',
      'node-006',
    ]);
    expect(p.grants.every((g) => g.grant.canary === undefined)).toBe(true);
  });

  it('a canary with pauseSeconds continues by itself after that time', () => {
    const f = new Fleet(4, { maxUnavailable: 1, canary: { nodes: 1, pauseSeconds: 120 } });
    f.settle();
    f.rendered = T;
    f.plan();
    f.answer('node-000', 'Confirmed');
    const p = f.plan();
    expect(p.status?.pauseReason).toBe('Canary');
    expect(p.requeueAfterMs).toBeGreaterThan(119_000);
    expect(p.requeueAfterMs).toBeLessThan(121_000);
    f.now += 121_000;
    expect(f.plan().grants.map((g) => g.node)).toEqual(['node-001']);
  });

  it('spec.rollout.paused stops new grants; nodes in flight finish', () => {
    const f = new Fleet(4, { maxUnavailable: 2 });
    f.settle();
    f.rendered = T;
    f.plan();
    f.policy = { ...f.policy, paused: true };
    f.answer('node-000', 'Confirmed');
    const p = f.plan();
    expect(p.grants).toEqual([]);
    expect(p.status).toMatchObject({ phase: 'Paused', pauseReason: 'Manual' });
    f.policy = { maxUnavailable: 2 };
    expect(f.plan().grants.map((g) => g.node)).toEqual(['node-002']);
  });

  it('completes when every node confirmed; the target becomes stable', () => {
    const f = new Fleet(2, { maxUnavailable: 2 });
    f.settle();
    f.rendered = T;
    f.plan();
    f.answer('node-000', 'Confirmed');
    f.answer('node-001', 'Confirmed');
    const p = f.plan();
    expect(p.status).toMatchObject({ phase: 'Complete', stableRevision: 2, revision: 2 });
    expect(p.events.map((e) => e.reason)).toEqual(['RolloutComplete']);
  });

  it('undo: every node goes back to the named revision, without try mode, at maxUnavailable', () => {
    const f = new Fleet(4, { maxUnavailable: 2 });
    f.settle();
    f.rendered = T;
    f.plan();
    f.answer('node-000', 'Confirmed');
    f.answer('node-001', 'RolledBack');
    f.policy = { maxUnavailable: 2, rollback: { fromRevision: 2, toRevision: 1 } };
    const p = f.plan();
    expect(p.events.map((e) => e.reason)).toContain('RolloutUndo');
    expect(p.status).toMatchObject({ revision: 1, phase: 'Undoing' });
    expect(p.grants.map((g) => [g.node, g.grant.number, g.grant.try])).toEqual([
      ['node-000', 1, undefined],
      ['node-001', 1, undefined],
    ]);
    for (const n of ['node-000', 'node-001']) f.answer(n, 'Confirmed');
    const done = f.plan();
    expect(done.status).toMatchObject({ phase: 'Complete', stableRevision: 1 });
    expect(f.granted(S)).toHaveLength(4);
  });

  it('an undo naming a revision that is not kept is refused with a Warning', () => {
    const f = new Fleet(1, {});
    f.settle();
    f.rendered = T;
    f.policy = { rollback: { fromRevision: 2, toRevision: 9 } };
    const p = f.plan();
    expect(p.events.find((e) => e.reason === 'RollbackIgnored')?.type).toBe('Warning');
    expect(p.status?.revision).toBe(2);
  });

  it('a node that joins mid-rollout gets the stable revision at once, then waits for a wave', () => {
    const f = new Fleet(2, { maxUnavailable: 1 });
    f.settle();
    f.rendered = T;
    f.plan();
    f.nodes.set('node-new', { name: 'node-new', generation: 0, degraded: false });
    const p = f.plan();
    expect(p.grants.map((g) => [g.node, g.grant.number, g.grant.try])).toEqual([
      ['node-new', 1, undefined],
    ]);
    // one that already carries the target keeps it
    f.nodes.set('node-back', {
      name: 'node-back',
      generation: 0,
      degraded: false,
      appliedChecksum: T.checksum,
    });
    expect(f.plan().grants.map((g) => [g.node, g.grant.number])).toEqual([['node-back', 2]]);
  });

  it('a node leaving mid-rollout frees its place', () => {
    const f = new Fleet(3, { maxUnavailable: 1 });
    f.settle();
    f.rendered = T;
    f.plan();
    f.nodes.delete('node-000');
    expect(f.plan().grants.map((g) => g.node)).toEqual(['node-001']);
    expect(f.memory?.nodes.total).toBe(2);
  });

  it('nonDisruptive: Immediate sends a revision that disturbs no unit to every node at once', () => {
    const quiet: Revision = { ...T, disruption: S.disruption };
    const f = new Fleet(6, { maxUnavailable: 1, canary: { nodes: 1 }, nonDisruptive: 'Immediate' });
    f.revisions = [S, quiet];
    f.settle();
    f.rendered = quiet;
    const p = f.plan();
    expect(p.grants).toHaveLength(6);
    expect(p.grants.every((g) => g.grant.try !== undefined && g.grant.canary === undefined)).toBe(
      true,
    );
    // …but a revision that restarts something goes through the waves
    const g = new Fleet(6, { maxUnavailable: 1, nonDisruptive: 'Immediate' });
    g.settle();
    g.rendered = T;
    expect(g.plan().grants).toHaveLength(1);
  });

  it('a node that never answers counts as failed after its deadline and grace', () => {
    const f = new Fleet(3, { maxUnavailable: 1, soakSeconds: 10, progressDeadlineSeconds: 20 });
    f.settle();
    f.rendered = T;
    const p = f.plan();
    expect(p.requeueAfterMs).toBe((20 + 10) * 1000 + NODE_REPORT_GRACE_MS + 100);
    f.now += 30_000 + NODE_REPORT_GRACE_MS;
    const late = f.plan();
    expect(late.status).toMatchObject({ pauseReason: 'FailureThreshold', nodes: { failed: 1 } });
    expect(late.events[0]?.message).toMatch(/did not confirm revision 2 by its deadline/);
  });

  it('a new rendering mid-rollout starts a new rollout from the same stable revision', () => {
    const U: Revision = {
      number: 3,
      checksum: 'c'.repeat(64),
      secretName: 'oscar-w-rev-2',
      drainDigest: 'n1',
      rebootDigest: 'r1',
    };
    const f = new Fleet(3, { maxUnavailable: 1 });
    f.revisions = [S, T, U];
    f.settle();
    f.rendered = T;
    f.plan();
    f.answer('node-000', 'Confirmed');
    f.rendered = U;
    const p = f.plan();
    expect(p.status).toMatchObject({ revision: 3, stableRevision: 1 });
    expect(p.grants.map((g) => [g.node, g.grant.number])).toEqual([['node-000', 3]]);
    expect([...p.pinned].sort()).toEqual([1, 2, 3]);
  });
});

describe('planRollout: drain before a Drain- or Reboot-level revision', () => {
  const R: Revision = { ...T, rebootDigest: 'r2' };
  const D: Revision = { ...T, drainDigest: 'n2' };

  /** What the drainer would report: the node's drain done. */
  function drained(f: Fleet, node: string): void {
    const entry = f.memory?.drains?.find((d) => d.node === node);
    if (!entry) throw new Error(`${node} is not draining`);
    entry.phase = 'Drained';
  }

  /** Two nodes, maxUnavailable 1, a Reboot-level revision: node-000 drained, granted, rebooting back. */
  function rollingBackFleet(): Fleet {
    const f = new Fleet(2, { maxUnavailable: 1, failureThreshold: 2 });
    f.revisions = [S, R];
    f.settle();
    f.rendered = R;
    f.plan();
    drained(f, 'node-000');
    f.plan();
    f.answer('node-000', 'RollingBack');
    return f;
  }

  it('a stable revision an older oscar kept (no per-level digests): drains only when units changed, and says why', () => {
    // what the target's reboot digest is when it declares nothing onChange: reboot
    const none = disruptionDigests({
      type: 'debian',
      purpose: 'reconcile',
      units: [],
      files: [],
      packages: [],
    }).reboot;
    const target: Revision = { ...T, rebootDigest: none };
    const old: Revision = {
      number: 1,
      checksum: S.checksum,
      secretName: S.secretName,
      disruption: 'd1',
    };
    // same restart digest: nothing to drain or reboot for
    const f = new Fleet(2, { maxUnavailable: 1 });
    f.revisions = [old, { ...target, disruption: 'd1' }];
    f.settle();
    f.rendered = { ...target, disruption: 'd1' };
    const quiet = f.plan();
    expect(quiet.drains).toEqual([]);
    expect(quiet.status?.disruption).toBeUndefined();
    // units changed: Drain (not Reboot), with the reason in an event
    const g = new Fleet(2, { maxUnavailable: 1 });
    g.revisions = [old, target];
    g.settle();
    g.rendered = target;
    const p = g.plan();
    expect(p.status?.disruption).toBe('Drain');
    expect(p.drains).toEqual(['node-000']);
    const why = p.events.find((e) => e.reason === 'DisruptionFromOldRevision');
    expect(why?.message).toMatch(
      /Revision 1 was kept by an oscar without per-level disruption digests: revision 2 counts as Drain/,
    );
  });

  it('drains each node before its grant, one at a time, carrying the level; uncordons on confirm', () => {
    const f = new Fleet(2, { maxUnavailable: 1 });
    f.revisions = [S, R];
    f.settle();
    f.rendered = R;
    const p1 = f.plan();
    expect(p1.grants).toEqual([]);
    expect(p1.drains).toEqual(['node-000']);
    expect(p1.status).toMatchObject({ disruption: 'Reboot', nodes: { pending: 2 } });
    expect(p1.status?.drains).toEqual([
      expect.objectContaining({ node: 'node-000', revision: 2, phase: 'Draining' }),
    ]);
    // still draining: asked again, nobody else starts (it counts against maxUnavailable)
    expect(f.plan().drains).toEqual(['node-000']);
    drained(f, 'node-000');
    const p2 = f.plan();
    expect(p2.grants.map((g) => [g.node, g.grant.disruption, g.grant.try !== undefined])).toEqual([
      ['node-000', 'Reboot', true],
    ]);
    expect(p2.drains).toEqual([]);
    f.answer('node-000', 'Confirmed');
    const p3 = f.plan();
    expect(p3.uncordons).toEqual(['node-000']);
    expect(p3.drains).toEqual(['node-001']);
    drained(f, 'node-001');
    f.plan();
    f.answer('node-001', 'Confirmed');
    const done = f.plan();
    expect(done.uncordons).toEqual(['node-001']);
    expect(done.status).toMatchObject({ phase: 'Complete' });
    expect(done.status?.drains).toBeUndefined();
  });

  it('Drain level drains too; a Restart-level target grants at once, without drains', () => {
    const f = new Fleet(1);
    f.revisions = [S, D];
    f.settle();
    f.rendered = D;
    expect(f.plan()).toMatchObject({ grants: [], drains: ['node-000'] });
    expect(f.memory?.disruption).toBe('Drain');
    const g = new Fleet(1);
    g.settle();
    g.rendered = T;
    const p = g.plan();
    expect(p.grants.map((x) => x.grant.disruption)).toEqual([undefined]);
    expect(p.status?.disruption).toBe('Restart');
  });

  it('a node that rolls back is uncordoned; one that failed in place stays cordoned', () => {
    const f = new Fleet(2, { maxUnavailable: 2, failureThreshold: 3 });
    f.revisions = [S, R];
    f.settle();
    f.rendered = R;
    f.plan();
    drained(f, 'node-000');
    drained(f, 'node-001');
    f.plan();
    f.answer('node-000', 'RolledBack');
    f.answer('node-001', 'Failed');
    const p = f.plan();
    expect(p.uncordons).toEqual(['node-000']);
    expect(p.status?.drains?.map((d) => d.node)).toEqual(['node-001']);
  });

  it('issue 25: a node rebooting back (RollingBack) stays cordoned and unavailable, is never granted, until RolledBack', () => {
    const f = rollingBackFleet();
    const rolling = f.plan();
    expect(rolling.uncordons).toEqual([]); // the old rule uncordoned it here, mid-reboot
    expect(rolling.drains).toEqual([]); // it holds the one place: node-001 waits
    expect(rolling.grants).toEqual([]);
    expect(rolling.status?.nodes).toMatchObject({ rolledBack: 1, failed: 1, pending: 1 });
    expect(rolling.status?.message).toContain('1 rebooting back');
    expect(rolling.status?.drains?.map((d) => d.node)).toEqual(['node-000']);
    expect(rolling.status?.drains?.[0]?.message).toMatch(
      /rebooting back .*cordoned until it is back, Ready/,
    );
    const warned = rolling.events.find((e) => e.reason === 'NodeRolledBack');
    expect(warned?.message).toMatch(/stays cordoned until it is back, Ready and healthy there/);
    // a resume meanwhile retries nothing on it; a new rendering neither grants nor uncordons it
    f.resumeToken = 'r1';
    expect(f.plan()).toMatchObject({ grants: [], uncordons: [], drains: [] });
    f.revisions = [S, R, { ...R, number: 3, checksum: 'c'.repeat(64), rebootDigest: 'r3' }];
    f.rendered = f.revisions[2]!;
    const renewed = f.plan();
    expect(renewed.uncordons).toEqual([]);
    expect(renewed.grants.map((g) => g.node)).not.toContain('node-000');
    expect(renewed.status?.drains?.map((d) => d.node)).toEqual(['node-000']);
    f.rendered = R;
    f.revisions = [S, R];
    f.plan();
    // back, Ready and healthy in the old revision: uncordoned, said so; the next node goes
    f.answer('node-000', 'RolledBack');
    const back = f.plan();
    expect(back.uncordons).toEqual(['node-000']);
    expect(back.events.find((e) => e.reason === 'NodeRollbackComplete')?.message).toMatch(
      /Node node-000 rolled back revision 2 .* uncordoned/,
    );
    expect(back.events.map((e) => e.reason)).not.toContain('NodeRolledBack'); // said once
    expect(back.drains).toEqual(['node-001']);
  });

  it('issue 25: a rollback that cannot be finished (Failed after RollingBack) stays cordoned, with its own Warning', () => {
    const f = rollingBackFleet();
    f.plan();
    f.answer('node-000', 'Failed');
    f.nodes.get('node-000')!.report!.reason = 'RollbackRebootFailed';
    const failed = f.plan();
    expect(failed.uncordons).toEqual([]);
    expect(failed.drains).toEqual([]); // still holds its place
    expect(failed.status?.drains?.map((d) => d.node)).toEqual(['node-000']);
    expect(failed.events.find((e) => e.reason === 'NodeFailed')?.message).toContain(
      'RollbackRebootFailed',
    );
    expect(f.plan().events.map((e) => e.reason)).not.toContain('NodeFailed'); // once
  });

  it('a node that never comes back from its reboot back: after deadline, soak and grace it counts as failed, a NodeRollbackTimedOut Warning says so once; it stays cordoned', () => {
    const f = rollingBackFleet();
    // the same window as the forward reboot's, from the node's grant: deadline + soak + grace
    const tried = f.nodes.get('node-000')?.grant?.try;
    const window =
      ((tried?.deadlineSeconds ?? 0) + (tried?.soakSeconds ?? 0)) * 1000 + NODE_REPORT_GRACE_MS;
    expect(window).toBeGreaterThan(NODE_REPORT_GRACE_MS);
    const seen = f.plan(); // the controller sees it rebooting back now: the deadline runs from here
    expect(seen.status?.drains?.[0]?.rollingBackSince).toBe(
      new Date(f.now).toISOString().replace(/\.\d{3}Z$/, 'Z'),
    );
    expect(seen.requeueAfterMs).toBeLessThanOrEqual(window + 100);
    expect(seen.status?.nodes).toMatchObject({ rolledBack: 1, rollingBack: 1, failed: 1 });
    f.now += window - 1000;
    expect(f.plan().events.map((e) => e.reason)).not.toContain('NodeRollbackTimedOut');
    f.now += 1000;
    const late = f.plan();
    const warned = late.events.find((e) => e.reason === 'NodeRollbackTimedOut');
    expect(warned?.type).toBe('Warning');
    expect(warned?.message).toMatch(
      /Node node-000 rolled back revision 2 and has not come back from its reboot into its previous revision by its deadline; counted as failed/,
    );
    expect(late.status?.nodes).toMatchObject({ rolledBack: 0, rollingBack: 1, failed: 1 });
    expect(late.uncordons).toEqual([]); // an operator must look
    expect(late.grants).toEqual([]);
    expect(late.drains).toEqual([]); // it still holds its place: node-001 is not drained
    expect(late.status?.drains?.[0]?.message).toMatch(
      /did not come back .* cordoned until a person looks/,
    );
    f.now += 60_000;
    expect(f.plan().events.map((e) => e.reason)).not.toContain('NodeRollbackTimedOut'); // once
  });

  it('a node rebooting back from a try a newer grant superseded (its report answers the older grant) stays cordoned, holds its place and is not granted again', () => {
    const f = rollingBackFleet();
    f.answer('node-000', 'Verifying');
    // a new rendering; node-000 is granted it while it still verifies R after its reboot
    const R3: Revision = { ...R, number: 3, checksum: 'c'.repeat(64), rebootDigest: 'r3' };
    f.revisions = [S, R, R3];
    f.rendered = R3;
    const n = f.nodes.get('node-000')!;
    n.grant = {
      ...n.grant!,
      number: 3,
      checksum: R3.checksum,
      grantedTime: new Date(f.now).toISOString(),
    };
    n.generation++;
    // its agent reverts the superseded try and reboots back, reporting under the older grant
    n.report = {
      ...n.report!,
      observedGeneration: n.generation - 1,
      phase: 'RollingBack',
      reason: 'Superseded',
    };
    const p = f.plan();
    expect(p.uncordons).toEqual([]); // the old planner uncordoned it here (a stale drain)
    expect(p.grants.map((g) => g.node)).not.toContain('node-000');
    expect(p.status?.drains?.map((d) => d.node)).toEqual(['node-000']);
    expect(p.status?.nodes.rollingBack).toBe(1);
  });

  it('a resume while a node reboots back: it is left until RolledBack, then retried once (the stable revision, then a later wave); never granted meanwhile', () => {
    const f = rollingBackFleet();
    f.plan();
    f.resumeToken = 'r1';
    const resumed = f.plan();
    expect(resumed.grants).toEqual([]);
    expect(resumed.uncordons).toEqual([]);
    expect(resumed.status?.retryWhenBack).toEqual(['node-000']);
    expect(resumed.status?.nodes).toMatchObject({ rollingBack: 1, pending: 2 });
    expect(f.plan().grants).toEqual([]); // not lost, not granted while it reboots back
    expect(f.memory?.retryWhenBack).toEqual(['node-000']);
    f.answer('node-000', 'RolledBack');
    const back = f.plan();
    expect(back.grants).toEqual([
      { node: 'node-000', grant: expect.objectContaining({ number: 1 }) as unknown },
    ]);
    expect(back.grants[0]?.grant.try).toBeUndefined();
    expect(back.events.find((e) => e.reason === 'NodeRollbackComplete')?.message).toMatch(
      /a resume came meanwhile: it goes back to revision 1 and will be retried/,
    );
    expect(back.status?.retryWhenBack).toBeUndefined();
    expect(back.uncordons).toEqual([]); // still cordoned for its retry
    expect(f.plan().grants.map((g) => g.node)).not.toContain('node-000'); // granted once
    f.answer('node-000', 'Confirmed');
    const retried = f.plan();
    expect(retried.grants.map((g) => [g.node, g.grant.number])).toEqual([['node-000', 2]]);
  });

  it('a resume while a node reboots back whose rollback then fails: retried once, as any failed node', () => {
    const f = rollingBackFleet();
    f.plan();
    f.resumeToken = 'r1';
    f.plan();
    f.answer('node-000', 'Failed');
    const back = f.plan();
    expect(back.grants.map((g) => [g.node, g.grant.number])).toEqual([['node-000', 1]]);
    expect(back.status?.retryWhenBack).toBeUndefined();
  });

  it('a drain past its timeout: Wait names it Blocked and goes on; Skip uncordons and moves on', () => {
    const wait = new Fleet(2, { drain: { timeoutSeconds: 60 } });
    wait.revisions = [S, R];
    wait.settle();
    wait.rendered = R;
    const first = wait.plan();
    expect(first.requeueAfterMs).toBeLessThanOrEqual(60_100);
    wait.memory!.drains![0]!.message = 'the eviction of app/web-1 was refused by app/web';
    wait.now += 61_000;
    const blocked = wait.plan();
    expect(blocked.drains).toEqual(['node-000']);
    expect(blocked.status?.drains?.[0]?.phase).toBe('Blocked');
    expect(blocked.events.map((e) => e.reason)).toContain('DrainBlocked');
    expect(blocked.events.find((e) => e.reason === 'DrainBlocked')?.message).toContain(
      'app/web-1 was refused by app/web',
    );
    expect(wait.plan().events.map((e) => e.reason)).not.toContain('DrainBlocked'); // once

    const skip = new Fleet(2, { drain: { timeoutSeconds: 60, onTimeout: 'Skip' } });
    skip.revisions = [S, R];
    skip.settle();
    skip.rendered = R;
    skip.plan();
    skip.now += 61_000;
    const skipped = skip.plan();
    expect(skipped.uncordons).toEqual(['node-000']);
    expect(skipped.drains).toEqual(['node-001']);
    expect(skipped.events.map((e) => e.reason)).toContain('DrainSkipped');
    expect(skipped.status?.drains?.map((d) => [d.node, d.phase])).toEqual([
      ['node-000', 'Skipped'],
      ['node-001', 'Draining'],
    ]);
    // a resume retries the skipped node
    skip.resumeToken = 'r1';
    const resumed = skip.plan();
    expect(resumed.status?.drains?.map((d) => d.node)).toEqual(['node-001']);
  });
});

describe('planRollout: properties', () => {
  const arbPolicy = fc.record({
    maxUnavailable: fc.oneof(fc.integer({ min: 1, max: 6 }), fc.constantFrom('10%', '25%', '50%')),
    failureThreshold: fc.oneof(fc.integer({ min: 1, max: 4 }), fc.constantFrom('10%', '50%')),
    canary: fc.option(
      fc.record({ nodes: fc.integer({ min: 1, max: 3 }), pauseSeconds: fc.constantFrom(0, 5) }),
      {
        nil: undefined,
      },
    ),
  });

  it('never more nodes in flight to the target than maxUnavailable; a healthy fleet completes; failures pause it', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 30 }),
        arbPolicy,
        fc.array(fc.boolean(), { minLength: 30, maxLength: 30 }),
        fc.integer({ min: 0, max: 2 ** 31 - 1 }),
        (n, policy, badFlags, seed) => {
          const f = new Fleet(n, policy);
          f.settle();
          f.rendered = T;
          const bad = new Set(
            [...f.nodes.keys()].filter((_, i) => badFlags[i] === true && i % 3 === 0),
          );
          let rnd = seed;
          const random = (): number => {
            rnd = (rnd * 1103515245 + 12345) % 2 ** 31;
            return rnd / 2 ** 31;
          };
          const maxU = scaledCount(policy.maxUnavailable, n, 'down');
          const threshold = scaledCount(policy.failureThreshold, n, 'up');
          for (let step = 0; step < 400; step++) {
            const p = f.plan();
            expect(f.inFlight(T).length).toBeLessThanOrEqual(maxU);
            if (p.status?.pauseReason === 'FailureThreshold') {
              expect(p.grants.filter((g) => g.grant.number === 2)).toEqual([]);
            }
            if (p.status?.phase === 'Complete') break;
            if (p.status?.pauseReason === 'FailureThreshold') {
              const failed = p.status.nodes.failed;
              expect(failed).toBeGreaterThanOrEqual(threshold);
              expect(failed).toBeLessThan(threshold + maxU);
              break;
            }
            f.now += 1000;
            for (const node of f.inFlight(T)) {
              if (random() < 0.5) continue;
              const phase =
                node.report?.observedGeneration === node.generation ? node.report.phase : undefined;
              if (phase === undefined) f.answer(node.name, 'Applying');
              else if (phase === 'Applying') f.answer(node.name, 'Verifying');
              else f.answer(node.name, bad.has(node.name) ? 'RolledBack' : 'Confirmed');
            }
          }
          if (bad.size === 0) expect(f.memory?.phase).toBe('Complete');
          if (f.memory?.phase === 'Complete') {
            expect(f.granted(T)).toHaveLength(n);
            expect(f.memory.stableRevision).toBe(2);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('a Reboot-level fleet: cordoned (draining or drained) plus in flight never exceed maxUnavailable; a healthy fleet completes with every node uncordoned', () => {
    const R: Revision = { ...T, rebootDigest: 'r2' };
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 20 }),
        fc.oneof(fc.integer({ min: 1, max: 5 }), fc.constantFrom('25%', '50%')),
        fc.integer({ min: 0, max: 2 ** 31 - 1 }),
        (n, maxUnavailable, seed) => {
          const f = new Fleet(n, { maxUnavailable });
          f.revisions = [S, R];
          f.settle();
          f.rendered = R;
          let rnd = seed;
          const random = (): number => {
            rnd = (rnd * 1103515245 + 12345) % 2 ** 31;
            return rnd / 2 ** 31;
          };
          const maxU = scaledCount(maxUnavailable, n, 'down');
          const cordoned = new Set<string>();
          for (let step = 0; step < 600; step++) {
            const p = f.plan();
            for (const node of p.drains) cordoned.add(node);
            for (const node of p.uncordons) cordoned.delete(node);
            // every grant of the target went to a node drained for it
            for (const g of p.grants) expect(g.grant.disruption).toBe('Reboot');
            const busy = new Set([...cordoned, ...f.inFlight(R).map((x) => x.name)]);
            expect(busy.size).toBeLessThanOrEqual(maxU);
            if (p.status?.phase === 'Complete') break;
            f.now += 1000;
            // the drainer finishes some drains; agents answer some grants
            for (const d of f.memory?.drains ?? []) {
              if (d.phase === 'Draining' && random() < 0.5) d.phase = 'Drained';
            }
            for (const node of f.inFlight(R)) if (random() < 0.5) f.answer(node.name, 'Confirmed');
          }
          expect(f.memory?.phase).toBe('Complete');
          expect(cordoned.size).toBe(0);
          expect(f.granted(R)).toHaveLength(n);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('issue 25: nodes that roll back after their reboot are never uncordoned while they reboot back; cordoned nodes never exceed maxUnavailable', () => {
    const R: Revision = { ...T, rebootDigest: 'r2' };
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 20 }),
        fc.oneof(fc.integer({ min: 1, max: 5 }), fc.constantFrom('25%', '50%')),
        fc.array(fc.boolean(), { minLength: 20, maxLength: 20 }),
        fc.integer({ min: 0, max: 2 ** 31 - 1 }),
        (n, maxUnavailable, badFlags, seed) => {
          // no pause: every node gets its turn, the bad ones roll back and reboot back
          const f = new Fleet(n, { maxUnavailable, failureThreshold: 100 });
          f.revisions = [S, R];
          f.settle();
          f.rendered = R;
          let rnd = seed;
          const random = (): number => {
            rnd = (rnd * 1103515245 + 12345) % 2 ** 31;
            return rnd / 2 ** 31;
          };
          const bad = new Set([...f.nodes.keys()].filter((_, i) => badFlags[i] === true));
          const maxU = scaledCount(maxUnavailable, n, 'down');
          const cordoned = new Set<string>();
          const phase = (name: string): string | undefined => {
            const x = f.nodes.get(name);
            return x?.report?.observedGeneration === x?.generation ? x?.report?.phase : undefined;
          };
          for (let step = 0; step < 800; step++) {
            const p = f.plan();
            for (const node of p.drains) cordoned.add(node);
            for (const node of p.uncordons) {
              expect(phase(node)).not.toBe('RollingBack');
              cordoned.delete(node);
            }
            for (const g of p.grants) expect(phase(g.node)).not.toBe('RollingBack');
            const busy = new Set([...cordoned, ...f.inFlight(R).map((x) => x.name)]);
            expect(busy.size).toBeLessThanOrEqual(maxU);
            const done = [...f.nodes.values()].every((x) =>
              ['Confirmed', 'RolledBack'].includes(phase(x.name) ?? ''),
            );
            if (done && p.uncordons.length === 0 && cordoned.size === 0) break;
            f.now += 1000;
            for (const d of f.memory?.drains ?? []) {
              if (d.phase === 'Draining' && random() < 0.5) d.phase = 'Drained';
            }
            for (const node of f.granted(R)) {
              if (random() < 0.5) continue;
              const now = phase(node.name);
              if (now === 'RollingBack') f.answer(node.name, 'RolledBack');
              else if (now === undefined || now === 'Verifying') {
                f.answer(node.name, bad.has(node.name) ? 'RollingBack' : 'Confirmed');
              }
            }
          }
          // every node answered for good, and each is back in service
          for (const x of f.nodes.values()) {
            expect(phase(x.name)).toBe(bad.has(x.name) ? 'RolledBack' : 'Confirmed');
          }
          expect(cordoned.size).toBe(0);
        },
      ),
      { numRuns: 200 },
    );
  });
});
