import { describe, expect, it } from 'vitest';
import { NODE_LIMITS } from '../api/constants.js';
import { InvalidConfigError } from '../api/validate-config.js';
import { bigConfig } from './testing/fixtures.js';
import { checkDesired } from './desired-check.js';

describe('checkDesired', () => {
  it("takes a node's 10,000 files from its Secret, above one OSC's 1,024", () => {
    expect(checkDesired(bigConfig(10_000, 50, '0'), 'Secret ns/s').files).toHaveLength(10_000);
  });

  it('refuses more than NODE_LIMITS.files, naming the field and the limit', () => {
    const c = bigConfig(NODE_LIMITS.files + 1, 0, '0');
    expect(() => checkDesired(c, 'Secret ns/s')).toThrow(InvalidConfigError);
    expect(() => checkDesired(c, 'Secret ns/s')).toThrow(
      /spec\.files: has 16385 items; at most 16384 are allowed/,
    );
  });
});
