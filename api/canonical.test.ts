import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  canonicalDocument,
  canonicalize,
  canonicalStringify,
  checksumOf,
  parseCanonical,
} from './canonical.js';
import type { ResolvedConfig } from './resolved.js';
import { resolve } from './resolve.js';
import {
  CGROUP_DRIVERS,
  DRIFT_POLICIES,
  FORMATS,
  type OperatingSystemConfigSpec,
} from './schema.js';

const driftPolicyArb = fc.option(fc.constantFrom(...DRIFT_POLICIES), { nil: undefined });

/** Drops an undefined driftPolicy: a resolved config has the key only when it is set. */
function withPolicy<T extends { driftPolicy?: unknown }>(x: T): T {
  if (x.driftPolicy !== undefined) return x;
  const rest = { ...x };
  delete rest.driftPolicy;
  return rest;
}

const unitArb = fc.record({
  name: fc.stringMatching(/^[a-z][a-z0-9-]{0,10}\.service$/),
  enable: fc.boolean(),
  mask: fc.constant(false),
  command: fc.constantFrom('start' as const, 'restart' as const, 'stop' as const),
  onChange: fc.constantFrom(
    'restart' as const,
    'none' as const,
    'stopStart' as const,
    'reboot' as const,
  ),
  content: fc.option(fc.string({ unit: 'binary' }), { nil: undefined }),
  dropIns: fc.uniqueArray(
    fc.record({
      name: fc.stringMatching(/^[0-9]{2}-[a-z]{1,6}\.conf$/),
      content: fc.string({ unit: 'binary' }),
    }),
    { selector: (d) => d.name, maxLength: 3 },
  ),
  filePaths: fc.uniqueArray(fc.stringMatching(/^\/etc\/[a-z]{1,8}$/), { maxLength: 3 }),
  driftPolicy: driftPolicyArb,
});

const fileArb = fc.record({
  path: fc.stringMatching(/^\/[a-z]{1,8}(\/[a-zA-Z0-9._-]{1,12}){0,3}$/),
  mode: fc.integer({ min: 0, max: 0o7777 }),
  user: fc.constantFrom('root', 'kube', '1000'),
  group: fc.constantFrom('root', 'kube', '1000'),
  content: fc.uint8Array({ maxLength: 256 }).map((a) => Buffer.from(a)),
  driftPolicy: driftPolicyArb,
  onChange: fc.option(fc.constant('reboot' as const), { nil: undefined }),
});

/** Drops an undefined file onChange, as resolve() leaves it out. */
function withFileOnChange<T extends { onChange?: unknown }>(x: T): T {
  if (x.onChange !== undefined) return x;
  const rest = { ...x };
  delete rest.onChange;
  return rest;
}

/** Sorted like resolve() sorts, so the arbitrary is a legal ResolvedConfig. */
const configArb: fc.Arbitrary<ResolvedConfig> = fc
  .record({
    type: fc.constantFrom('ubuntu', 'flatcar', 'generic'),
    purpose: fc.constantFrom('provision' as const, 'reconcile' as const),
    units: fc.uniqueArray(unitArb, { selector: (u) => u.name, maxLength: 5 }),
    files: fc.uniqueArray(fileArb, { selector: (f) => f.path, maxLength: 6 }),
    packages: fc.uniqueArray(
      fc.record(
        {
          name: fc.stringMatching(/^[a-z]{1,8}$/),
          version: fc.stringMatching(/^[0-9.:~+-]{1,8}$/),
        },
        { requiredKeys: ['name'] },
      ),
      { selector: (p) => p.name, maxLength: 3 },
    ),
    format: fc.option(fc.constantFrom(...FORMATS), { nil: undefined }),
    cri: fc.option(
      fc.record({
        name: fc.constant('containerd' as const),
        cgroupDriver: fc.constantFrom(...CGROUP_DRIVERS),
      }),
      { nil: undefined },
    ),
    driftPolicy: driftPolicyArb,
  })
  .map(({ format, cri, ...c }) => ({
    ...withPolicy(c),
    ...(format === undefined ? {} : { format }),
    ...(cri === undefined ? {} : { cri }),
    units: [...c.units]
      .sort((a, b) => (a.name < b.name ? -1 : 1))
      .map((u) => {
        const { content, ...rest } = withPolicy(u);
        return content === undefined || content === '' ? rest : { ...rest, content };
      }),
    files: [...c.files]
      .sort((a, b) => (a.path < b.path ? -1 : 1))
      .map((f) => withFileOnChange(withPolicy(f))),
    packages: [...c.packages].sort((a, b) => (a.name < b.name ? -1 : 1)),
  }));

/** The same JSON value with every object's keys in a random order. */
function shuffleKeys(value: unknown, random: () => number): unknown {
  if (Array.isArray(value)) return value.map((v) => shuffleKeys(v, random));
  if (value === null || typeof value !== 'object') return value;
  const entries = Object.entries(value as Record<string, unknown>);
  for (let i = entries.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [entries[i], entries[j]] = [entries[j] as [string, unknown], entries[i] as [string, unknown]];
  }
  return Object.fromEntries(entries.map(([k, v]) => [k, shuffleKeys(v, random)]));
}

