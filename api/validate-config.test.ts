import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Compile } from 'typebox/compile';
import { configArb } from '../renderers/testdata/arbitraries.js';
import { documentOf, hostileConfigArb } from './testing/configs.js';
import type { ResolvedConfig } from './resolved.js';
import { assertValidConfig, InvalidConfigError, validateConfig } from './validate-config.js';
import { validateOperatingSystemConfig } from './validate.js';
import { LIMITS, NODE_LIMITS, OperatingSystemConfig } from './schema.js';

const paths = (errors: readonly { path: string }[]): string[] =>
  [...new Set(errors.map((e) => e.path))].sort();

function config(extra: Partial<ResolvedConfig>): ResolvedConfig {
  return { type: 'ubuntu', purpose: 'reconcile', units: [], files: [], packages: [], ...extra };
}

const file = (path: string) => ({
  path,
  mode: 0o644,
  user: 'root',
  group: 'root',
  content: Buffer.from('x'),
});

describe('validateConfig agrees with oscar validate', () => {
  // typebox stops collecting schema errors at 8 (its maxErrors): past that, oscar validate lists
  // only some of the fields, so the two lists are compared whole below that count only
  const schema = Compile(OperatingSystemConfig);

  it('the same verdict, on the same fields, for generated configs (hostile ones included)', () => {
    let valid = 0;
    let invalid = 0;
    let compared = 0;
    fc.assert(
      fc.property(
        fc.oneof(hostileConfigArb(), configArb({ types: ['ubuntu', 'flatcar', 'generic'] })),
        (c) => {
          const doc = documentOf(c);
          const osc = validateOperatingSystemConfig(doc);
          const resolved = validateConfig(c);
          expect(resolved.length === 0, JSON.stringify(osc)).toBe(osc.length === 0);
          if (schema.Errors(doc).length < 8) {
            expect(paths(resolved), JSON.stringify(osc)).toEqual(paths(osc));
            compared++;
          }
          if (resolved.length === 0) valid++;
          else invalid++;
        },
      ),
      { numRuns: 3000 },
    );
    // both verdicts must be common, or the property says little
    expect(valid).toBeGreaterThan(300);
    expect(invalid).toBeGreaterThan(300);
    expect(compared).toBeGreaterThan(2000);
  });
});

describe('validateConfig refuses what can never apply (issue 13, class 6)', () => {
  const cases: [string, Partial<ResolvedConfig>, string, RegExp][] = [
    [
      'a file and a file below it',
      { files: [file('/etc/app'), file('/etc/app/inner.conf')] },
      'spec.files[0].path',
      /"\/etc\/app" is written as a file, but spec\.files\[1\]\.path .* needs it to be a directory/,
    ],
    [
      "a file where a unit's drop-in directory must be",
      {
        files: [file('/etc/systemd/system/x.service.d')],
        units: [
          {
            name: 'x.service',
            enable: true,
            mask: false,
            command: 'start',
            onChange: 'restart',
            dropIns: [{ name: '10.conf', content: '[Service]\nNice=1\n' }],
            filePaths: [],
          },
        ],
      },
      'spec.files[0].path',
      /needs it to be a directory/,
    ],
    [
      "a file inside the agent's state directory",
      { files: [file('/var/lib/oscar/journal.json')] },
      'spec.files[0].path',
      /the oscar agent's own state directory/,
    ],
    [
      'a name longer than a file system takes',
      { files: [file(`/etc/${'n'.repeat(256)}`)] },
      'spec.files[0].path',
      /256 bytes long; .* at most 255 bytes/,
    ],
    [
      "a unit name whose drop-in directory's name is too long",
      {
        units: [
          {
            name: `${'u'.repeat(246)}.service`,
            enable: true,
            mask: false,
            command: 'start',
            onChange: 'restart',
            dropIns: [{ name: '10.conf', content: '[Service]\nNice=1\n' }],
            filePaths: [],
          },
        ],
      },
      'spec.units[0].name',
      /drop-in directory .* shorten the name to at most 253 characters/,
    ],
  ];
  it.each(cases)('%s, in both layers', (_, extra, field, message) => {
    const c = config(extra);
    for (const errors of [validateConfig(c), validateOperatingSystemConfig(documentOf(c))]) {
      expect(errors.map((e) => e.path)).toEqual([field]);
      expect(errors[0]?.message).toMatch(message);
    }
  });
});

describe('validateConfig refuses hostile input (issue 13, class 2)', () => {
  it.each([
    ['/../../x', /".." segments/],
    ['relative/x', /absolute/],
    ['/etc/./x', /"\." segments/],
  ])('path %s', (path, message) => {
    expect(validateConfig(config({ files: [file(path)] }))).toEqual([
      { path: 'spec.files[0].path', message: expect.stringMatching(message) as string },
    ]);
  });

  it('a unit name with "/"', () => {
    const c = config({
      units: [
        {
          name: '../../etc/x.service',
          enable: true,
          mask: false,
          command: 'start',
          onChange: 'restart',
          dropIns: [],
          filePaths: [],
        },
      ],
    });
    expect(validateConfig(c)).toEqual([
      { path: 'spec.units[0].name', message: expect.stringMatching(/"\/"/) as string },
    ]);
  });

  it('a mode out of range, an owner that is no name, content above the Secret limit', () => {
    const c = config({
      files: [
        { ...file('/etc/a'), mode: 0o10000 },
        { ...file('/etc/b'), user: 'a b' },
        { ...file('/etc/c'), content: Buffer.alloc(1024 * 1024 + 1) },
      ],
    });
    expect(paths(validateConfig(c))).toEqual([
      'spec.files[0].permissions',
      'spec.files[1].owner',
      'spec.files[2].content',
    ]);
  });

  it('assertValidConfig names the origin and every field', () => {
    const c = config({ files: [file('/../../x'), file('relative')] });
    expect(() => assertValidConfig(c, 'Secret ns/s')).toThrow(InvalidConfigError);
    expect(() => assertValidConfig(c, 'Secret ns/s')).toThrow(
      /the config from Secret ns\/s is invalid.*\n {2}spec\.files\[0\]\.path: .*\n {2}spec\.files\[1\]\.path: /,
    );
    expect(assertValidConfig(config({ files: [file('/etc/ok')] }), 'x').files).toHaveLength(1);
  });
});

describe('the file count: one OSC against a whole node', () => {
  const many = (n: number): ResolvedConfig =>
    config({ files: Array.from({ length: n }, (_, i) => file(`/etc/big/d${i % 10}/f${i}.conf`)) });

  it('one OSC holds LIMITS.files (1,024); a node takes NODE_LIMITS.files (16,384)', () => {
    expect(validateConfig(many(LIMITS.files))).toEqual([]);
    expect(validateConfig(many(LIMITS.files + 1))).toEqual([
      { path: 'spec.files', message: 'has 1025 items; at most 1024 are allowed' },
    ]);
    expect(validateConfig(many(10_000), { maxFiles: NODE_LIMITS.files })).toEqual([]);
    expect(validateConfig(many(NODE_LIMITS.files + 1), { maxFiles: NODE_LIMITS.files })).toEqual([
      { path: 'spec.files', message: 'has 16385 items; at most 16384 are allowed' },
    ]);
  });
});
