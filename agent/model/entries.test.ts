import { describe, expect, it } from 'vitest';
import { freezeConfig } from '../../api/resolved.js';
import { config, file, unit } from '../testing/fixtures.js';
import { entriesOf } from './entries.js';
import { policiesOf } from './repair.js';

const build = () =>
  config(
    [unit('a.service', { dropIns: [{ name: '10-x.conf', content: 'x' }] })],
    [file('/etc/a.conf', 'a')],
  );

describe('entriesOf and policiesOf', () => {
  it('are built once for a frozen (checked) config, and afresh for one that may still change', () => {
    const frozen = freezeConfig(build());
    expect(entriesOf(frozen)).toBe(entriesOf(frozen));
    expect(policiesOf(frozen)).toBe(policiesOf(frozen));
    expect([...entriesOf(frozen).keys()]).toEqual([
      '/etc/a.conf',
      '/etc/systemd/system/a.service',
      '/etc/systemd/system/a.service.d/10-x.conf',
    ]);

    const open = build();
    const before = entriesOf(open);
    expect(policiesOf(open).paths.get('/etc/a.conf')).toBe('Report');
    open.files.push(file('/etc/b.conf', 'b'));
    open.driftPolicy = 'Revert';
    expect(entriesOf(open)).not.toBe(before);
    expect(entriesOf(open).has('/etc/b.conf')).toBe(true);
    expect(policiesOf(open).paths.get('/etc/a.conf')).toBe('Revert');
  });
});
