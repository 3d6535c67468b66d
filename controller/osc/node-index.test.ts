import { describe, expect, it } from 'vitest';
import {
  countNodes,
  nodeOfConfig,
  NodeIndex,
  slimNode,
  summarize,
  type NodeSummary,
  type OscNodeObject,
} from './node-index.js';

const T = '2026-01-01T00:00:00Z';

function node(
  name: string,
  osc: string | undefined,
  applied?: string,
  degraded?: 'True' | 'False',
): OscNodeObject {
  return {
    metadata: { name, resourceVersion: '1' },
    status: {
      ...(osc
        ? { oscRef: { namespace: 'ns', name: osc, secretName: `oscar-${osc}-reconcile` } }
        : {}),
      ...(applied ? { appliedChecksum: applied } : {}),
      ...(degraded
        ? {
            conditions: [
              {
                type: 'Applied',
                status: 'True',
                reason: 'Applied',
                message: '',
                lastTransitionTime: T,
              },
              {
                type: 'Degraded',
                status: degraded,
                reason: 'X',
                message: '',
                lastTransitionTime: T,
              },
            ],
          }
        : {}),
    },
  };
}

describe('summarize', () => {
  it('keeps the config followed, the applied checksum and Degraded=True', () => {
    expect(summarize(node('n', 'web', 'c1', 'True'))).toEqual({
      osc: 'ns/web',
      applied: 'c1',
      degraded: true,
    });
    expect(summarize(node('n', 'web', undefined, 'False'))).toEqual({
      osc: 'ns/web',
      degraded: false,
    });
  });

  it('a node whose agent reports Drifted=True counts as drifted', () => {
    const n = node('n', 'web', 'c1', 'False');
    const drifted = (status: 'True' | 'False') => ({
      type: 'Drifted',
      status,
      reason: 'X',
      message: '',
      lastTransitionTime: T,
    });
    n.status?.conditions?.push(drifted('True'));
    expect(summarize(n)).toEqual({ osc: 'ns/web', applied: 'c1', degraded: false, drifted: true });
    n.status!.conditions = [drifted('False')];
    expect(summarize(n)).toEqual({ osc: 'ns/web', applied: 'c1', degraded: false });
  });

  it('a node that has not named its config (no oscRef, or an empty name) counts nowhere', () => {
    expect(summarize(node('n', undefined, 'c1'))).toBeUndefined();
    expect(summarize({ metadata: { name: 'n' } })).toBeUndefined();
    const unnamed = node('n', 'web');
    if (unnamed.status?.oscRef) unnamed.status.oscRef.name = '';
    expect(summarize(unnamed)).toBeUndefined();
  });
});

describe('nodeOfConfig: whose machine a node object is', () => {
  const labelled = (uid: string) => ({ metadata: { labels: { 'oscar.dev/config-uid': uid } } });
  it("an object labelled for another config UID is an earlier machine's, not this config's", () => {
    expect(nodeOfConfig(labelled('u-old'), 'u-new')).toBe(false);
    expect(nodeOfConfig(labelled('u-new'), 'u-new')).toBe(true);
  });
  it('an unlabelled object, or a config without a UID, counts as before', () => {
    expect(nodeOfConfig({ metadata: {} }, 'u-new')).toBe(true);
    expect(nodeOfConfig(labelled('u-old'), undefined)).toBe(true);
  });
  it('slimNode keeps that label and no other', () => {
    const n = node('n', 'web', 'c1', 'True');
    n.metadata.labels = { 'oscar.dev/config-uid': 'u1', other: 'x' };
    slimNode(n);
    expect(n.metadata.labels).toEqual({ 'oscar.dev/config-uid': 'u1' });
  });
});

