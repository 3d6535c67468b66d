// Behaviour of the built-in formats beyond the round trip: sizes and warnings, gzip, the
// cloud-init specifics (locale, defer, numeric owners, setuid), the script's guard and ROOT mode.
import { isAscii, isUtf8 } from 'node:buffer';
import { randomBytes } from 'node:crypto';
import { gunzipSync } from 'node:zlib';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ResolvedConfig, ResolvedFile } from '../api/resolved.js';
import { LIMITS } from '../api/schema.js';
import { INLINE_TEXT_MAX, isReadableText } from './common.js';
import { explain } from './explain.js';
import { decode } from './formats.js';
import { defaultRegistry, renderOsc } from './registry.js';
import { IGNITION_TEXT_MAX } from './ignition.js';
import { B64_LINE, shQuote } from './script.js';

const registry = defaultRegistry();
const file = (
  path: string,
  content: string | Buffer,
  extra: Partial<ResolvedFile> = {},
): ResolvedFile => ({
  path,
  mode: 0o644,
  user: 'root',
  group: 'root',
  content: Buffer.isBuffer(content) ? content : Buffer.from(content),
  ...extra,
});
const config = (extra: Partial<ResolvedConfig> = {}): ResolvedConfig => ({
  type: 'ubuntu',
  purpose: 'provision',
  units: [],
  files: [],
  packages: [],
  ...extra,
});
const opts = { name: 'n', namespace: 'ns' };

describe('size and warnings', () => {
  it('warns when a provision payload exceeds 16 KiB, not below, not for reconcile', async () => {
    const random = randomBytes(13 * 1024); // incompressible: gzip cannot hide its size
    const big = config({ files: [file('/etc/big', random)] });
    const r = await renderOsc(registry, big, opts);
    expect(r.userData.length).toBeGreaterThan(LIMITS.provisionUserDataBytes);
    expect(r.warnings).toEqual([
      expect.stringMatching(/^provision user data is 1[78]\.\d KiB, above the 16\.0 KiB/),
    ]);
    expect((await renderOsc(registry, { ...big, purpose: 'reconcile' }, opts)).warnings).toEqual(
      [],
    );
    expect(
      (await renderOsc(registry, config({ files: [file('/etc/small', 'x')] }), opts)).warnings,
    ).toEqual([]);
  });

  it('gzips the whole cloud-config payload on request, and says gzip does not apply elsewhere', async () => {
    const c = config({ files: [file('/etc/a', 'hello\n'.repeat(500))] });
    const plain = await renderOsc(registry, c, opts);
    const zipped = await renderOsc(registry, c, { ...opts, gzip: true });
    expect(zipped.userData.subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b]));
    expect(gunzipSync(zipped.userData)).toEqual(plain.userData);
    const script = await renderOsc(registry, c, { ...opts, gzip: true, format: 'script' });
    expect(script.warnings).toEqual([expect.stringMatching(/gzip applies to cloud-config only/)]);
  });

  it('compresses large compressible files and leaves random bytes alone', async () => {
    const text = 'key = value\n'.repeat(1000);
    const random = randomBytes(100_000);
    const c = config({ type: 'flatcar', files: [file('/etc/t', text), file('/etc/r', random)] });
    const cc = (await renderOsc(registry, { ...c, type: 'ubuntu' }, opts)).userData.toString();
    expect(cc).toMatch(/path: \/etc\/t\n {4}encoding: gz\+b64\n/);
    expect(cc).toMatch(/path: \/etc\/r\n {4}encoding: b64\n/);
    const ign = JSON.parse((await renderOsc(registry, c, opts)).userData.toString()) as {
      storage: { files: { path: string; contents: { compression?: string } }[] };
    };
    expect(ign.storage.files.map((f) => [f.path, f.contents.compression])).toEqual([
      ['/etc/r', undefined],
      ['/etc/t', 'gzip'],
    ]);
  });
});

