import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { percentEncode } from './ignition.js';

describe('percentEncode', () => {
  it('gives the bytes of encodeURIComponent for any well-formed text', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (s) => {
        const utf8 = Buffer.from(s, 'utf8');
        const expected = encodeURIComponent(utf8.toString('utf8'));
        expect(percentEncode(utf8).toString('latin1')).toBe(expected);
      }),
      { numRuns: 5000 },
    );
  });

  it('keeps the unreserved characters and escapes everything else in upper case', () => {
    const all = Buffer.from(Array.from({ length: 128 }, (_, i) => i));
    expect(percentEncode(all).toString('latin1')).toBe(encodeURIComponent(all.toString('latin1')));
    expect(percentEncode(Buffer.from('a b/é\n')).toString('latin1')).toBe('a%20b%2F%C3%A9%0A');
  });
});
