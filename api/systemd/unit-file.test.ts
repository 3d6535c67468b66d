import { readdirSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  analyzeUnitFile,
  haveSystemdAnalyze,
  rejectedRestartValues,
  systemdAnalyzeMissing,
} from './testdata/systemd-analyze.js';
import {
  findEntries,
  formatUnitFileError,
  hasKey,
  lastValue,
  parseUnitFile,
  sameUnitContent,
  sectionNames,
  serializeUnitFile,
  UnitFileSerializeError,
  valuesAfterReset,
  type UnitSectionInput,
} from './unit-file.js';

/** Sections without line numbers, for compact expectations. */
function content(text: string): { name: string; entries: [string, string][] }[] {
  return parseUnitFile(text).sections.map((s) => ({
    name: s.name,
    entries: s.entries.map((e): [string, string] => [e.key, e.value]),
  }));
}

const CI = process.env.CI === 'true';
/** Tests that need systemd-analyze run when it is present, fail under CI when it is not. */
const itWithSystemd = it.skipIf(!haveSystemdAnalyze && !CI);
function requireSystemd(): void {
  if (systemdAnalyzeMissing !== undefined) throw new Error(systemdAnalyzeMissing);
}

describe('parseUnitFile: accepted syntax', () => {
  const cases: { name: string; text: string; want: ReturnType<typeof content> }[] = [
    { name: 'empty file', text: '', want: [] },
    { name: 'only comments and blank lines', text: '# a\n; b\n\n   \n\t# c\n', want: [] },
    {
      name: 'basic sections and entries',
      text: '[Unit]\nDescription=Hello\n\n[Service]\nExecStart=/bin/true\n',
      want: [
        { name: 'Unit', entries: [['Description', 'Hello']] },
        { name: 'Service', entries: [['ExecStart', '/bin/true']] },
      ],
    },
    {
      name: 'whitespace around "=" and at line ends is trimmed',
      text: '[Unit]\n  Description \t=  Hello  world \t\n',
      want: [{ name: 'Unit', entries: [['Description', 'Hello  world']] }],
    },
    {
      name: 'a ";" or "#" mid-line is part of the value',
      text: '[Service]\nExecStart=/bin/sh -c "echo a; echo b # not a comment"\n',
      want: [
        {
          name: 'Service',
          entries: [['ExecStart', '/bin/sh -c "echo a; echo b # not a comment"']],
        },
      ],
    },
    {
      name: 'only the first "=" separates key and value',
      text: '[Service]\nEnvironment=A=1 B=2\n',
      want: [{ name: 'Service', entries: [['Environment', 'A=1 B=2']] }],
    },
    {
      name: 'repeated keys kept in order, empty assignment kept as a reset',
      text: '[Service]\nExecStart=/a\nExecStart=\nExecStart=/b\n',
      want: [
        {
          name: 'Service',
          entries: [
            ['ExecStart', '/a'],
            ['ExecStart', ''],
            ['ExecStart', '/b'],
          ],
        },
      ],
    },
    {
      name: 'continuation: backslash becomes a space, next line kept with its indentation',
      text: '[Service]\nExecStart=/bin/echo a \\\n    b\n',
      want: [{ name: 'Service', entries: [['ExecStart', '/bin/echo a      b']] }],
    },
    {
      name: 'continuation skips comment lines inside it (systemd.syntax example)',
      text: '[C]\nKeyThree=value 3\\\n# this line is ignored\n; this line is ignored too\n       value 3 continued\n',
      want: [{ name: 'C', entries: [['KeyThree', 'value 3        value 3 continued']] }],
    },
    {
      name: 'an empty line ends a continuation',
      text: '[S]\nA=x\\\n\nB=y\n',
      want: [
        {
          name: 'S',
          entries: [
            ['A', 'x'],
            ['B', 'y'],
          ],
        },
      ],
    },
    {
      name: 'continuation at end of file',
      text: '[S]\nA=x\\',
      want: [{ name: 'S', entries: [['A', 'x']] }],
    },
    {
      name: 'escaped backslash at line end is not a continuation',
      text: '[S]\nA=x\\\\\nB=y\n',
      want: [
        {
          name: 'S',
          entries: [
            ['A', 'x\\\\'],
            ['B', 'y'],
          ],
        },
      ],
    },
    {
      name: 'odd backslash run continues, even run does not',
      text: '[S]\nA=x\\\\\\\ny\n',
      want: [{ name: 'S', entries: [['A', 'x\\\\ y']] }],
    },
    {
      name: 'backslash followed by trailing space is a literal backslash',
      text: '[S]\nA=x\\ \nB=y\n',
      want: [
        {
          name: 'S',
          entries: [
            ['A', 'x\\'],
            ['B', 'y'],
          ],
        },
      ],
    },
    {
      name: 'comment line ending in backslash does not continue',
      text: '[S]\n# comment \\\nA=x\n',
      want: [{ name: 'S', entries: [['A', 'x']] }],
    },
    {
      name: 'CRLF line endings',
      text: '[Unit]\r\nDescription=x\r\n\r\n[Service]\r\nExecStart=/bin/true\r\n',
      want: [
        { name: 'Unit', entries: [['Description', 'x']] },
        { name: 'Service', entries: [['ExecStart', '/bin/true']] },
      ],
    },
    {
      name: 'CRLF with continuation',
      text: '[S]\r\nA=x\\\r\ny\r\n',
      want: [{ name: 'S', entries: [['A', 'x y']] }],
    },
    {
      name: 'old Mac CR and NUL line endings, as systemd reads them',
      text: '[S]\rA=1\n\rB=2\0C=3',
      want: [
        {
          name: 'S',
          entries: [
            ['A', '1'],
            ['B', '2'],
            ['C', '3'],
          ],
        },
      ],
    },
    {
      name: 'byte order mark at start',
      text: '\uFEFF[Unit]\nDescription=x\n',
      want: [{ name: 'Unit', entries: [['Description', 'x']] }],
    },
    {
      name: 'byte order mark before a comment',
      text: '\uFEFF# comment\n[Unit]\n',
      want: [{ name: 'Unit', entries: [] }],
    },
    {
      name: 'section header with surrounding whitespace',
      text: '  [Unit]  \nA=b\n',
      want: [{ name: 'Unit', entries: [['A', 'b']] }],
    },
    {
      name: 'empty section and repeated section kept separately',
      text: '[Install]\n[Service]\nA=1\n[Service]\nB=2\n',
      want: [
        { name: 'Install', entries: [] },
        { name: 'Service', entries: [['A', '1']] },
        { name: 'Service', entries: [['B', '2']] },
      ],
    },
    {
      name: 'section names with spaces inside (networkd-style) and X- sections',
      text: '[Section A]\nK=v\n[X-Oscar]\nFoo=bar\n',
      want: [
        { name: 'Section A', entries: [['K', 'v']] },
        { name: 'X-Oscar', entries: [['Foo', 'bar']] },
      ],
    },
    {
      name: 'unicode keys and values',
      text: '[Unit]\nDescription=Grüße ✓ 日本 🎉\n',
      want: [{ name: 'Unit', entries: [['Description', 'Grüße ✓ 日本 🎉']] }],
    },
    {
      name: 'value that is only "=" and value with quotes',
      text: '[S]\nA==\nB="x y" \'z\'\n',
      want: [
        {
          name: 'S',
          entries: [
            ['A', '='],
            ['B', '"x y" \'z\''],
          ],
        },
      ],
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const parsed = parseUnitFile(c.text);
      expect(parsed.errors).toEqual([]);
      expect(content(c.text)).toEqual(c.want);
    });
  }

  it('records the line of each header and of the first line of each assignment', () => {
    const parsed = parseUnitFile('# c\n[Unit]\nA=1\\\n# skipped\n  2\n\n[Service]\r\nB=3\n');
    expect(parsed.sections).toEqual([
      { name: 'Unit', line: 2, entries: [{ key: 'A', value: '1   2', line: 3 }] },
      { name: 'Service', line: 7, entries: [{ key: 'B', value: '3', line: 8 }] },
    ]);
  });
});

