import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ResolvedConfig, ResolvedFile, ResolvedUnit } from '../api/resolved.js';
import { checkAdditions, withAdditions } from './additions.js';
import { expand } from './profiles.js';
import { configArb } from './testdata/arbitraries.js';

const base: ResolvedConfig = {
  type: 'acme',
  purpose: 'reconcile',
  units: [],
  files: [{ path: '/etc/b', mode: 0o644, user: 'root', group: 'root', content: Buffer.from('b') }],
  packages: [{ name: 'curl' }],
};
const file = (path: string, content: string): ResolvedFile => ({
  path,
  mode: 0o600,
  user: 'root',
  group: 'root',
  content: Buffer.from(content),
});
const masked = (name: string): ResolvedUnit => ({
  name,
  enable: false,
  mask: true,
  command: 'stop',
  onChange: 'none',
  dropIns: [],
  filePaths: [],
});

describe('withAdditions', () => {
  it('lays extra files over declared ones by path and adds units, in stable order', () => {
    const merged = withAdditions(base, {
      extraUnits: [masked('auto-update.service')],
      extraFiles: [file('/etc/b', 'replaced'), file('/etc/a', 'added')],
    });
    expect(merged.files.map((f) => `${f.path}=${f.content.toString()}`)).toEqual([
      '/etc/a=added',
      '/etc/b=replaced',
    ]);
    expect(merged.units.map((u) => u.name)).toEqual(['auto-update.service']);
    expect(merged.packages).toEqual([{ name: 'curl' }]);
    expect(base.files).toHaveLength(1); // the input is not changed
  });

  it('is the identity without additions', () => {
    expect(withAdditions(base, { extraUnits: [], extraFiles: [] })).toBe(base);
  });

  it("gives a built-in's OS profile result: the config plus what the profile added", () => {
    fc.assert(
      fc.property(
        configArb({ types: ['ubuntu', 'flatcar', 'opensuse', 'generic'], maxFiles: 3 }),
        (config) => {
          const expanded = expand(config);
          expect(withAdditions(config, expanded)).toEqual({
            ...expanded.config,
            packages: config.packages,
          });
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('checkAdditions', () => {
  it('names the added file or unit that cannot be applied', () => {
    const merged = withAdditions(base, {
      extraUnits: [masked('no-suffix')],
      extraFiles: [file('etc/relative', 'x')],
    });
    const problems = checkAdditions(merged);
    expect(problems.some((p) => p.startsWith('file "etc/relative": path: '))).toBe(true);
    expect(problems.some((p) => p.startsWith('unit "no-suffix": '))).toBe(true);
  });

  it('has nothing to say about a good config', () => {
    expect(checkAdditions(base)).toEqual([]);
  });
});
