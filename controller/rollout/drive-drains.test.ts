import { describe, expect, it } from 'vitest';
import type { RolloutStatus } from '../../api/schema.js';
import type { NodeDrainer } from '../drain/drainer.js';
import { driveDrains } from './reconcile.js';

/** A drainer that records what it was asked, in order. */
function recorder(): { calls: string[]; drainer: NodeDrainer } {
  const calls: string[] = [];
  return {
    calls,
    drainer: {
      drain: (node) => {
        calls.push(`drain ${node}`);
        return Promise.resolve({ drained: true, message: 'drained' });
      },
      uncordon: (node) => {
        calls.push(`uncordon ${node}`);
        return Promise.resolve();
      },
    },
  };
}

describe('driveDrains', () => {
  it('uncordons the node that confirmed before it cordons the next one', async () => {
    const { calls, drainer } = recorder();
    const status = {
      drains: [
        {
          node: 'b',
          revision: 2,
          phase: 'Draining',
          startTime: '2026-12-04T12:00:00Z',
          message: '',
        },
      ],
    } as unknown as RolloutStatus;
    await driveDrains({ drains: ['b'], uncordons: ['a'], status }, { drainer });
    expect(calls).toEqual(['uncordon a', 'drain b']);
    expect(status.drains?.[0]?.phase).toBe('Drained');
  });
});
