import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { canonicalWithChecksum, sha256Hex } from './canonical.js';
import {
  CorruptPayloadError,
  decodeConfigData,
  decodeSecretData,
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

/**
 * Red-team pass 3, the node's side: a reconcile Secret tampered with by someone who can also
 * write its checksum annotation (the checksum guards against damage, not against a writer). The
 * agent must apply exactly the bytes the controller would have written, or nothing.
 */
describe('a tampered reconcile payload', () => {
  const base: ResolvedConfig = {
    type: 'ubuntu',
    purpose: 'reconcile',
    units: [],
    files: [
      {
        path: '/etc/app.conf',
        mode: 0o644,
        user: 'root',
        group: 'root',
        content: Buffer.from('hello'),
      },
      // content whose base64 uses "+" and "/" (0xfb 0xff → "+/8=")
      {
        path: '/etc/bin',
        mode: 0o644,
        user: 'root',
        group: 'root',
        content: Buffer.from([251, 255]),
      },
    ],
    packages: [],
  };
  const canonical = canonicalWithChecksum(base).bytes.toString('latin1');
  /** The payload as a writer would put it: `text` and its own checksum. */
  const tampered = (text: string) => {
    const bytes = Buffer.from(text, 'latin1');
    return () => decodeConfigData({ [KEY_CONFIG]: bytes }, sha256Hex(bytes));
  };
  const swap = (from: string, to: string) => {
    expect(canonical).toContain(from);
    return canonical.replace(from, to);
  };

  it('the canonical bytes pass, plain and gzipped (positive control)', () => {
    expect(tampered(canonical)().config.files[0]?.content.toString()).toBe('hello');
    const bytes = Buffer.from(canonical, 'latin1');
    const zipped = gzipSync(bytes);
    expect(decodeConfigData({ [KEY_CONFIG_GZIP]: zipped }, sha256Hex(bytes)).checksum).toBe(
      sha256Hex(bytes),
    );
  });

  it.each([
    // each decodes (Node's base64 decoder, JSON.parse) to the same config under another checksum
    ['whitespace between tokens', () => swap('{"content"', '{ "content"')],
    ['a trailing newline', () => `${canonical}\n`],
    ['keys in another order', () => swap('"group":"root","mode":420', '"mode":420,"group":"root"')],
    ['a number spelled 4.2e2', () => swap('"mode":420', '"mode":4.2e2')],
    ['a number spelled 420.0', () => swap('"mode":420', '"mode":420.0')],
    ['a string with an escape', () => swap('"/etc/app.conf"', '"\\u002fetc/app.conf"')],
    ['base64 with a line break', () => swap('"aGVsbG8="', '"aGVs\\nbG8="')],
    ['base64 with a space', () => swap('"aGVsbG8="', '"aGVs bG8="')],
    ['base64 without padding', () => swap('"aGVsbG8="', '"aGVsbG8"')],
    ['base64 with non-zero padding bits', () => swap('"aGVsbG8="', '"aGVsbG9="')],
    ['base64 in the URL alphabet', () => swap('"+/8="', '"-_8="')],
    ['base64 with data after "="', () => swap('"aGVsbG8="', '"aGVsbG8=QQ=="')],
    ['base64 with an invalid character', () => swap('"aGVsbG8="', '"aGVs*bG8="')],
    ['an unknown key', () => swap('"kind"', '"extra":1,"kind"')],
    ['a __proto__ key', () => swap('"kind"', '"__proto__":{"polluted":true},"kind"')],
    ['a constructor key in a file', () => swap('{"content"', '{"constructor":{},"content"')],
    ['a byte that is not UTF-8 in a path', () => swap('/etc/app.conf', '/etc/app\xff.conf')],
    ['a number where a string goes', () => swap('"user":"root"', '"user":0')],
    ['a string where a number goes', () => swap('"mode":420', '"mode":"420"')],
    ['a boolean where a list goes', () => swap('"packages":[]', '"packages":true')],
  ])('%s is refused, the last good state kept', (_, text) => {
    expect(tampered(text())).toThrow(CorruptPayloadError);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('says where the bytes leave the canonical form, and what to do', () => {
    expect(tampered(swap('"mode":420', '"mode":420.0'))).toThrow(
      /not in canonical form \(it differs at byte \d+: .*re-render it/,
    );
  });

  it('a JSON syntax error never quotes the payload (it reaches logs and the node report)', () => {
    const secret = 'c2VjcmV0LXRva2Vu';
    for (const text of [
      `{"kind":t${secret}}`,
      `{"kind":"x"}${secret}`,
      secret,
      `{"a":"${secret}`,
      `{"a":"${secret}\u0001"}`,
    ]) {
      let message = '';
      try {
        tampered(text)();
      } catch (error) {
        message = (error as Error).message;
      }
      expect(message).toMatch(/does not parse/);
      expect(message).not.toMatch(/c2Vj|cmV0|LXRv/);
    }
  });

  it('JSON nested a million deep is refused as not a config, not a crash', () => {
    const deep = `${'['.repeat(1_000_000)}${']'.repeat(1_000_000)}`;
    expect(tampered(deep)).toThrow(/config must be an object/);
    const deepObject = `{"kind":${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}}`;
    expect(tampered(deepObject)).toThrow(CorruptPayloadError);
  });
});

describe("decodeSecretData: the Secret's data as the API server writes it", () => {
  const canonical = Buffer.from('{"a":"hello"}\n').toString('base64'); // 14 bytes: one "="

  it('decodes canonical base64 of the config keys; other keys are not read (positive control)', () => {
    const out = decodeSecretData({ [KEY_CONFIG]: canonical, value: '%%not base64%%' });
    expect(out[KEY_CONFIG]?.toString()).toBe('{"a":"hello"}\n');
    expect(Object.keys(out)).toEqual([KEY_CONFIG]);
  });

  it.each([
    ['a line break', `${canonical.slice(0, 8)}\n${canonical.slice(8)}`],
    ['a space', ` ${canonical}`],
    ['no padding', canonical.replace(/=+$/, '')],
    ['the URL alphabet', Buffer.from([251, 255]).toString('base64url')],
    ['non-zero padding bits', 'QR=='],
    ['data after "="', `${canonical}QQ==`],
    ['an invalid character', `*${canonical}`],
  ])('refuses base64 with %s, naming the key', (_, text) => {
    expect(() => decodeSecretData({ [KEY_CONFIG_GZIP]: text })).toThrow(
      /data\.config\.json\.gz is not canonical base64/,
    );
  });

  it('a __proto__ key is only a key: the result has no prototype to replace', () => {
    const data = JSON.parse(`{"__proto__":"eA==","${KEY_CONFIG}":"${canonical}"}`) as Record<
      string,
      string
    >;
    const out = decodeSecretData(data);
    expect(Object.getPrototypeOf(out)).toBeNull();
    expect(Object.keys(out)).toEqual([KEY_CONFIG]);
  });
});
