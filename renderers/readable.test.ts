// The string-side readability check (unit files) must give the verdict of the byte-side one
// (everything else): the renderers choose an encoding by it, and the golden files and the round
// trip only see the one they chose.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { inlineText, isReadableString, isReadableText } from './common.js';

/** Characters near every edge isReadableText looks at. */
const EDGY = [
  '\t',
  '\n',
  '\r',
  ' ',
  '\x00',
  '\x08',
  '\x0b',
  '\x1f',
  '\x7f',
  '\x80',
  '\x85',
  '\x9f',
  '\xa0',
  'é',
  '\u2028',
  '\u2029',
  '\ufeff',
  '\ufffd',
  '\ufffe',
  '\uffff',
  '\ud83d\ude00',
  '\ud800',
  '\udc00',
  'a',
  'Z',
  '=',
  '#',
];
const text = fc
  .array(fc.oneof(fc.constantFrom(...EDGY), fc.string({ unit: 'binary' })), { maxLength: 12 })
  .map((parts) => parts.join(''));

describe('isReadableString', () => {
  it('agrees with isReadableText on the UTF-8 of any well-formed string', () => {
    fc.assert(
      fc.property(text, (s) => {
        const verdict = isReadableString(s);
        if (verdict === undefined) expect(Buffer.from(s, 'utf8').toString('utf8')).not.toBe(s);
        else expect(verdict).toBe(isReadableText(Buffer.from(s, 'utf8')));
      }),
      { numRuns: 20000 },
    );
  });

  it('leaves strings with a lone surrogate to the bytes', () => {
    expect(isReadableString('a\ud800b')).toBeUndefined();
    const file = { path: '/x', mode: 0o644, user: 'root', group: 'root' };
    // the bytes hold U+FFFD where the string has the surrogate: that is what gets written
    expect(inlineText({ ...file, content: Buffer.from('a\ud800b'), text: 'a\ud800b' })).toBe(
      'a\ufffdb',
    );
    expect(inlineText({ ...file, content: Buffer.from('a \n'), text: 'a \n' })).toBeUndefined();
    expect(inlineText({ ...file, content: Buffer.from('[Unit]\n'), text: '[Unit]\n' })).toBe(
      '[Unit]\n',
    );
  });
});