describe('cloud-config specifics', () => {
  it('sets locale, defers non-root files, chowns numeric owners and restores setuid in runcmd', async () => {
    const c = config({
      files: [
        file('/etc/a', 'a\n', { user: 'nobody', group: 'nogroup' }),
        file('/etc/b', 'b\n', { user: '1000', group: 'root' }),
        file('/usr/local/sbin/c', 'c\n', { mode: 0o4755 }),
      ],
    });
    const text = (await renderOsc(registry, c, opts)).userData.toString();
    expect(text.startsWith('#cloud-config\n')).toBe(true);
    expect(text).toContain('\nlocale: C.UTF-8\n');
    expect(text).toContain(
      '  - path: /etc/a\n    content: |\n      a\n    permissions: "0644"\n    owner: "nobody:nogroup"\n    defer: true\n',
    );
    expect(text).toContain('  - [chown, "1000:root", /etc/b]\n');
    expect(text).toContain('  - [chmod, "4755", /usr/local/sbin/c]\n');
    expect(text).not.toMatch(/path: \/etc\/b\n(.*\n)*?\s+owner/);
  });

  it('runs daemon-reload, mask, enable and the unit commands in a stable order, without blocking boot', async () => {
    const unit = (name: string, extra: object = {}) => ({
      name,
      enable: true,
      mask: false,
      command: 'start' as const,
      onChange: 'restart' as const,
      content: '[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n',
      dropIns: [],
      filePaths: [],
      ...extra,
    });
    const c = config({
      units: [
        unit('a.service', { command: 'restart' }),
        unit('b.service', { enable: false, command: 'stop' }),
        unit('m.service', { mask: true, enable: false, content: undefined }),
        unit('t@.service'),
        unit('static.service', { content: '[Service]\nExecStart=/bin/true\n' }),
      ],
    });
    const text = (await renderOsc(registry, c, opts)).userData.toString();
    expect(text.slice(text.indexOf('runcmd:'))).toBe(
      [
        'runcmd:',
        '  - [systemctl, mask, m.service]',
        '  - [systemctl, daemon-reload]',
        '  - [systemctl, stop, m.service]',
        '  - [systemctl, enable, a.service]',
        '  - [systemctl, --no-block, restart, a.service]',
        '  - [systemctl, --no-block, stop, b.service]',
        '  - [systemctl, --no-block, start, static.service]',
        '',
      ].join('\n'),
    );
  });
});

describe('script specifics', () => {
  it('guards provision with a marker and installs packages with the profile manager', async () => {
    const c = config({ packages: [{ name: 'curl' }, { name: 'kubelet', version: '1.31.2-1.1' }] });
    const text = (await renderOsc(registry, c, { ...opts, format: 'script' })).userData.toString();
    expect(text).toContain('marker="$ROOT/var/lib/oscar/provisioned"\nif [ -e "$marker" ]; then');
    expect(text).toContain('apt-get install -y -q');
    expect(text).not.toContain('zypper');
    expect(text).toContain('  oscar_packages curl kubelet=1.31.2-1.1\n');
    expect(text.trimEnd().endsWith(': >"$marker"\necho "oscar: done"')).toBe(true);
    const suse = (
      await renderOsc(registry, { ...c, type: 'opensuse' }, { ...opts, format: 'script' })
    ).userData.toString();
    expect(suse).toContain('zypper --non-interactive install');
    const generic = (
      await renderOsc(registry, { ...c, type: 'generic', purpose: 'reconcile' }, opts)
    ).userData.toString();
    expect(generic).toContain('command -v apt-get');
    expect(generic).not.toContain('marker');
    expect(decode('script', Buffer.from(generic)).packages).toEqual(c.packages);
  });

  it("writes files and units, then installs packages, then writes the files of other user names (cloud-init's order)", async () => {
    const c = config({
      type: 'debian',
      purpose: 'reconcile',
      files: [
        file('/etc/apt/sources.list.d/repo.list', 'deb file:/repo ./\n'),
        file('/etc/app/app.conf', 'x\n', { user: 'app', group: 'app' }),
        file('/etc/app/by-id.conf', 'x\n', { user: '1000', group: '1000' }),
      ],
      packages: [{ name: 'app' }],
      units: [
        {
          name: 'app.service',
          enable: true,
          mask: false,
          command: 'start',
          onChange: 'restart',
          content: '[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n',
          dropIns: [],
          filePaths: [],
        },
      ],
    });
    const text = (await renderOsc(registry, c, { ...opts, format: 'script' })).userData.toString();
    const at = (s: string): number => {
      const i = text.indexOf(s);
      expect(i, s).toBeGreaterThan(0);
      return i;
    };
    const order = [
      at('oscar_text /etc/app/by-id.conf 0644 1000:1000'),
      at('oscar_text /etc/apt/sources.list.d/repo.list'),
      at('oscar_text /etc/systemd/system/app.service'),
      at('  oscar_packages app\n'),
      at('oscar_text /etc/app/app.conf 0644 app:app'),
      at('  systemctl enable app.service'),
    ];
    expect([...order].sort((a, b) => a - b)).toEqual(order);
  });

  it('quotes shell words exactly', () => {
    expect(shQuote('plain/path.conf')).toBe('plain/path.conf');
    expect(shQuote("it's")).toBe(`'it'\\''s'`);
    expect(shQuote('')).toBe("''");
    expect(shQuote('$HOME `x` "y"')).toBe(`'$HOME \`x\` "y"'`);
  });
});

