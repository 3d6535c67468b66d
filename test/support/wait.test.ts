import { describe, expect, it } from 'vitest';
import { waitFor } from './wait.js';

describe('waitFor', () => {
  it('returns the first value that is neither undefined nor false, retrying what throws', async () => {
    let n = 0;
    const v = await waitFor(
      'the third poll',
      () => {
        n++;
        if (n === 1) throw new Error('not yet');
        return n === 3 ? 'done' : false;
      },
      { intervalMs: 1 },
    );
    expect(v).toBe('done');
    expect(n).toBe(3);
  });

  it('fails with what it waited for, the last error and what onTimeout adds', async () => {
    await expect(
      waitFor(
        'a thing',
        () => {
          throw new Error('broken');
        },
        { timeoutMs: 20, intervalMs: 5, onTimeout: () => 'journal: …' },
      ),
    ).rejects.toThrow(/waiting for a thing \(last error: broken\)\njournal: …/);
  });
});
