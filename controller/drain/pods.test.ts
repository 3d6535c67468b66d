import { describe, expect, it } from 'vitest';
import { budgetOf, podsToDrain, selectorMatches, whyKept, type PodLike } from './pods.js';

const pod = (
  name: string,
  extra: Partial<PodLike['metadata']> = {},
  phase = 'Running',
): PodLike => ({
  metadata: { name, namespace: 'app', labels: { app: 'web' }, ...extra },
  status: { phase },
});

describe('which pods a drain evicts', () => {
  it('keeps DaemonSet pods, mirror pods and finished pods; waits for terminating ones', () => {
    const pods = [
      pod('web-1'),
      pod('ds-1', { ownerReferences: [{ kind: 'DaemonSet', controller: true }] }),
      pod('rs-1', { ownerReferences: [{ kind: 'ReplicaSet', controller: true }] }),
      pod('static-1', { annotations: { 'kubernetes.io/config.mirror': 'abc' } }),
      pod('job-1', {}, 'Succeeded'),
      pod('going-1', { deletionTimestamp: '2026-12-03T00:00:00Z' }),
    ];
    expect(whyKept(pods[1]!)).toBe('DaemonSet pod');
    expect(whyKept(pods[3]!)).toBe('mirror pod');
    expect(whyKept(pods[4]!)).toBe('finished (Succeeded)');
    const { evict, terminating } = podsToDrain(pods);
    expect(evict.map((p) => p.metadata.name)).toEqual(['web-1', 'rs-1']);
    expect(terminating.map((p) => p.metadata.name)).toEqual(['going-1']);
  });

  it('a DaemonSet that owns without controlling does not keep the pod', () => {
    expect(whyKept(pod('x', { ownerReferences: [{ kind: 'DaemonSet' }] }))).toBeUndefined();
  });
});

describe('which PodDisruptionBudget covers a pod', () => {
  it('matches labels and expressions, in the pod namespace only, first by name', () => {
    const pdbs = [
      {
        metadata: { name: 'z-web', namespace: 'app' },
        spec: { selector: { matchLabels: { app: 'web' } } },
      },
      {
        metadata: { name: 'a-web', namespace: 'app' },
        spec: {
          selector: { matchExpressions: [{ key: 'app', operator: 'In', values: ['web', 'api'] }] },
        },
      },
      { metadata: { name: 'other', namespace: 'elsewhere' }, spec: { selector: {} } },
    ];
    expect(budgetOf(pod('web-1'), pdbs)).toBe('app/a-web');
    expect(budgetOf(pod('db-1', { labels: { app: 'db' } }), pdbs)).toBeUndefined();
  });

  it('implements the selector operators', () => {
    const l = { a: '1' };
    const expr = (key: string, operator: string, values?: string[]) => ({
      matchExpressions: [{ key, operator, ...(values ? { values } : {}) }],
    });
    expect(selectorMatches({}, l)).toBe(true);
    expect(selectorMatches(undefined, l)).toBe(false);
    expect(selectorMatches(expr('a', 'NotIn', ['1']), l)).toBe(false);
    expect(selectorMatches(expr('b', 'DoesNotExist'), l)).toBe(true);
    expect(selectorMatches(expr('a', 'Exists'), l)).toBe(true);
    expect(selectorMatches(expr('a', 'Bogus'), l)).toBe(false);
  });
});
