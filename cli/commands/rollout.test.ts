import { describe, expect, it } from 'vitest';
import { formatRollout } from './rollout.js';

describe('formatRollout', () => {
  it('reads at a glance: revision, phase and why paused, the counts, the kept revisions', () => {
    const text = formatRollout('pools', 'worker', {
      revision: 7,
      checksum: 'a'.repeat(64),
      stableRevision: 6,
      phase: 'Paused',
      pauseReason: 'FailureThreshold',
      message: 'Paused (FailureThreshold) at revision 7: …',
      maxUnavailable: 20,
      failureThreshold: 2,
      nodes: {
        total: 200,
        updated: 40,
        updating: 18,
        failed: 2,
        rolledBack: 2,
        rollingBack: 1,
        pending: 140,
      },
      wave: 3,
      waves: 10,
      revisions: [
        { revision: 7, checksumShort: 'aaaaaaaaaaaa', secretName: 'oscar-worker-rev-1' },
        { revision: 6, checksumShort: 'bbbbbbbbbbbb', secretName: 'oscar-worker-rev-0' },
      ],
    });
    expect(text).toBe(
      [
        'pools/worker: revision 7 (stable 6) — Paused (FailureThreshold)',
        '  nodes: 40/200 updated, 18 updating, 2 failed (2 rolled back, 1 rebooting back), 140 pending',
        '  wave 3 of 10; maxUnavailable 20, failure threshold 2',
        '  Paused (FailureThreshold) at revision 7: …',
        '  revisions kept: 7 (aaaaaaaaaaaa), 6 (bbbbbbbbbbbb)',
        '',
      ].join('\n'),
    );
    expect(formatRollout('pools', 'worker', undefined)).toBe(
      'pools/worker: no rollout yet: no controller has processed this OSC (is one running, and watching namespace pools?)\n',
    );
    // the controller runs (it rendered the OSC), and no node asks for grants
    expect(
      formatRollout('pools', 'worker', undefined, {
        observedGeneration: 1,
        secretRef: { name: 'oscar-worker-reconcile' },
      }),
    ).toBe(
      'pools/worker: no rollout yet: the controller rendered it (Secret oscar-worker-reconcile), and no node follows it in grant mode (oscar agent --osc worker); nodes on --secret take each rendering at once\n',
    );
  });
});
