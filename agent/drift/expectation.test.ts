import { describe, expect, it } from 'vitest';
import { config, file, unit } from '../testing/fixtures.js';
import { expectationOf, pathDrift, sha256, unitStateDrift, type Found } from './expectation.js';
import { parseShow } from '../unit-state.js';

const ids = {
  uid: (u: string) => (u === 'root' ? 0 : u === 'kube' ? 998 : undefined),
  gid: () => 0,
};
const applied = config(
  [unit('a.service'), unit('b.service', { driftPolicy: 'Ignore' }), unit('t@.service')],
  [
    file('/etc/a', 'a\n', { mode: 0o640, user: 'kube' }),
    file('/etc/i', 'i\n', { driftPolicy: 'Ignore' }),
  ],
);
const fileOf = (content: string, mode = 0o640, uid = 998): Found => ({
  kind: 'file',
  sha256: sha256(Buffer.from(content)),
  size: content.length,
  mode,
  uid,
  gid: 0,
});

describe('expectationOf', () => {
  it('every owned path and unit but Ignore ones and templates, with hashes, not contents', () => {
    const e = expectationOf(applied);
    expect([...e.paths.keys()].sort()).toEqual([
      '/etc/a',
      '/etc/systemd/system/a.service',
      '/etc/systemd/system/t@.service',
    ]);
    expect([...e.units.keys()]).toEqual(['a.service']);
    expect(e.paths.get('/etc/a')?.states).toEqual([
      { present: true, sha256: sha256('a\n'), size: 2, mode: 0o640, user: 'kube', group: 'root' },
    ]);
  });

  it('while an apply is unfinished, its states are acceptable too; units it changes are not compared', () => {
    const next = config(
      [unit('a.service', { enable: false })],
      [file('/etc/a', 'a2\n', { mode: 0o640, user: 'kube' })],
    );
    const e = expectationOf(applied, next);
    const a = e.paths.get('/etc/a');
    if (!a) throw new Error('no /etc/a');
    expect(pathDrift(a, fileOf('a\n'), ids)).toBeUndefined();
    expect(pathDrift(a, fileOf('a2\n'), ids)).toBeUndefined();
    expect(pathDrift(a, fileOf('other'), ids)?.reason).toBe('content');
    // a.service's declaration changes (enable): its state is not compared until the apply ends
    expect(e.units.size).toBe(0);
  });
});

describe('pathDrift', () => {
  const a = expectationOf(applied).paths.get('/etc/a');
  if (!a) throw new Error('no /etc/a');
  it('names content, mode and owner, in the expected state’s words', () => {
    expect(pathDrift(a, fileOf('a\n'), ids)).toBeUndefined();
    expect(pathDrift(a, fileOf('b\n', 0o644, 0), ids)).toEqual({
      reason: 'content, mode, owner',
      expected: `sha256:${sha256('a\n').slice(0, 12)} 0640 kube:root`,
      found: `sha256:${sha256('b\n').slice(0, 12)} 0644 0:root`,
    });
    expect(pathDrift(a, { kind: 'missing' }, ids)).toMatchObject({
      reason: 'missing',
      found: 'missing',
    });
    expect(pathDrift(a, { kind: 'other', type: 'fifo' }, ids)).toMatchObject({
      reason: 'notRegularFile',
      found: 'fifo',
    });
  });

  it('owners are not compared without ids (an unprivileged sandbox), nor for a name the node does not know', () => {
    expect(pathDrift(a, fileOf('a\n', 0o640, 0), undefined)).toBeUndefined();
    expect(
      pathDrift(a, fileOf('a\n', 0o640, 0), { uid: () => undefined, gid: () => undefined }),
    ).toBeUndefined();
  });
});

describe('unit states', () => {
  it('parses systemctl show for several units, in the order asked', () => {
    const text =
      'Type=simple\nRemainAfterExit=no\nResult=success\nId=a.service\nLoadState=loaded\nActiveState=active\nSubState=running\nUnitFileState=enabled\n\n' +
      'Type=oneshot\nRemainAfterExit=no\nResult=success\nId=o.service\nLoadState=loaded\nActiveState=inactive\nSubState=dead\nUnitFileState=enabled\n\n' +
      'Type=\nRemainAfterExit=no\nResult=success\nId=gone.service\nLoadState=not-found\nActiveState=inactive\nSubState=dead\nUnitFileState=\n';
    const m = parseShow(text, ['a.service', 'o.service', 'gone.service']);
    expect(m.get('a.service')).toEqual({
      load: 'loaded',
      active: 'active',
      sub: 'running',
      fileState: 'enabled',
      result: 'success',
      restsInactive: false,
    });
    expect(m.get('o.service')?.restsInactive).toBe(true);
    expect(m.get('gone.service')?.load).toBe('not-found');
    expect(() => parseShow(text, ['a.service'])).toThrow(/answered for 3 unit\(s\), asked for 1/);
  });

  it('folds a unit’s findings into one', () => {
    const e = expectationOf(applied).units.get('a.service');
    if (!e) throw new Error('no a.service');
    expect(
      unitStateDrift(e, {
        load: 'masked',
        active: 'failed',
        sub: 'failed',
        fileState: 'masked',
        result: 'exit-code',
        restsInactive: false,
      }),
    ).toEqual({
      reason: 'masked, failed',
      expected: 'not masked, active',
      found: 'masked (masked), failed (exit-code)',
    });
  });
});