describe('parseUnitFile: errors', () => {
  const cases: { name: string; text: string; line: number; message: string }[] = [
    {
      name: 'line without "=" (word and value)',
      text: '[Service]\nType=oneshot\nExecStart=/bin/true\nExecStart /bin/true\n',
      line: 4,
      message: '"ExecStart /bin/true" is not a Key=Value assignment; write ExecStart=/bin/true',
    },
    {
      name: 'line without "=" (colon, YAML habit)',
      text: '[Unit]\nDescription: my unit\n',
      line: 2,
      message: '"Description: my unit" is not a Key=Value assignment; write Description=my unit',
    },
    {
      name: 'line without "=" (single word)',
      text: '[Service]\nRemainAfterExit\n',
      line: 2,
      message:
        '"RemainAfterExit" is not a Key=Value assignment; write RemainAfterExit=<value>, or start the line with "#" to make it a comment',
    },
    {
      name: 'line without "=" (something else)',
      text: '[Service]\n/usr/bin/foo --bar\n',
      line: 2,
      message:
        '"/usr/bin/foo --bar" is not a Key=Value assignment; write it as Key=Value, or start the line with "#" to make it a comment',
    },
    {
      name: '.include',
      text: '[Service]\n.include /etc/foo.service\n',
      line: 2,
      message:
        '".include /etc/foo.service": systemd no longer supports .include; move these settings into a drop-in file (<unit>.d/<name>.conf)',
    },
    {
      name: 'missing key',
      text: '[Service]\n  = /bin/true\n',
      line: 2,
      message:
        '"= /bin/true" has no key before "="; write Key= /bin/true, or start the line with "#" to make it a comment',
    },
    {
      name: 'assignment before any section',
      text: 'Description=x\nAfter=y\n[Unit]\n',
      line: 1,
      message:
        '"Description=x" appears before any section header, so systemd ignores it; add a header such as [Unit] above it',
    },
    {
      name: 'assignment before any section suggests the usual section',
      text: 'ExecStart=/bin/true\n',
      line: 1,
      message:
        '"ExecStart=/bin/true" appears before any section header, so systemd ignores it; add a header such as [Service] above it',
    },
    {
      name: 'unterminated section header',
      text: '[Unit\nDescription=x\n',
      line: 1,
      message:
        'section header "[Unit" is missing its closing "]"; write [Unit] (systemd refuses the whole file otherwise)',
    },
    {
      name: 'text after the section header',
      text: '[Service] # main section\nExecStart=/bin/true\n',
      line: 1,
      message:
        'section header "[Service] # main section" has text after "]"; put comments on their own line and write [Service]',
    },
    {
      name: 'empty section name',
      text: '[]\nA=b\n',
      line: 1,
      message:
        'empty section name "[]"; name the section, for example [Unit], [Service] or [Install]',
    },
    {
      name: 'brackets inside the section name',
      text: '[[Unit]]\nA=b\n',
      line: 1,
      message:
        'section name "[Unit]" contains "[" or "]", so systemd would not recognise it; write [Unit]',
    },
    {
      name: 'spaces inside the brackets',
      text: '[ Unit ]\nA=b\n',
      line: 1,
      message:
        'section name " Unit " has spaces inside the brackets, so systemd would not recognise it; write [Unit]',
    },
    {
      name: 'whitespace inside a key',
      text: '[Service]\nEnvironment FOO=bar\n',
      line: 2,
      message:
        'key "Environment FOO" contains whitespace, so systemd would ignore this line; did you mean Environment=FOO=bar?',
    },
    {
      name: 'stray byte order mark before a key',
      text: '\uFEFF[Service]\n\uFEFFExecStart=/bin/true\n',
      line: 2,
      message:
        'key "ExecStart" starts with a stray byte order mark (U+FEFF), so systemd would ignore this line; delete the invisible character before the key',
    },
  ];

  for (const c of cases) {
    it(c.name, () => {
      const parsed = parseUnitFile(c.text);
      expect(parsed.errors).toEqual([{ line: c.line, message: c.message }]);
      // The bad line is dropped, as systemd drops it.
      for (const s of parsed.sections) for (const e of s.entries) expect(e.line).not.toBe(c.line);
    });
  }

  itWithSystemd('systemd itself complains about the same line in every error case', () => {
    requireSystemd();
    for (const c of cases) {
      const diags = analyzeUnitFile(c.text);
      expect(
        diags.some((d) => d.line === c.line),
        `${c.name}: ${JSON.stringify(diags)}`,
      ).toBe(true);
    }
  });

  it('reports "before any section" once per run of orphan lines, and every other error', () => {
    const parsed = parseUnitFile('A=1\nB=2\nbad line\n[Unit]\nC=3\n');
    expect(parsed.errors.map((e) => e.line)).toEqual([1, 3]);
    expect(content('A=1\nB=2\n[Unit]\nC=3\n')).toEqual([{ name: 'Unit', entries: [['C', '3']] }]);
  });

  it('drops the assignments under a broken header without piling up more errors', () => {
    const parsed = parseUnitFile('[Unit\nDescription=x\nAfter=y\n[Service]\nExecStart=/bin/true\n');
    expect(parsed.errors.map((e) => e.line)).toEqual([1]);
    expect(content('[Unit\nDescription=x\n[Service]\nExecStart=/bin/true\n')).toEqual([
      { name: 'Service', entries: [['ExecStart', '/bin/true']] },
    ]);
  });

  it('reports the first line of a continued assignment', () => {
    const parsed = parseUnitFile('[S]\nExecStart \\\n  /bin/true\n');
    expect(parsed.errors).toHaveLength(1);
    expect(parsed.errors[0]?.line).toBe(2);
  });

  it('shortens very long lines in messages', () => {
    const parsed = parseUnitFile(`[S]\n${'x'.repeat(5000)}\n`);
    expect(parsed.errors[0]?.message.length).toBeLessThan(300);
  });

  it('formats errors like systemd does', () => {
    const e = { line: 4, message: 'm' };
    expect(formatUnitFileError(e)).toBe('line 4: m');
    expect(formatUnitFileError(e, 'foo.service')).toBe('foo.service:4: m');
  });
});

