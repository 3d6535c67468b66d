// The YAML writer and the strict subset reader: exact for every string, and agreeing with a
// general YAML 1.1 library (cloud-init's dialect) on whole rendered documents.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { comparable, decodeCloudConfig, yamlLibraryReader } from './decode.js';
import { defaultRegistry, renderOsc } from './registry.js';
import { configArb } from './testdata/arbitraries.js';
import { readDoubleQuoted, readYamlSubset } from './yaml-reader.js';
import { doubleQuoted, isPlainSafe, literalBlock, scalar } from './yaml-writer.js';

const anyString = fc.oneof(
  fc.string({ unit: 'binary' }),
  fc.string({ unit: 'grapheme' }),
  fc.constantFrom(
    '0644',
    '1:20',
    'yes',
    'No',
    'on',
    '~',
    'null',
    'e5',
    '1e3',
    '.inf',
    '-',
    '--x',
    '@a',
    'a: b',
    'a #b',
    "'",
    '"',
    '\\',
    '\u2028',
    '\x85',
    '\ufeff',
    '',
  ),
);

describe('scalar', () => {
  it('reads back exactly, in the yaml library (YAML 1.1 and 1.2) and the subset reader', () => {
    fc.assert(
      fc.property(anyString, (s) => {
        // lone surrogates cannot be written as UTF-8; the renderer never sees them in text
        if (Buffer.from(s, 'utf8').toString('utf8') !== s) return;
        const text = `k: ${scalar(s)}\n`;
        expect(parse(text, { version: '1.1' })).toEqual({ k: s });
        expect(parse(text)).toEqual({ k: s });
        expect(readYamlSubset(text)).toEqual({ k: s });
      }),
      { numRuns: 2000 },
    );
  });

  it('quotes what YAML 1.1 would read as something else', () => {
    for (const s of [
      '0644',
      '1:20',
      'yes',
      'Off',
      'NULL',
      'e5',
      '12',
      '',
      ' a',
      'a ',
      '#x',
      '-a',
      '[a]',
    ]) {
      expect(isPlainSafe(s), s).toBe(false);
    }
    for (const s of [
      '/etc/kubernetes/kubelet.conf',
      'kubelet.service',
      'getty@tty1.service',
      '--no-block',
    ]) {
      expect(isPlainSafe(s), s).toBe(true);
    }
    expect(doubleQuoted('a"b\\c\n\t\x00\x7f\u2028😀')).toBe('"a\\"b\\\\c\\n\\t\\0\\x7F\\u2028😀"');
    expect(readDoubleQuoted('"\\x41\\u00e9\\U0001F600\\N\\_"', 0).value).toBe('Aé😀\x85\xa0');
  });
});

describe('literalBlock', () => {
  it('carries text exactly, whatever its chomping and leading spaces', () => {
    const line = fc.oneof(
      fc.constantFrom('', ' x', '  two', '\tt', '# not a comment', '- not a list', 'k: v'),
      fc.stringMatching(/^[a-z]{1,8}$/),
    );
    fc.assert(
      fc.property(
        fc.array(line, { minLength: 1, maxLength: 6 }),
        fc.constantFrom('', '\n', '\n\n', '\n\n\n'),
        (lines, end) => {
          const text = lines.join('\n') + end;
          const block = literalBlock(text, 4);
          if (block === undefined) {
            expect(/[^\n]/.test(text)).toBe(false);
            return;
          }
          const doc = `write_files:\n  - path: /x\n    content: ${block}\n    permissions: "0644"\n`;
          const expected = { write_files: [{ path: '/x', content: text, permissions: '0644' }] };
          expect(parse(doc, { version: '1.1' })).toEqual(expected);
          expect(readYamlSubset(doc)).toEqual(expected);
        },
      ),
      { numRuns: 1000 },
    );
  });
});

describe('subset reader vs the yaml library on whole renderings', () => {
  it('decode the same (200 generated cloud-configs)', async () => {
    const registry = defaultRegistry();
    await fc.assert(
      fc.asyncProperty(
        configArb({ types: ['ubuntu', 'generic'], maxBytes: 512 }),
        async (config) => {
          const { userData } = await renderOsc(registry, config, {
            name: 'y',
            namespace: 'y',
            format: 'cloud-config',
          });
          expect(comparable(decodeCloudConfig(userData))).toEqual(
            comparable(decodeCloudConfig(userData, yamlLibraryReader)),
          );
        },
      ),
      { numRuns: 200 },
    );
  });

  it('refuses what the writer never writes', () => {
    expect(() => readYamlSubset('k: 0644\n')).toThrow(/must be quoted/);
    expect(() => readYamlSubset('k: &a x\n')).toThrow();
    expect(() => readYamlSubset('k: v\nk: w\n')).toThrow(/duplicate/);
    expect(() => readYamlSubset('k: "unterminated\n')).toThrow(/unterminated/);
  });
});
