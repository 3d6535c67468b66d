import { describe, expect, it } from 'vitest';
import { subjectFor } from './certs.js';

describe('subjectFor', () => {
  it('maps groups to O and the user to CN, groups first', () => {
    expect(subjectFor({ user: 'system:node:node-1', groups: ['system:nodes', 'b'] })).toBe(
      '/O=system:nodes/O=b/CN=system:node:node-1',
    );
    expect(subjectFor({ user: 'alice' })).toBe('/CN=alice');
  });

  it('names the offending field when a name would break the subject syntax', () => {
    expect(() => subjectFor({ user: 'a/b' })).toThrow(/identity\.user "a\/b" contains/);
    expect(() => subjectFor({ user: 'ok', groups: ['fine', 'x=y'] })).toThrow(
      /identity\.groups\[1\] "x=y" contains/,
    );
    expect(() => subjectFor({ user: '' })).toThrow(/identity\.user is empty/);
  });
});
