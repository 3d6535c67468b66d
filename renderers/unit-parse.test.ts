import { describe, expect, it } from 'vitest';
import { inRenderScope, parseUnit } from './unit-parse.js';

const TEXT = '[Service]\nExecStart=/bin/true\n';

describe('parseUnit', () => {
  it('parses each text once inside a render scope', () => {
    inRenderScope(() => {
      const first = parseUnit(TEXT);
      expect(parseUnit(TEXT)).toBe(first);
      // a nested scope is the outer one
      expect(inRenderScope(() => parseUnit(TEXT))).toBe(first);
    });
  });

  it('keeps nothing once the scope has ended', () => {
    const inside = inRenderScope(() => parseUnit(TEXT));
    expect(parseUnit(TEXT)).not.toBe(inside);
    expect(parseUnit(TEXT)).toEqual(inside);
    expect(inRenderScope(() => parseUnit(TEXT))).not.toBe(inside);
  });

  it('ends the scope when the work throws', () => {
    expect(() =>
      inRenderScope(() => {
        parseUnit(TEXT);
        throw new Error('boom');
      }),
    ).toThrow('boom');
    expect(parseUnit(TEXT)).not.toBe(parseUnit(TEXT));
  });
});
