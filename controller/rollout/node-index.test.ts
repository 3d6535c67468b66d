import { describe, expect, it } from 'vitest';
import type { OscNodeObject } from '../osc/node-index.js';
import { GrantNodeIndex, nodeStateOf } from './node-index.js';

function node(grantOsc?: string): OscNodeObject {
  return {
    apiVersion: 'oscar.dev/v1alpha1',
    kind: 'OperatingSystemConfigNode',
    metadata: { name: 'm-1', generation: 2 },
    status: { source: 'Grant', oscRef: { namespace: 'pools', name: 'v1' } },
    ...(grantOsc
      ? {
          spec: {
            revision: {
              namespace: 'pools',
              osc: grantOsc,
              number: 1,
              secretName: `oscar-${grantOsc}-reconcile`,
              checksum: 'a'.repeat(64),
              grantedTime: '2026-12-03T14:00:00.000Z',
            },
          },
        }
      : {}),
  };
}

describe('GrantNodeIndex', () => {
  it("a node belongs to its grant's OSC before it reports the move (Cluster API's in-place update)", () => {
    expect(nodeStateOf(node())?.osc).toBe('pools/v1');
    expect(nodeStateOf(node('v1'))?.osc).toBe('pools/v1');
    expect(nodeStateOf(node('v2'))?.osc).toBe('pools/v2');
    const index = new GrantNodeIndex();
    index.set(node('v1'));
    expect(index.set(node('v2')).sort()).toEqual(['pools/v1', 'pools/v2']);
    expect(index.of('pools/v1')).toEqual([]);
    expect(index.of('pools/v2').map((n) => n.name)).toEqual(['m-1']);
  });
});