describe('serializeUnitFile', () => {
  it('writes the canonical form', () => {
    const text =
      '# comment\n[Unit]\nDescription = x  \n\n\n[Service]\nExecStart=/a \\\n  b\nExecStart=\n[Install]\n';
    expect(serializeUnitFile(parseUnitFile(text).sections)).toBe(
      '[Unit]\nDescription=x\n\n[Service]\nExecStart=/a    b\nExecStart=\n\n[Install]\n',
    );
  });

  it('writes nothing for no sections', () => {
    expect(serializeUnitFile([])).toBe('');
  });

  it('keeps a value ending in a lone backslash from turning into a continuation', () => {
    const sections = [
      {
        name: 'S',
        entries: [
          { key: 'A', value: 'x\\' },
          { key: 'B', value: 'y' },
        ],
      },
    ];
    const text = serializeUnitFile(sections);
    expect(text).toBe('[S]\nA=x\\ \nB=y\n');
    expect(sameUnitContent(parseUnitFile(text).sections, sections)).toBe(true);
  });

  const bad: { name: string; sections: UnitSectionInput[]; message: RegExp }[] = [
    { name: 'empty section name', sections: [{ name: '', entries: [] }], message: /empty/ },
    { name: 'bracket in name', sections: [{ name: 'a]b', entries: [] }], message: /"\["/ },
    { name: 'blank around name', sections: [{ name: ' U', entries: [] }], message: /whitespace/ },
    { name: 'newline in name', sections: [{ name: 'U\nV', entries: [] }], message: /line break/ },
    {
      name: 'empty key',
      sections: [{ name: 'S', entries: [{ key: '', value: 'v' }] }],
      message: /empty key/,
    },
    {
      name: '= in key',
      sections: [{ name: 'S', entries: [{ key: 'a=b', value: 'v' }] }],
      message: /"="/,
    },
    {
      name: 'space in key',
      sections: [{ name: 'S', entries: [{ key: 'a b', value: 'v' }] }],
      message: /whitespace/,
    },
    {
      name: 'comment key',
      sections: [{ name: 'S', entries: [{ key: '#a', value: 'v' }] }],
      message: /start/,
    },
    {
      name: '[ key',
      sections: [{ name: 'S', entries: [{ key: '[a', value: 'v' }] }],
      message: /start/,
    },
    {
      name: 'newline in value',
      sections: [{ name: 'S', entries: [{ key: 'A', value: 'x\ny' }] }],
      message: /line break/,
    },
    {
      name: 'CR in value',
      sections: [{ name: 'S', entries: [{ key: 'A', value: 'x\ry' }] }],
      message: /line break/,
    },
    {
      name: 'NUL in value',
      sections: [{ name: 'S', entries: [{ key: 'A', value: 'x\0y' }] }],
      message: /NUL/,
    },
    {
      name: 'trailing blank',
      sections: [{ name: 'S', entries: [{ key: 'A', value: 'x ' }] }],
      message: /trim/,
    },
    {
      name: 'leading tab',
      sections: [{ name: 'S', entries: [{ key: 'A', value: '\tx' }] }],
      message: /trim/,
    },
  ];
  for (const c of bad) {
    it(`refuses ${c.name}`, () => {
      expect(() => serializeUnitFile(c.sections)).toThrow(UnitFileSerializeError);
      expect(() => serializeUnitFile(c.sections)).toThrow(c.message);
    });
  }
});

