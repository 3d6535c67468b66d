import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { deepValidate } from './deep-validate.js';
import { DECODE_LIMITS, DecodeLimitError, gunzipBounded } from './gunzip.js';
import { resolve } from './resolve.js';
import { CorruptPayloadError, decodeConfigData, KEY_CONFIG_GZIP } from './secret.js';
import type { OperatingSystemConfigSpec } from './schema.js';

const MiB = 1024 * 1024;
/** ~40 KiB of gzip that would inflate to 40 MiB (past every limit). */
const bomb = gzipSync(Buffer.alloc(40 * MiB), { level: 1 });

describe('gunzipBounded', () => {
  it('inflates up to the limit exactly (positive control)', () => {
    expect(gunzipBounded(gzipSync(Buffer.alloc(MiB, 7)), MiB)).toEqual(Buffer.alloc(MiB, 7));
  });
  it('stops a bomb at the limit, holding no more than that', () => {
    const before = process.memoryUsage().arrayBuffers;
    expect(() => gunzipBounded(bomb, MiB)).toThrow(DecodeLimitError);
    expect(() => gunzipBounded(bomb, MiB)).toThrow(/decompresses to more than 1.0 MiB/);
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(50 * MiB);
  });
  it('still reports bad gzip as such', () => {
    expect(() => gunzipBounded(Buffer.from('not gzip'), MiB)).toThrow(/header/);
  });
});

function spec(files: { data: Buffer; n?: number }[]): OperatingSystemConfigSpec {
  return {
    type: 'flatcar',
    purpose: 'reconcile',
    files: files.flatMap(({ data, n = 1 }, i) =>
      Array.from({ length: n }, (_, j) => ({
        path: `/etc/f${String(i)}-${String(j)}`,
        content: { inline: { encoding: 'gzip+b64', data: data.toString('base64') } },
      })),
    ),
  };
}

describe('an OSC with gzip+b64 files', () => {
  it('validation refuses a bomb by its field, without inflating it', () => {
    const errors = deepValidate(spec([{ data: bomb }]));
    expect(errors).toContainEqual(
      expect.objectContaining({
        path: 'spec.files[0].content.inline.data',
        message: expect.stringMatching(/more than 1.0 MiB.*Secret/) as unknown,
      }),
    );
  });
  it('resolve refuses a bomb; a file at the limit resolves (positive control)', () => {
    const full = resolve(spec([{ data: gzipSync(Buffer.alloc(MiB)) }]));
    expect(full.ok).toBe(true);
    const refused = resolve(spec([{ data: bomb }]));
    expect(refused).toMatchObject({
      ok: false,
      errors: [{ path: 'spec.files[0].content.inline.data' }],
    });
  });
  it('resolve refuses many files that together inflate past the OSC budget', () => {
    const n = DECODE_LIMITS.inlineTotalBytes / MiB + 1;
    const result = resolve(spec([{ data: gzipSync(Buffer.alloc(MiB)), n }]));
    expect(result.ok).toBe(false);
    expect(JSON.stringify(result)).toMatch(/budget for decompressed files/);
    expect(resolve(spec([{ data: gzipSync(Buffer.alloc(MiB)), n: n - 1 }])).ok).toBe(true);
  });
});

describe('a reconcile or revision Secret', () => {
  it('is refused as corrupt when config.json.gz is a bomb, never inflated whole', () => {
    const bigBomb = bomb;
    expect(() => decodeConfigData({ [KEY_CONFIG_GZIP]: bigBomb }, 'sha256:x')).toThrow(
      CorruptPayloadError,
    );
    expect(() => decodeConfigData({ [KEY_CONFIG_GZIP]: bigBomb }, 'sha256:x')).toThrow(
      /more than 32.0 MiB/,
    );
  });
});
