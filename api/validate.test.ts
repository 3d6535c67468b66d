import { describe, expect, it } from 'vitest';
import { gzipSync } from 'node:zlib';
import { checkFilePath, checkPermissions } from './deep-validate.js';
import { decodedInlineSize, decodeInline, referencedObjects, resolve } from './resolve.js';
import { toFieldPath, validateOperatingSystemConfig } from './validate.js';

const osc = (spec: Record<string, unknown>) => ({
  apiVersion: 'oscar.dev/v1alpha1',
  kind: 'OperatingSystemConfig',
  metadata: { name: 'n' },
  spec: { type: 'ubuntu', purpose: 'reconcile', ...spec },
});

const messages = (doc: unknown) =>
  validateOperatingSystemConfig(doc).map((e) => `${e.path}: ${e.message}`);

describe('validateOperatingSystemConfig', () => {
  it('accepts a minimal OSC', () => {
    expect(messages(osc({}))).toEqual([]);
  });

  it('accepts a template unit and an instance unit', () => {
    expect(
      messages(osc({ units: [{ name: 'getty@.service' }, { name: 'getty@tty1.service' }] })),
    ).toEqual([]);
  });

  it('accepts a unit managed only through drop-ins, with onChange reload', () => {
    const doc = osc({
      units: [
        {
          name: 'nginx.service',
          onChange: 'reload',
          dropIns: [{ name: '10.conf', content: '[Service]\nNice=1\n' }],
        },
      ],
    });
    expect(messages(doc)).toEqual([]);
  });

  it('accepts reload when a drop-in supplies ExecReload=', () => {
    const doc = osc({
      units: [
        {
          name: 'a.service',
          onChange: 'reload',
          content: '[Service]\nExecStart=/bin/sleep infinity\n',
          dropIns: [{ name: 'r.conf', content: '[Service]\nExecReload=/bin/kill -HUP $MAINPID\n' }],
        },
      ],
    });
    expect(messages(doc)).toEqual([]);
  });

  it('reports every problem at once, each under its own path', () => {
    const doc = osc({
      files: [
        { path: 'relative', content: { inline: { data: 'x' } } },
        { path: '/ok', permissions: 493, content: { inline: { data: 'x' } } },
      ],
      units: [{ name: 'x', filePaths: ['/missing'] }],
    });
    const paths = validateOperatingSystemConfig(doc).map((e) => e.path);
    expect(paths).toEqual(
      expect.arrayContaining([
        'spec.files[0].path',
        'spec.files[1].permissions',
        'spec.units[0].name',
        'spec.units[0].filePaths[0]',
      ]),
    );
  });

  it('does not repeat the schema pattern for fields the deep checks explain', () => {
    const all = messages(osc({ units: [{ name: 'kubelet' }] }));
    expect(all).toHaveLength(1);
    expect(all[0]).toMatch(/^spec\.units\[0\]\.name: unit name "kubelet" has no unit type suffix/);
  });
});

describe('checkFilePath', () => {
  it.each([
    ['/etc/kubernetes/kubelet.conf', undefined],
    ['/etc/with space/and-üñíçødé', undefined],
    ['/var/lib/kubelet/.hidden', undefined],
    ['/etc/..hidden', undefined],
  ])('accepts %s', (path, expected) => {
    expect(checkFilePath(path)).toBe(expected);
  });

  it.each([
    ['etc/x', /absolute/],
    ['/etc/x/', /trailing/],
    ['/etc//x', /normalised/],
    ['/etc/../x', /\.\./],
    ['/etc/./x', /"\." segments/],
    ['/usr', /owns/],
    ['/sys/kernel/x', /virtual/],
  ])('refuses %s', (path, pattern) => {
    expect(checkFilePath(path)).toMatch(pattern);
  });
});

describe('checkPermissions', () => {
  it.each(['0644', '644', '0755', '07777', '0000', '4755'])('accepts "%s"', (p) => {
    expect(checkPermissions(p)).toBeUndefined();
  });
  it('explains the YAML octal trap for integers and guesses the mode meant', () => {
    expect(checkPermissions(420)).toMatch(/write permissions: "0644"/);
    expect(checkPermissions(644)).toMatch(/write permissions: "0644"/);
    expect(checkPermissions(493)).toMatch(/write permissions: "0755"/);
  });
  it.each(['0888', '17777', 'rwx', '', '06'])('refuses "%s"', (p) => {
    expect(checkPermissions(p)).toMatch(/not an octal mode/);
  });
});