describe('helpers', () => {
  const parsed = parseUnitFile(
    '[Unit]\nDescription=d\n[Service]\nExecStart=/a\nExecReload=\n[Install]\nWantedBy=a.target\n[Service]\nExecStart=\nExecStart=/b\nExecStart=/c\n',
  );

  it('findEntries collects across repeated sections, in order', () => {
    expect(findEntries(parsed, 'Service', 'ExecStart').map((e) => [e.value, e.line])).toEqual([
      ['/a', 4],
      ['', 9],
      ['/b', 10],
      ['/c', 11],
    ]);
    expect(findEntries(parsed, 'Service', 'ExecStop')).toEqual([]);
    expect(findEntries(parsed, 'service', 'ExecStart')).toEqual([]);
  });

  it('hasKey', () => {
    expect(hasKey(parsed, 'Service', 'ExecReload')).toBe(true);
    expect(hasKey(parsed, 'Service', 'ExecStop')).toBe(false);
    expect(hasKey(parsed, 'Unit', 'ExecStart')).toBe(false);
    expect(hasKey(parsed, 'Timer', 'OnCalendar')).toBe(false);
  });

  it('sectionNames is distinct, in order of first appearance', () => {
    expect(sectionNames(parsed)).toEqual(['Unit', 'Service', 'Install']);
  });

  it('lastValue and valuesAfterReset', () => {
    expect(lastValue(parsed, 'Unit', 'Description')).toBe('d');
    expect(lastValue(parsed, 'Unit', 'After')).toBeUndefined();
    expect(valuesAfterReset(parsed, 'Service', 'ExecStart')).toEqual(['/b', '/c']);
    expect(valuesAfterReset(parsed, 'Service', 'ExecReload')).toEqual([]);
    expect(valuesAfterReset(parsed, 'Install', 'WantedBy')).toEqual(['a.target']);
  });

  it('sameUnitContent ignores line numbers only', () => {
    const a = parseUnitFile('[S]\nA=1\n').sections;
    expect(sameUnitContent(a, parseUnitFile('\n\n[S]\n  A = 1\n').sections)).toBe(true);
    expect(sameUnitContent(a, parseUnitFile('[S]\nA=2\n').sections)).toBe(false);
    expect(sameUnitContent(a, parseUnitFile('[T]\nA=1\n').sections)).toBe(false);
    expect(sameUnitContent(a, parseUnitFile('[S]\nA=1\nA=1\n').sections)).toBe(false);
    expect(sameUnitContent(a, [])).toBe(false);
  });
});