describe('isReadableText', () => {
  it('accepts plain UTF-8 text and refuses what a text block cannot carry exactly', () => {
    expect(isReadableText(Buffer.from('a\n\tb é 中 😀\n'))).toBe(true);
    for (const bad of ['a\r\n', 'a \n', 'a\t', '\x00', '\x1b[0m', '\u2028', '\ufeffx', 'x\x85']) {
      expect(isReadableText(Buffer.from(bad)), JSON.stringify(bad)).toBe(false);
    }
    expect(isReadableText(Buffer.from([0xc3, 0x28]))).toBe(false); // invalid UTF-8
  });
});

/** isReadableText the slow and obvious way (regular expressions over the decoded text). */
function readableReference(content: Buffer): boolean {
  const bytes = content.toString('latin1');
  // eslint-disable-next-line no-control-regex
  if (/[\x00-\x08\x0b-\x1f\x7f]/.test(bytes) || /[ \t](\n|$)/.test(bytes)) return false;
  if (isAscii(content)) return true;
  if (!isUtf8(content)) return false;
  return !/[\x80-\x9f\u2028\u2029\ufeff\ufffe\uffff]/.test(content.toString('utf8'));
}

describe('isReadableText against a reference', () => {
  // the word-at-a-time scan depends on where the bytes sit: vary the start within a larger buffer
  const placed = (bytes: Uint8Array, offset: number): Buffer =>
    Buffer.concat([Buffer.alloc(offset, 0x61), Buffer.from(bytes)]).subarray(offset);

  it('agrees on text with one odd byte anywhere, at any alignment', () => {
    const odd = fc.oneof(
      fc.integer({ min: 0, max: 0x1f }),
      fc.constantFrom(0x20, 0x7e, 0x7f, 0x80, 0x85, 0x9f, 0xa0, 0xc2, 0xe2, 0xef, 0xff),
    );
    fc.assert(
      fc.property(
        fc.string({ unit: 'grapheme-ascii', maxLength: 40 }),
        odd,
        fc.nat(40),
        fc.nat(7),
        (text, byte, at, offset) => {
          const bytes = Buffer.from(text);
          const i = Math.min(at, bytes.length);
          const content = Buffer.concat([
            bytes.subarray(0, i),
            Buffer.from([byte]),
            bytes.subarray(i),
          ]);
          const b = placed(content, offset);
          expect(isReadableText(b), JSON.stringify(b.toString('latin1'))).toBe(
            readableReference(b),
          );
        },
      ),
      { numRuns: 3000 },
    );
  });

  it('agrees on arbitrary bytes and UTF-8 text', () => {
    const content = fc.oneof(
      fc.uint8Array({ maxLength: 64 }).map((a) => Buffer.from(a)),
      fc.string({ unit: 'binary', maxLength: 64 }).map((s) => Buffer.from(s, 'utf8')),
      fc
        .array(fc.constantFrom('a', ' ', '\t', '\n', 'é', '\u2028', '\u0085', '\r', '\x7f'), {
          maxLength: 40,
        })
        .map((parts) => Buffer.from(parts.join(''), 'utf8')),
    );
    fc.assert(
      fc.property(content, fc.nat(7), (c, offset) => {
        const b = placed(c, offset);
        expect(isReadableText(b)).toBe(readableReference(b));
      }),
      { numRuns: 3000 },
    );
  });
});

