import { describe, expect, it } from 'vitest';
import type { Disruption } from '../../api/disruption.js';
import type { RevisionGrant } from '../../api/schema.js';
import type { DrainResult, NodeDrainer } from '../drain/drainer.js';
import type { OscNodeObject } from '../osc/node-index.js';
import { withDrain } from './in-place-drain.js';
import type { Decision } from './update-machine.js';

const GRANT = {
  generation: 1,
  namespace: 'pools',
  osc: 'v2',
  number: 2,
  secretName: 'oscar-v2-rev-2',
  checksum: 'b'.repeat(64),
  grantedTime: '2026-01-01T00:00:00Z',
} as RevisionGrant;

/** A drainer that answers from a script and records what it was asked. */
function drainer(result: DrainResult) {
  const calls: string[] = [];
  const d: NodeDrainer = {
    drain: (node) => {
      calls.push(`drain ${node}`);
      return Promise.resolve(result);
    },
    uncordon: (node) => {
      calls.push(`uncordon ${node}`);
      return Promise.resolve();
    },
  };
  return { d, calls };
}

function deps(result: DrainResult, level: Disruption, ready: boolean | undefined = true) {
  const { d, calls } = drainer(result);
  return {
    calls,
    deps: {
      drainer: d,
      disruption: () => Promise.resolve(level),
      nodeReady: () => Promise.resolve(ready),
    },
  };
}

const grant: Decision = { kind: 'grant', grant: GRANT, message: 'granted node m-1 v2' };
const REBOOT: Disruption = { level: 'Reboot', reasons: ['file /etc/k (onChange: reboot)'] };
const BLOCKED: DrainResult = {
  drained: false,
  message: 'the eviction of web/a was refused by PodDisruptionBudget web/web',
  pod: 'web/a',
  podDisruptionBudget: 'web/web',
};

function nodeWith(
  level: RevisionGrant['disruption'],
  phase?: string,
  reason?: string,
): OscNodeObject {
  return {
    metadata: { name: 'm-1' },
    spec: { revision: { ...GRANT, ...(level ? { disruption: level } : {}) } },
    ...(phase ? { status: { revision: { phase, ...(reason ? { reason } : {}) } } } : {}),
  } as OscNodeObject;
}

describe('withDrain: in-place updates drained like rollouts', () => {
  it('a Restart-level change is granted as decided, no drain', async () => {
    const s = deps(BLOCKED, { level: 'Restart', reasons: ['units or packages change'] });
    expect(await withDrain(grant, 'm-1', undefined, s.deps)).toBe(grant);
    expect(s.calls).toEqual([]);
  });

  it('a Reboot-level change waits while the drain is blocked, naming the pod and budget', async () => {
    const s = deps(BLOCKED, REBOOT);
    const d = await withDrain(grant, 'm-1', undefined, s.deps);
    expect(d).toMatchObject({ kind: 'progress', retryAfterSeconds: 5 });
    expect(d.kind === 'progress' && d.message).toMatch(
      /draining node m-1 before its in-place update \(Reboot: file \/etc\/k.*PodDisruptionBudget web\/web/,
    );
    expect(s.calls).toEqual(['drain m-1']);
  });

  it('once drained, the grant carries the level (the agent reboots inside its try)', async () => {
    const s = deps({ drained: true, message: 'drained' }, REBOOT);
    const d = await withDrain(grant, 'm-1', undefined, s.deps);
    expect(d.kind === 'grant' && d.grant.disruption).toBe('Reboot');
    expect(d.kind === 'grant' && d.message).toMatch(/drained first/);
  });

  it('done after a drained grant: only once the Node is Ready, and uncordoned', async () => {
    const done: Decision = { kind: 'done', message: 'node m-1 applied v2' };
    const notReady = deps(BLOCKED, REBOOT, false);
    const waiting = await withDrain(done, 'm-1', nodeWith('Reboot'), notReady.deps);
    expect(waiting).toMatchObject({ kind: 'progress' });
    expect(notReady.calls).toEqual([]);
    const ready = deps(BLOCKED, REBOOT, true);
    const d = await withDrain(done, 'm-1', nodeWith('Reboot'), ready.deps);
    expect(d).toMatchObject({ kind: 'done', message: /uncordoned/ });
    expect(ready.calls).toEqual(['uncordon m-1']);
    // a grant that was not drained: done as decided, the Node left alone
    const plain = deps(BLOCKED, REBOOT, false);
    expect(await withDrain(done, 'm-1', nodeWith(undefined), plain.deps)).toBe(done);
    expect(plain.calls).toEqual([]);
  });

  it('a rollback after a drained grant uncordons (the node runs what it ran); other failures do not', async () => {
    const failure: Decision = { kind: 'failure', message: 'rolled back' };
    const back = deps(BLOCKED, REBOOT);
    await withDrain(failure, 'm-1', nodeWith('Drain', 'RolledBack'), back.deps);
    expect(back.calls).toEqual(['uncordon m-1']);
    const refused = deps(BLOCKED, REBOOT);
    await withDrain(failure, 'm-1', nodeWith('Drain', 'Verifying'), refused.deps);
    expect(refused.calls).toEqual([]);
  });

  it('issue 25: a rollback rebooting back, or one whose old state was never proven, stays cordoned', async () => {
    const failure: Decision = { kind: 'failure', message: 'failed' };
    for (const reason of ['RollbackRebootFailed', 'RollbackUnhealthy']) {
      const unproven = deps(BLOCKED, REBOOT);
      await withDrain(failure, 'm-1', nodeWith('Reboot', 'Failed', reason), unproven.deps);
      expect(unproven.calls).toEqual([]);
    }
    const rolling = deps(BLOCKED, REBOOT);
    await withDrain(failure, 'm-1', nodeWith('Reboot', 'RollingBack'), rolling.deps);
    expect(rolling.calls).toEqual([]);
    const failedApply = deps(BLOCKED, REBOOT);
    await withDrain(failure, 'm-1', nodeWith('Reboot', 'Failed', 'ApplyFailed'), failedApply.deps);
    expect(failedApply.calls).toEqual(['uncordon m-1']);
  });
});