describe('canonical form', () => {
  it('sorts keys at every level', () => {
    expect(canonicalStringify({ b: 1, a: { d: [{ z: 1, y: 2 }], c: 'x' } })).toBe(
      '{"a":{"c":"x","d":[{"y":2,"z":1}]},"b":1}',
    );
  });

  it('writes exactly what the generic sorted-key writer writes (property)', () => {
    fc.assert(
      fc.property(configArb, (config) => {
        expect(canonicalize(config)).toBe(canonicalStringify(canonicalDocument(config)));
      }),
      { numRuns: 500 },
    );
  });

  it('writes content as its canonical base64, whatever padding bits the input had', () => {
    const r = resolve({
      type: 'ubuntu',
      purpose: 'reconcile',
      files: [{ path: '/etc/a', content: { inline: { encoding: 'b64', data: 'QR==' } } }],
    });
    if (!r.ok) throw new Error('resolve failed');
    expect(canonicalize(r.config)).toContain('"content":"QQ=="');
  });

  it('is independent of key order (property)', () => {
    fc.assert(
      fc.property(configArb, fc.integer(), (config, seed) => {
        let s = seed;
        const random = () => ((s = (s * 1103515245 + 12345) % 2 ** 31) / 2 ** 31 + 1) % 1;
        const json: unknown = JSON.parse(canonicalize(config));
        expect(canonicalStringify(shuffleKeys(json, random))).toBe(canonicalize(config));
      }),
      { numRuns: 300 },
    );
  });

  it('round-trips through parseCanonical exactly (property)', () => {
    fc.assert(
      fc.property(configArb, (config) => {
        const parsed = parseCanonical(canonicalize(config));
        expect(canonicalize(parsed)).toBe(canonicalize(config));
        expect(parsed.files.map((f) => f.content)).toEqual(config.files.map((f) => f.content));
      }),
      { numRuns: 300 },
    );
  });

  it('changes the checksum when any content byte changes (property)', () => {
    const withFile = configArb.filter((c) => c.files.some((f) => f.content.length > 0));
    fc.assert(
      fc.property(withFile, fc.nat(), fc.integer({ min: 1, max: 255 }), (config, pick, delta) => {
        const candidates = config.files.filter((f) => f.content.length > 0);
        const file = candidates[pick % candidates.length];
        if (!file) throw new Error('filtered for a non-empty file');
        const before = checksumOf(config);
        const index = pick % file.content.length;
        const changed = Buffer.from(file.content);
        changed[index] = ((changed[index] ?? 0) + delta) % 256;
        const mutated: ResolvedConfig = {
          ...config,
          files: config.files.map((f) => (f === file ? { ...f, content: changed } : f)),
        };
        expect(checksumOf(mutated)).not.toBe(before);
      }),
      { numRuns: 300 },
    );
  });

  it('changes the checksum when a mode, owner or unit changes', () => {
    const base: OperatingSystemConfigSpec = {
      type: 'ubuntu',
      purpose: 'reconcile',
      files: [{ path: '/etc/a', permissions: '0644', content: { inline: { data: 'a' } } }],
      units: [{ name: 'a.service', content: '[Service]\nExecStart=/bin/true\n' }],
    };
    const sum = (spec: OperatingSystemConfigSpec) => {
      const r = resolve(spec);
      if (!r.ok) throw new Error('resolve failed');
      return checksumOf(r.config);
    };
    const original = sum(base);
    expect(sum(base)).toBe(original);
    expect(sum({ ...base, files: [{ ...base.files![0]!, permissions: '0600' }] })).not.toBe(
      original,
    );
    expect(sum({ ...base, files: [{ ...base.files![0]!, owner: 'kube:kube' }] })).not.toBe(
      original,
    );
    expect(sum({ ...base, units: [{ ...base.units![0]!, enable: false }] })).not.toBe(original);
    // a drift policy is part of what the agent must do, so of the checksum too
    expect(sum({ ...base, driftPolicy: 'Revert' })).not.toBe(original);
    expect(sum({ ...base, files: [{ ...base.files![0]!, driftPolicy: 'Ignore' }] })).not.toBe(
      original,
    );
    expect(sum({ ...base, units: [{ ...base.units![0]!, driftPolicy: 'Revert' }] })).not.toBe(
      original,
    );
  });

  it('writes no drift policy that was not set: older configs keep their checksums', () => {
    const text = canonicalize({
      type: 'x',
      purpose: 'reconcile',
      units: [],
      files: [{ path: '/a', mode: 0o644, user: 'root', group: 'root', content: Buffer.from('') }],
      packages: [],
    });
    expect(text).not.toContain('driftPolicy');
    expect(text).toBe(
      '{"apiVersion":"oscar.dev/v1alpha1","files":[{"content":"","group":"root","mode":420,"path":"/a","user":"root"}],"kind":"ResolvedOperatingSystemConfig","packages":[],"purpose":"reconcile","type":"x","units":[]}',
    );
  });

  it('is the same for specs that differ only in declaration order', () => {
    const files = [
      { path: '/etc/b', content: { inline: { data: 'b' } } },
      { path: '/etc/a', content: { inline: { data: 'YQ==', encoding: 'b64' as const } } },
    ];
    const a = resolve({ type: 'ubuntu', purpose: 'reconcile', files });
    const b = resolve({ type: 'ubuntu', purpose: 'reconcile', files: [...files].reverse() });
    if (!a.ok || !b.ok) throw new Error('resolve failed');
    expect(checksumOf(a.config)).toBe(checksumOf(b.config));
  });

  it('refuses a payload that is not a canonical config', () => {
    expect(() => parseCanonical('{')).toThrow(/not JSON/);
    expect(() => parseCanonical('{"kind":"Other"}')).toThrow(/kind/);
    const good = JSON.parse(
      canonicalize({ type: 'x', purpose: 'reconcile', units: [], files: [], packages: [] }),
    ) as Record<string, unknown>;
    expect(() =>
      parseCanonical(JSON.stringify({ ...good, files: [{ path: '/a', mode: 99999 }] })),
    ).toThrow(/mode/);
  });
});
