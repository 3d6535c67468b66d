import { describe, expect, it } from 'vitest';
import { canonicalWithChecksum } from './canonical.js';
import {
  decodeConfigData,
  encodeConfigData,
  GZIP_THRESHOLD_BYTES,
  KEY_CONFIG,
  KEY_CONFIG_GZIP,
  secretNameFor,
} from './secret.js';
import type { ResolvedConfig } from './resolved.js';

const config = (size: number): ResolvedConfig => ({
  type: 'ubuntu',
  purpose: 'reconcile',
  units: [],
  files: [{ path: '/f', mode: 0o644, user: 'root', group: 'root', content: Buffer.alloc(size, 7) }],
  packages: [],
});

describe('the reconcile Secret payload', () => {
  it('stays plain when small and is gzipped when large', () => {
    expect(Object.keys(encodeConfigData(canonicalWithChecksum(config(10)).bytes))).toEqual([
      KEY_CONFIG,
    ]);
    expect(
      Object.keys(encodeConfigData(canonicalWithChecksum(config(GZIP_THRESHOLD_BYTES)).bytes)),
    ).toEqual([KEY_CONFIG_GZIP]);
  });

  it('round-trips and verifies the checksum', () => {
    for (const size of [10, GZIP_THRESHOLD_BYTES * 2]) {
      const { bytes, checksum } = canonicalWithChecksum(config(size));
      const decoded = decodeConfigData(encodeConfigData(bytes), checksum);
      expect(decoded.checksum).toBe(checksum);
      expect(decoded.config.files[0]?.content.length).toBe(size);
    }
  });

  it('refuses a bad checksum, truncated gzip, both keys or none', () => {
    const big = canonicalWithChecksum(config(GZIP_THRESHOLD_BYTES * 2));
    const data = encodeConfigData(big.bytes);
    expect(() => decodeConfigData(data, 'f'.repeat(64))).toThrow(/checksum mismatch/);
    const zipped = data[KEY_CONFIG_GZIP]!;
    expect(() =>
      decodeConfigData({ [KEY_CONFIG_GZIP]: zipped.subarray(0, zipped.length - 10) }, big.checksum),
    ).toThrow(/not valid gzip/);
    expect(() => decodeConfigData({}, big.checksum)).toThrow(/exactly one/);
    expect(() => decodeConfigData(data, undefined)).toThrow(/annotation/);
  });

  it('derives a valid Secret name, shortened with a hash when too long', () => {
    expect(secretNameFor('worker', 'provision')).toBe('oscar-worker-provision');
    const long = secretNameFor('x'.repeat(253), 'reconcile');
    expect(long.length).toBe(253);
    expect(long).not.toBe(secretNameFor('x'.repeat(252), 'reconcile'));
  });
});