describe('real unit files on this machine', () => {
  // /lib is usually a symlink to /usr/lib; real paths keep each file once.
  const roots = ['/lib/systemd/system', '/usr/lib/systemd/system'];
  function collect(): string[] {
    const files = new Set<string>();
    const walk = (dir: string): void => {
      for (const name of readdirSync(dir)) {
        const path = join(dir, name);
        let st;
        try {
          st = statSync(path);
        } catch {
          continue; // dangling symlink
        }
        if (st.isDirectory()) walk(path);
        else if (st.isFile() && st.size > 0) files.add(realpathSync(path));
      }
    };
    for (const r of roots) {
      try {
        statSync(r);
      } catch {
        continue;
      }
      walk(r);
    }
    return [...files].sort();
  }
  const files = collect();
  const missing = files.length === 0 ? `no unit files under ${roots.join(' or ')}` : undefined;

  it.skipIf(missing !== undefined && !CI)(
    'parses every one with no errors and round-trips it through serialize',
    () => {
      if (missing !== undefined) throw new Error(missing);
      const failures: string[] = [];
      let entries = 0;
      for (const file of files) {
        const parsed = parseUnitFile(readFileSync(file, 'utf8'));
        for (const e of parsed.errors) failures.push(formatUnitFileError(e, file));
        const again = parseUnitFile(serializeUnitFile(parsed.sections));
        if (again.errors.length > 0 || !sameUnitContent(again.sections, parsed.sections)) {
          failures.push(`${file}: does not round-trip`);
        }
        entries += parsed.sections.reduce((n, s) => n + s.entries.length, 0);
      }
      expect(failures).toEqual([]);
      expect(files.length).toBeGreaterThan(0);
      expect(entries).toBeGreaterThan(files.length);
    },
  );
});

