import { describe, expect, it } from 'vitest';
import { config, file, unit } from '../testing/fixtures.js';
import { policiesOf, repairFor, RevertBackoff } from './policy.js';

const c = config(
  [
    unit('r.service', { driftPolicy: 'Revert', dropIns: [{ name: '10-a.conf', content: 'x' }] }),
    unit('i.service', { driftPolicy: 'Ignore' }),
    unit('d.service'),
    unit('m.service', { mask: true, enable: false, content: undefined }),
  ],
  [file('/etc/r', 'r', { driftPolicy: 'Revert' }), file('/etc/i', 'i', { driftPolicy: 'Ignore' })],
);

describe('policiesOf', () => {
  it("a file's or unit's own policy, else the config's, else Report; a unit's covers its unit file and drop-ins", () => {
    const p = policiesOf({ ...c, driftPolicy: 'Revert' });
    expect(Object.fromEntries(p.paths)).toEqual({
      '/etc/r': 'Revert',
      '/etc/i': 'Ignore',
      '/etc/systemd/system/r.service': 'Revert',
      '/etc/systemd/system/r.service.d/10-a.conf': 'Revert',
      '/etc/systemd/system/i.service': 'Ignore',
      '/etc/systemd/system/d.service': 'Revert',
    });
    expect(Object.fromEntries(p.units)).toEqual({
      'r.service': 'Revert',
      'i.service': 'Ignore',
      'd.service': 'Revert',
      'm.service': 'Revert',
    });
    expect(policiesOf(c).units.get('d.service')).toBe('Report');
  });
});

describe('repairFor', () => {
  it('an apply writes back every drifted path but Ignore ones, and acts on the state of Revert units only', () => {
    const r = repairFor(c, 'apply');
    expect(['/etc/r', '/etc/i', '/etc/systemd/system/d.service', '/nope'].map(r.path)).toEqual([
      true,
      false,
      true,
      true,
    ]);
    expect(['r.service', 'i.service', 'd.service'].map(r.unit)).toEqual([true, false, false]);
  });

  it('a revert repairs Revert paths and units only', () => {
    const r = repairFor(c, 'revert');
    expect(['/etc/r', '/etc/i', '/etc/systemd/system/d.service'].map(r.path)).toEqual([
      true,
      false,
      false,
    ]);
    expect(['r.service', 'i.service', 'd.service'].map(r.unit)).toEqual([true, false, false]);
  });

  it("a revert with a scope (the monitor's Revert drift) repairs only what it names", () => {
    const all = { ...c, driftPolicy: 'Revert' as const, packages: [{ name: 'chrony' }] };
    const r = repairFor(all, 'revert', {
      paths: new Set(['/etc/r', '/etc/i']),
      units: new Set(['d.service']),
      packages: new Set(),
    });
    // in the scope and Revert; the Ignore path stays unrepaired even when named
    expect(['/etc/r', '/etc/i', '/etc/systemd/system/d.service'].map(r.path)).toEqual([
      true,
      false,
      false,
    ]);
    expect(['r.service', 'd.service'].map(r.unit)).toEqual([false, true]);
    expect(r.package('chrony')).toBe(false);
    // an apply ignores a scope: it makes the node carry all it declares
    expect(repairFor(all, 'apply').path('/etc/systemd/system/d.service')).toBe(true);
  });
});

describe('RevertBackoff', () => {
  it('the first revert at once, then base, 2×base … up to max while drift keeps coming back; quiet resets it', () => {
    const b = new RevertBackoff({ baseMs: 1_000, maxMs: 4_000, quietMs: 60_000 });
    expect(b.delay(0)).toBe(0);
    b.ran(0);
    expect(b.delay(200)).toBe(800);
    b.ran(1_000);
    expect(b.delay(1_000)).toBe(2_000);
    b.ran(3_000);
    expect(b.delay(3_000)).toBe(4_000);
    b.ran(7_000);
    expect(b.delay(7_000)).toBe(4_000); // max
    b.ran(11_000);
    expect(b.delay(71_000)).toBe(0); // a minute of quiet
    b.ran(71_000);
    expect(b.delay(71_000)).toBe(1_000);
  });
});
