// The disruption digest (api/disruption.ts) against the planner that decides: wherever the digest
// says two configs disturb nothing, the planner's plan from one to the other starts, stops,
// restarts, reloads, enables, disables or masks no unit and installs no package.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { disruptionDigest } from '../../api/disruption.js';
import type { ResolvedConfig, ResolvedFile, ResolvedUnit } from '../../api/resolved.js';
import { isUnitAction, plan } from '../plan.js';
import { config, file, unit } from '../testing/fixtures.js';
import { diskOf, nodeFrom } from '../testing/node-model.js';

const FILES = ['/etc/f1', '/etc/f2', '/var/lib/f3'];
const UNITS = ['a.service', 'b.service', 'web.socket', 'web.service'];

const arbFile = (path: string): fc.Arbitrary<ResolvedFile> =>
  fc.record({
    path: fc.constant(path),
    mode: fc.constantFrom(0o644, 0o600),
    user: fc.constant('root'),
    group: fc.constant('root'),
    content: fc.constantFrom('x', 'y').map((s) => Buffer.from(s)),
  });

const arbConfig: fc.Arbitrary<ResolvedConfig> = fc
  .tuple(fc.subarray(FILES), fc.subarray(UNITS), fc.subarray(['p1', 'p2']))
  .chain(([paths, names, packages]) =>
    fc.record({
      files: fc.tuple(...paths.map(arbFile)),
      packages: fc.constant(packages.map((name) => ({ name }))),
      units: fc.tuple(
        ...names.map((name) =>
          fc
            .record({
              mask: fc.integer({ min: 0, max: 9 }).map((n) => n < 2),
              enable: fc.boolean(),
              command: fc.constantFrom('start', 'restart', 'stop'),
              onChange: fc.constantFrom('restart', 'reload', 'none', 'stopStart'),
              content: fc.option(fc.constantFrom('v1', 'v2'), { nil: undefined }),
              dropIn: fc.option(fc.constantFrom('p', 'q'), { nil: undefined }),
              filePaths: fc.subarray(paths),
            })
            .map((u): ResolvedUnit => ({
              name,
              enable: u.mask ? false : u.enable,
              mask: u.mask,
              command: u.command,
              onChange: u.onChange,
              ...(u.mask || u.content === undefined ? {} : { content: u.content }),
              dropIns: u.dropIn === undefined ? [] : [{ name: '10-a.conf', content: u.dropIn }],
              filePaths: [...u.filePaths].sort(),
            })),
        ),
      ),
    }),
  )
  .map((r) => ({ ...config(r.units, r.files), packages: r.packages }));

/** A second config near the first: same units, some file contents flipped. */
const arbPair = arbConfig.chain((a) =>
  fc
    .tuple(
      fc.constant(a),
      fc.array(fc.boolean(), { minLength: a.files.length, maxLength: a.files.length }),
      fc.boolean(),
    )
    .map(([first, flips, extraFile]) => {
      const files = first.files.map((f, i) =>
        flips[i] === true ? { ...f, content: Buffer.from(`${f.content.toString()}!`) } : f,
      );
      if (extraFile) files.push(file('/etc/unreferenced', 'new'));
      return [first, { ...first, files }] as const;
    }),
);

function disturbs(from: ResolvedConfig, to: ResolvedConfig): string[] {
  return plan(from, to, diskOf(nodeFrom(from)))
    .filter((a) => isUnitAction(a) || a.kind === 'installPackages')
    .map((a) => (isUnitAction(a) ? `${a.kind} ${a.unit}` : a.kind));
}

describe('disruptionDigest', () => {
  it('equal digests: the plan between the configs touches no unit and installs nothing', () => {
    let equalCases = 0;
    fc.assert(
      fc.property(fc.oneof(arbPair, fc.tuple(arbConfig, arbConfig)), ([a, b]) => {
        if (disruptionDigest(a) !== disruptionDigest(b)) return;
        equalCases++;
        expect(disturbs(a, b)).toEqual([]);
      }),
      { numRuns: 2000 },
    );
    expect(equalCases).toBeGreaterThan(200); // the property was exercised, not vacuous
  });

  it('a file no unit lists does not count; one a restarting unit lists does', () => {
    const a = config(
      [unit('a.service', { filePaths: ['/etc/a.conf'] })],
      [file('/etc/a.conf', '1'), file('/etc/motd', 'hello')],
    );
    const motd = { ...a, files: [a.files[0] as ResolvedFile, file('/etc/motd', 'bye')] };
    expect(disruptionDigest(motd)).toBe(disruptionDigest(a));
    const conf = { ...a, files: [file('/etc/a.conf', '2'), a.files[1] as ResolvedFile] };
    expect(disruptionDigest(conf)).not.toBe(disruptionDigest(a));
    expect(disturbs(a, conf)).toEqual(['restart a.service']);
  });

  it('onChange none: a unit that changes restarts nothing, and the digest agrees', () => {
    const a = config(
      [unit('a.service', { onChange: 'none', filePaths: ['/etc/a.conf'] })],
      [file('/etc/a.conf', '1')],
    );
    const b = config(
      [unit('a.service', { onChange: 'none', filePaths: ['/etc/a.conf'] })],
      [file('/etc/a.conf', '2')],
    );
    expect(disruptionDigest(a)).toBe(disruptionDigest(b));
    expect(disturbs(a, b)).toEqual([]);
  });

  it('a new package or unit is disruptive', () => {
    const a = config([unit('a.service')]);
    expect(disruptionDigest({ ...a, packages: [{ name: 'jq' }] })).not.toBe(disruptionDigest(a));
    expect(disruptionDigest(config([unit('a.service'), unit('b.service')]))).not.toBe(
      disruptionDigest(a),
    );
  });
});