// ---- property tests ----

/** Characters that stress the syntax: separators, comment markers, escapes, brackets, unicode. */
const tricky = fc.constantFrom(
  'a',
  'Z',
  '0',
  '-',
  '_',
  '.',
  ':',
  '/',
  '%',
  '$',
  '"',
  "'",
  ' ',
  '\t',
  ';',
  '#',
  '=',
  '\\',
  '[',
  ']',
  'é',
  '日',
  '🎉',
  '\u00a0',
  '\uFEFF',
  '\u2028',
);
const anyChar = fc.string({ unit: 'binary', maxLength: 1 }).filter((s) => s.length > 0);
const textOf = (max: number) =>
  fc.string({
    unit: fc.oneof({ weight: 4, arbitrary: tricky }, { weight: 1, arbitrary: anyChar }),
    maxLength: max,
  });
const noBreaks = (s: string) => s.replace(/[\n\r\0]/g, '');
const trimBlanks = (s: string) => s.replace(/^[ \t]+|[ \t]+$/g, '');

const valueArb = textOf(30).map((s) => trimBlanks(noBreaks(s)));
const keyArb = textOf(12)
  .map((s) => noBreaks(s).replace(/[ \t=]/g, ''))
  .filter((k) => k.length > 0 && !/^[#;[\uFEFF]/.test(k));
const sectionNameArb = textOf(12)
  .map((s) => trimBlanks(noBreaks(s).replace(/[[\]]/g, '')))
  .filter((n) => n.length > 0);
const sectionsArb = fc.array(
  fc.record({
    name: sectionNameArb,
    entries: fc.array(fc.record({ key: keyArb, value: valueArb }), { maxLength: 6 }),
  }),
  { maxLength: 5 },
);

describe('properties', () => {
  it('parse(serialize(sections)) gives back the sections, with no errors', () => {
    fc.assert(
      fc.property(sectionsArb, (sections) => {
        const parsed = parseUnitFile(serializeUnitFile(sections));
        expect(parsed.errors).toEqual([]);
        expect(sameUnitContent(parsed.sections, sections)).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  // Arbitrary line soup: headers, assignments, comments, continuations, junk, mixed line endings.
  const lineArb = fc.oneof(
    sectionNameArb.map((n) => `[${n}]`),
    fc
      .tuple(keyArb, valueArb, fc.constantFrom('', ' ', ' \\', '\\'))
      .map(([k, v, t]) => `${k}=${v}${t}`),
    textOf(20).map((s) => `#${noBreaks(s)}`),
    textOf(20).map((s) => `;${noBreaks(s)}`),
    textOf(20).map(noBreaks),
  );
  const docArb = fc
    .tuple(
      fc.array(fc.tuple(lineArb, fc.constantFrom('\n', '\r\n', '\r', '\n\r', '\0'))),
      fc.boolean(),
    )
    .map(([lines, bom]) => (bom ? '\uFEFF' : '') + lines.map(([l, eol]) => l + eol).join(''));

  it('serialize∘parse is idempotent on arbitrary text, and parse never throws', () => {
    fc.assert(
      fc.property(docArb, (text) => {
        const first = parseUnitFile(text);
        const canonical = serializeUnitFile(first.sections);
        const second = parseUnitFile(canonical);
        expect(second.errors).toEqual([]);
        expect(sameUnitContent(second.sections, first.sections)).toBe(true);
        expect(serializeUnitFile(second.sections)).toBe(canonical);
      }),
      { numRuns: 500 },
    );
  });

  // The real systemd parser is the oracle for values: systemd echoes an unparsable Restart= value
  // verbatim in its warning, so each generated assignment is a Restart= whose value starts with
  // "x" (never a valid restart mode). Continuations, comment lines inside them, ";" and "#"
  // mid-line, backslash runs and trailing blanks are all in the mix.
  const segmentArb = fc.string({
    unit: fc.constantFrom('a', 'b', ' ', '\t', ';', '#', '=', '\\', '"', 'é', '日', '[', ']'),
    maxLength: 12,
  });
  const assignmentArb = fc
    .tuple(
      segmentArb,
      fc.array(
        fc.tuple(fc.array(fc.constantFrom('# c', '; c', '  # c \\'), { maxLength: 2 }), segmentArb),
        {
          maxLength: 3,
        },
      ),
    )
    .map(([head, tail]) => {
      const lines: string[] = [];
      const parts = [`Restart=x${head}`, ...tail.map(([, seg]) => seg)];
      parts.forEach((p, i) => {
        const last = i === parts.length - 1;
        const odd = (p.match(/\\*$/)?.[0].length ?? 0) % 2 === 1;
        // Continue every segment but the last one; end the last one cleanly.
        lines.push(last ? (odd ? `${p}x` : p) : odd ? p : `${p}\\`);
        if (!last) lines.push(...(tail[i]?.[0] ?? []));
      });
      return lines.join('\n');
    });

  itWithSystemd('values match what systemd itself reads (systemd-analyze as oracle)', () => {
    requireSystemd();
    fc.assert(
      fc.property(
        fc.array(assignmentArb, { minLength: 1, maxLength: 6 }),
        fc.boolean(),
        (assignments, crlf) => {
          const eol = crlf ? '\r\n' : '\n';
          const text = ['[Service]', 'ExecStart=/bin/true', ...assignments, '']
            .join('\n')
            .replace(/\n/g, eol);
          const ours = findEntries(parseUnitFile(text), 'Service', 'Restart').map((e) => e.value);
          expect(ours).toEqual(rejectedRestartValues(analyzeUnitFile(text)));
        },
      ),
      { numRuns: 40 },
    );
  });
});
