import { describe, expect, it } from 'vitest';
import { formatStatusWrites, statusChanges, writerOf } from './status-writes.js';

describe('status writes', () => {
  it('names the status fields a version changed, the rollout part by its own fields', () => {
    const before = {
      checksum: 'a',
      nodes: { total: 1, updated: 0 },
      rollout: { phase: 'Progressing', revision: 1, updatedNodes: 0 },
    };
    const after = {
      checksum: 'a',
      nodes: { total: 1, updated: 1 },
      rollout: { phase: 'Progressing', revision: 1, updatedNodes: 1 },
    };
    expect(statusChanges(before, after)).toEqual(['nodes', 'rollout.updatedNodes']);
    expect(statusChanges(after, after)).toEqual([]);
    expect(statusChanges(undefined, { checksum: 'a' })).toEqual(['checksum']);
    expect(
      statusChanges({ checksum: 'a' }, { checksum: 'a', rollout: { phase: 'Complete' } }),
    ).toEqual(['rollout.phase']);
  });

  it('tells the writer apart by the part it changed', () => {
    expect(writerOf(['rollout.phase'])).toBe('rollout');
    expect(writerOf(['nodes'])).toBe('osc');
    expect(writerOf(['nodes', 'rollout.phase'])).toBe('both');
  });

  it('prints each OSC in order with its writes and the count per writer', () => {
    const lines = formatStatusWrites(
      [
        { osc: 'ns/b', at: 2000, changed: ['rollout.phase'] },
        { osc: 'ns/a', at: 1500, changed: ['checksum', 'conditions'] },
      ],
      1000,
    );
    expect(lines[0]).toBe('    ns/a: 1 status writes');
    expect(lines[1]).toContain('+   0.5 s  osc     checksum, conditions');
    expect(lines.at(-1)).toBe(
      '    by writer: OSC controller 1, rollout controller 1, both in one version 0',
    );
  });
});