describe('slimNode', () => {
  it('drops what counting never reads, and counting gives the same answer', () => {
    const n = node('n', 'web', 'c1', 'True') as OscNodeObject & Record<string, unknown>;
    n.status?.conditions?.push({
      type: 'Drifted',
      status: 'True',
      reason: 'DriftDetected',
      message: '/etc/a (content)',
      lastTransitionTime: T,
    });
    n.metadata.labels = { a: 'b' };
    n.metadata.uid = 'u';
    if (n.status) {
      n.status.lastError = { message: 'x', journal: ['line'.repeat(100)], time: T };
      n.status.restartedUnits = [{ name: 'a.service', action: 'restart', time: T }];
      n.status.desiredChecksum = 'c2';
    }
    const before = summarize(n);
    slimNode(n);
    expect(n).toEqual({
      metadata: { name: 'n', uid: 'u', resourceVersion: '1' },
      status: {
        oscRef: { namespace: 'ns', name: 'web', secretName: 'oscar-web-reconcile' },
        appliedChecksum: 'c1',
        conditions: [
          { type: 'Degraded', status: 'True', reason: 'X', message: '', lastTransitionTime: T },
          {
            type: 'Drifted',
            status: 'True',
            reason: 'DriftDetected',
            message: '/etc/a (content)',
            lastTransitionTime: T,
          },
        ],
      },
    });
    expect(summarize(n)).toEqual(before);
    expect(before?.drifted).toBe(true);
  });

  it('leaves a bookmark (metadata only) alone', () => {
    const bookmark = { metadata: { resourceVersion: '9' } };
    slimNode(bookmark);
    expect(bookmark.metadata.resourceVersion).toBe('9');
  });
});

describe('countNodes', () => {
  const nodes: NodeSummary[] = [
    { osc: 'ns/a', applied: 'c1', degraded: false },
    { osc: 'ns/a', applied: 'c1', degraded: true },
    { osc: 'ns/a', applied: 'c0', degraded: false },
    { osc: 'ns/a', degraded: true, drifted: true },
    { osc: 'ns/a', applied: 'c1', degraded: false, drifted: true },
    { osc: 'ns/a', applied: 'c1', degraded: false, drifted: false },
  ];
  it('total, updated to the checksum, degraded, drifted', () => {
    expect(countNodes(nodes, 'c1')).toEqual({ total: 6, updated: 4, degraded: 2, drifted: 2 });
    expect(countNodes([], 'c1')).toEqual({ total: 0, updated: 0, degraded: 0, drifted: 0 });
  });
  it('no checksum yet: nobody is updated, not even a node that applied nothing', () => {
    expect(countNodes(nodes, undefined)).toEqual({
      total: 6,
      updated: 0,
      degraded: 2,
      drifted: 2,
    });
  });
});

describe('NodeIndex', () => {
  it('tells which configs a change touches, and only when a summary changed', () => {
    const idx = new NodeIndex();
    expect(idx.set('n1', summarize(node('n1', 'a', 'c1', 'False')))).toEqual(['ns/a']);
    expect(idx.set('n2', summarize(node('n2', 'a', 'c0', 'False')))).toEqual(['ns/a']);
    // Same summary (a report whose timestamps moved): nothing to do.
    expect(idx.set('n1', summarize(node('n1', 'a', 'c1', 'False')))).toEqual([]);
    expect(idx.of('ns/a').map((s) => s.applied)).toEqual(['c1', 'c0']);
    // The node moves to another config: both are touched.
    expect(idx.set('n2', summarize(node('n2', 'b', 'c0', 'False')))).toEqual(['ns/a', 'ns/b']);
    expect(idx.of('ns/a')).toHaveLength(1);
    expect(idx.of('ns/b')).toHaveLength(1);
    // Degraded flips: touched.
    expect(idx.set('n1', summarize(node('n1', 'a', 'c1', 'True')))).toEqual(['ns/a']);
    // Drifted flips: touched; and back.
    expect(idx.set('n1', { osc: 'ns/a', applied: 'c1', degraded: true, drifted: true })).toEqual([
      'ns/a',
    ]);
    expect(idx.set('n1', summarize(node('n1', 'a', 'c1', 'True')))).toEqual(['ns/a']);
    expect(idx.remove('n1')).toEqual(['ns/a']);
    expect(idx.of('ns/a')).toEqual([]);
    expect(idx.remove('n1')).toEqual([]);
    // It stops naming a config: the old one is touched.
    expect(idx.set('n2', undefined)).toEqual(['ns/b']);
    expect(idx.of('ns/b')).toEqual([]);
  });
});
