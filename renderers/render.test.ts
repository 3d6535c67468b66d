// Behaviour of the built-in formats beyond the round trip: sizes and warnings, gzip, the
// cloud-init specifics (locale, defer, numeric owners, setuid), the script's guard and ROOT mode.
import { randomBytes } from 'node:crypto';
import { gunzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import type { ResolvedConfig, ResolvedFile } from '../api/resolved.js';
import { LIMITS } from '../api/schema.js';
import { isReadableText } from './common.js';
import { decode } from './decode.js';
import { defaultRegistry, renderOsc } from './registry.js';
import { shQuote } from './script.js';

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
