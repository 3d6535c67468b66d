import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { resolvePolicy, scaledCount, validateRolloutPolicy } from './rollout.js';

describe('scaledCount', () => {
  it.each([
    [1, 20, 'down', 1],
    [5, 3, 'down', 3], // never above the node count
    ['25%', 20, 'down', 5],
    ['25%', 21, 'down', 5],
    ['25%', 21, 'up', 6],
    ['10%', 2000, 'down', 200],
    ['1%', 20, 'down', 1], // at least 1
    ['100%', 7, 'down', 7],
    ['50%', 0, 'down', 1], // no nodes: still a usable budget
  ] as const)('%s of %d rounded %s is %d', (value, total, round, want) => {
    expect(scaledCount(value, total, round)).toBe(want);
  });

  it('refuses what is neither a count nor a percentage', () => {
    expect(() => scaledCount('ten', 10, 'down')).toThrow(/not a count or a percentage/);
  });

  it('stays within [min, max(total, min)] for every percentage and node count', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 100 }), fc.integer({ min: 0, max: 5000 }), (p, n) => {
        const v = scaledCount(`${String(p)}%`, n, 'down');
        expect(v).toBeGreaterThanOrEqual(1);
        expect(v).toBeLessThanOrEqual(Math.max(n, 1));
      }),
    );
  });
});

describe('resolvePolicy', () => {
  it('applies the documented defaults', () => {
    expect(resolvePolicy(undefined)).toEqual({
      maxUnavailable: 1,
      soakSeconds: 60,
      progressDeadlineSeconds: 600,
      failureThreshold: 1,
      paused: false,
      nonDisruptive: 'Gate',
      healthChecks: [],
      drain: { timeoutSeconds: 600, onTimeout: 'Wait' },
    });
  });

  it('gives a canary of one node unless told otherwise, and keeps its pause', () => {
    expect(resolvePolicy({ canary: {} }).canary).toEqual({ nodes: 1 });
    expect(resolvePolicy({ canary: { nodes: '5%', pauseSeconds: 0 } }).canary).toEqual({
      nodes: '5%',
      pauseSeconds: 0,
    });
  });
});

describe('validateRolloutPolicy', () => {
  const check = (rollout: unknown, purpose = 'reconcile') =>
    validateRolloutPolicy({ purpose, rollout }).map((e) => `${e.path}: ${e.message}`);

  it('accepts a complete policy', () => {
    expect(
      check({
        maxUnavailable: '25%',
        canary: { nodes: 2, pauseSeconds: 60 },
        soakSeconds: 30,
        progressDeadlineSeconds: 300,
        failureThreshold: '10%',
        healthChecks: [
          { name: 'kubelet', httpGet: { port: 10248, path: '/healthz' } },
          { name: 'x', exec: { command: ['/bin/true'] } },
        ],
        rollback: { fromRevision: 3, toRevision: 2 },
      }),
    ).toEqual([]);
  });

  it('refuses each thing the schema cannot express, naming the field', () => {
    expect(check({ maxUnavailable: true })).toEqual([
      'spec.rollout.maxUnavailable: must be a count of nodes or a percentage such as "25%"',
    ]);
    expect(check({ failureThreshold: 0 })[0]).toMatch(/^spec.rollout.failureThreshold: 0 would/);
    expect(check({ canary: { nodes: '0%x' } })[0]).toMatch(/^spec.rollout.canary.nodes: must be/);
    expect(check({ soakSeconds: 700 })[0]).toMatch(/below progressDeadlineSeconds \(600\)/);
    expect(
      check({
        healthChecks: [
          { name: 'a', exec: { command: ['/bin/true'] } },
          { name: 'a', exec: { command: ['/bin/true'] } },
        ],
      }),
    ).toEqual([
      'spec.rollout.healthChecks[1].name: "a" is used twice; give every check its own name',
    ]);
    expect(check({ rollback: { fromRevision: 2, toRevision: 2 } })[0]).toMatch(
      /toRevision: is the revision being undone/,
    );
    expect(check({}, 'provision')[0]).toMatch(/^spec.rollout: applies to purpose reconcile only/);
  });
});