describe('resolve', () => {
  const spec = {
    type: 'ubuntu',
    purpose: 'reconcile' as const,
    files: [
      { path: '/b', content: { secretRef: { name: 's', key: 'k' } } },
      {
        path: '/a',
        permissions: '0600',
        owner: 'kube',
        content: { configMapRef: { name: 'c', key: 'k' } },
      },
      {
        path: '/c',
        content: {
          inline: { encoding: 'gzip+b64' as const, data: gzipSync('zipped').toString('base64') },
        },
      },
    ],
    units: [{ name: 'z.service' }, { name: 'a.service', mask: true }],
  };

  it('lists the referenced objects', () => {
    expect(referencedObjects(spec)).toEqual({ secrets: ['s'], configMaps: ['c'] });
  });

  it('resolves references, applies defaults and sorts', () => {
    const result = resolve(spec, {
      secrets: new Map([['s', { k: Buffer.from('secret') }]]),
      configMaps: new Map([['c', { k: Buffer.from('config') }]]),
    });
    if (!result.ok) throw new Error(JSON.stringify(result.errors));
    const { files, units } = result.config;
    expect(files.map((f) => [f.path, f.mode, f.user, f.group, f.content.toString()])).toEqual([
      ['/a', 0o600, 'kube', 'kube', 'config'],
      ['/b', 0o644, 'root', 'root', 'secret'],
      ['/c', 0o644, 'root', 'root', 'zipped'],
    ]);
    expect(units.map((u) => [u.name, u.enable, u.mask, u.command, u.onChange])).toEqual([
      ['a.service', false, true, 'start', 'restart'],
      ['z.service', true, false, 'start', 'restart'],
    ]);
  });

  it('names a missing Secret and a missing key, with the keys that exist', () => {
    const missing = resolve(spec, {
      secrets: new Map(),
      configMaps: new Map([['c', { k: Buffer.from('') }]]),
    });
    expect(missing.ok).toBe(false);
    if (!missing.ok) {
      expect(missing.errors[0]).toEqual({
        path: 'spec.files[0].content.secretRef',
        message:
          'Secret "s" not found in the OperatingSystemConfig\'s namespace; create it or fix the name',
      });
    }
    const wrongKey = resolve(spec, {
      secrets: new Map([['s', { other: Buffer.from('x') }]]),
      configMaps: new Map([['c', { k: Buffer.from('x') }]]),
    });
    expect(!wrongKey.ok && wrongKey.errors[0]?.message).toBe(
      'Secret "s" has no key "k" (it has: other)',
    );
  });
});

describe('decodeInline', () => {
  it('decodes the three encodings', () => {
    expect(decodeInline('plain', '').toString()).toBe('plain');
    expect(decodeInline('aGk=', 'b64').toString()).toBe('hi');
    expect(decodeInline('aG\nk=', 'b64').toString()).toBe('hi');
    expect(decodeInline(gzipSync('z').toString('base64'), 'gzip+b64').toString()).toBe('z');
  });
  it('measures the decoded size without keeping the bytes, and refuses what decodeInline refuses', () => {
    for (const data of ['', 'aGk=', 'aGVsbG8gd29ybGQ=', Buffer.alloc(3000, 9).toString('base64')]) {
      expect(decodedInlineSize(data, 'b64')).toBe(decodeInline(data, 'b64').length);
    }
    expect(decodedInlineSize('héllo', '')).toBe(6);
    expect(() => decodedInlineSize('aGk!', 'b64')).toThrow(/not valid base64/);
    expect(() => decodedInlineSize('aG-k', 'b64')).toThrow(/not valid base64/);
  });

  it('refuses base64 that Node would silently truncate', () => {
    expect(() => decodeInline('aGk=!!', 'b64')).toThrow(/not valid base64/);
    expect(() => decodeInline('aGk', 'b64')).toThrow(/not valid base64/);
  });
});

describe('toFieldPath', () => {
  it('turns JSON pointers into kubectl-style paths', () => {
    expect(toFieldPath('/spec/files/2/path')).toBe('spec.files[2].path');
    expect(toFieldPath('')).toBe('');
  });
});
