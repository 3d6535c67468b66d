import { describe, expect, it } from 'vitest';
import { packageDrift } from './package-drift.js';

describe('packageDrift', () => {
  it('missing, removed with its config files left, another version, half-installed: drift', () => {
    expect(packageDrift({ name: 'x', version: '1' }, undefined)).toEqual({
      reason: 'missing',
      expected: 'installed 1',
      found: 'missing',
    });
    expect(packageDrift({ name: 'x' }, { version: '1', state: 'config-files' })).toEqual({
      reason: 'missing',
      expected: 'installed',
      found: 'config-files 1',
    });
    expect(packageDrift({ name: 'x', version: '1' }, { version: '2', state: 'installed' })).toEqual(
      { reason: 'version', expected: 'installed 1', found: 'installed 2' },
    );
    expect(packageDrift({ name: 'x' }, { version: '2', state: 'unpacked' })?.reason).toBe('broken');
  });

  it('as declared: any version when none is declared, epoch 0 the same as none, triggers pending', () => {
    expect(packageDrift({ name: 'x' }, { version: '7', state: 'installed' })).toBeUndefined();
    expect(
      packageDrift({ name: 'x', version: '1.2' }, { version: '0:1.2', state: 'installed' }),
    ).toBeUndefined();
    expect(
      packageDrift({ name: 'x', version: '1:1.2' }, { version: '1.2', state: 'installed' })?.reason,
    ).toBe('version');
    expect(
      packageDrift({ name: 'x' }, { version: '1', state: 'triggers-pending' }),
    ).toBeUndefined();
  });
});
