import { describe, expect, it } from 'vitest';
import { parsePositiveInteger } from './numbers.js';

describe('parsePositiveInteger', () => {
  it('takes whole numbers of at least 1', () => {
    expect(parsePositiveInteger('1', '--concurrency', 'requests')).toBe(1);
    expect(parsePositiveInteger(' 8 ', '--concurrency', 'requests')).toBe(8);
  });

  it('refuses anything else, naming the flag, the value and the fix', () => {
    for (const bad of [
      '0',
      '-1',
      '1.5',
      '2x',
      '',
      ' ',
      '0x10',
      '1e3',
      'NaN',
      'Infinity',
      '99999999999999999999',
    ]) {
      expect(() => parsePositiveInteger(bad, '--concurrency', 'requests at once'), bad).toThrow(
        `--concurrency: "${bad}" is not a positive integer; give the number of requests at once, such as 2`,
      );
    }
  });
});
