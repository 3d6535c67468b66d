import { describe, expect, it } from 'vitest';
import { MAX_MESSAGE, setConditions } from './conditions.js';

const t1 = new Date('2026-01-01T00:00:00.123Z');
const t2 = new Date('2026-01-01T01:00:00Z');

describe('setConditions', () => {
  it('moves lastTransitionTime only when the status changes', () => {
    const first = setConditions(
      undefined,
      [{ type: 'Ready', status: 'True', reason: 'Rendered', message: 'a' }],
      1,
      t1,
    );
    expect(first[0]?.lastTransitionTime).toBe('2026-01-01T00:00:00Z');
    const same = setConditions(
      first,
      [{ type: 'Ready', status: 'True', reason: 'Rendered', message: 'b' }],
      2,
      t2,
    );
    expect(same[0]).toMatchObject({
      lastTransitionTime: '2026-01-01T00:00:00Z',
      message: 'b',
      observedGeneration: 2,
    });
    const flipped = setConditions(
      same,
      [{ type: 'Ready', status: 'False', reason: 'TooLarge', message: 'c' }],
      3,
      t2,
    );
    expect(flipped[0]?.lastTransitionTime).toBe('2026-01-01T01:00:00Z');
  });

  it('keeps other conditions, sorts by type, and cuts long messages', () => {
    const out = setConditions(
      [
        {
          type: 'Valid',
          status: 'True',
          reason: 'Valid',
          message: 'ok',
          lastTransitionTime: '2025-01-01T00:00:00Z',
        },
      ],
      [
        {
          type: 'Ready',
          status: 'False',
          reason: 'ValidationFailed',
          message: 'x'.repeat(MAX_MESSAGE + 10),
        },
      ],
      1,
      t1,
    );
    expect(out.map((c) => c.type)).toEqual(['Ready', 'Valid']);
    expect(out[0]?.message.length).toBe(MAX_MESSAGE);
    expect(out[0]?.message).toContain('truncated');
  });
});