describe('readable text only up to INLINE_TEXT_MAX (Ignition: IGNITION_TEXT_MAX)', () => {
  const line = 'key = value # a comment\n';
  const small = Buffer.from(line.repeat(Math.floor(INLINE_TEXT_MAX / line.length)));
  const large = Buffer.concat([small, Buffer.from(line)]);
  const c = config({
    type: 'generic',
    purpose: 'reconcile',
    files: [file('/etc/large', large), file('/etc/small', small)],
  });

  it('writes the small file as text and the large one as base64', () => {
    expect(small.length).toBeLessThanOrEqual(INLINE_TEXT_MAX);
    expect(large.length).toBeGreaterThan(INLINE_TEXT_MAX);
    const became = (format: 'cloud-config' | 'script', type = 'generic') =>
      explain({ ...c, type }, { name: 'n', namespace: 'ns', purpose: 'reconcile', format })
        .filter((r) => r.kind === 'file')
        .map((r) => r.became.split(', ')[1]);
    expect(became('cloud-config')).toEqual(['b64', 'text']);
    expect(became('script')).toEqual(['b64', 'text']);
    const ign = explain(
      { ...c, type: 'flatcar' },
      { name: 'n', namespace: 'ns', purpose: 'reconcile', format: 'ignition' },
    )
      .filter((r) => r.kind === 'file')
      .map((r) => r.became.split(', ')[1]);
    // Ignition's data URLs are not read by people: only short text stays text (below)
    expect(ign).toEqual(['base64 data URL', 'base64 data URL']);
  });

  it('writes short text in Ignition percent-encoded when that is no longer than base64', async () => {
    const words = Buffer.from('worker-1.example.com'); // nothing to escape
    const spaced = Buffer.from(' a b c d e f g h\n'); // escapes make it longer than base64
    const long = Buffer.from('x'.repeat(IGNITION_TEXT_MAX + 1));
    const r = await renderOsc(
      registry,
      config({
        type: 'flatcar',
        files: [file('/etc/a', words), file('/etc/b', spaced), file('/etc/c', long)],
      }),
      { ...opts, format: 'ignition' },
    );
    const sources = (
      JSON.parse(r.userData.toString()) as {
        storage: { files: { contents: { source: string } }[] };
      }
    ).storage.files.map((f) => f.contents.source);
    expect(sources).toEqual([
      'data:,worker-1.example.com',
      `data:;base64,${spaced.toString('base64')}`,
      `data:;base64,${long.toString('base64')}`,
    ]);
  });

  it("cuts the script's base64 into lines of B64_LINE characters, within POSIX LINE_MAX", async () => {
    const random = randomBytes(5000);
    const r = await renderOsc(registry, config({ type: 'generic', files: [file('/r', random)] }), {
      ...opts,
      format: 'script',
    });
    const text = r.userData.toString();
    const body = text.slice(text.indexOf("<<'OSCAR_B64'\n") + 14, text.indexOf('\nOSCAR_B64\n'));
    const lines = body.split('\n');
    expect(lines.length).toBeGreaterThan(1);
    expect(lines.slice(0, -1).every((l) => l.length === B64_LINE)).toBe(true);
    // LINE_MAX (2048) counts the newline; whole base64 quanta per line
    expect(B64_LINE + 1).toBeLessThanOrEqual(2048);
    expect(B64_LINE % 4).toBe(0);
    expect(Buffer.from(lines.join(''), 'base64').equals(random)).toBe(true);
  });
});
