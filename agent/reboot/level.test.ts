import { describe, expect, it } from 'vitest';
import type { ResolvedConfig } from '../../api/resolved.js';
import { plan, type ObservedDisk } from '../plan.js';
import { config, file, unit } from '../testing/fixtures.js';
import { diskOf, nodeFrom } from '../testing/node-model.js';
import { formatDisruption, planDisruption } from './level.js';

/** The disk exactly as `c` left it: no drift, so only the config change plans anything. */
const diskAfter = (c: ResolvedConfig): ObservedDisk => diskOf(nodeFrom(c));

describe('a plan with onChange: reboot', () => {
  const v1 = config(
    [unit('modules.service', { onChange: 'reboot', filePaths: ['/etc/modprobe.d/oscar.conf'] })],
    [file('/etc/modprobe.d/oscar.conf', 'options a b=1\n')],
  );
  const v2 = config(v1.units, [file('/etc/modprobe.d/oscar.conf', 'options a b=2\n')]);

  it('writes the file, restarts nothing (the reboot applies it) and says Reboot', () => {
    const actions = plan(v1, v2, diskAfter(v1));
    expect(actions.map((a) => a.kind)).toEqual(['writeFile']);
    const d = planDisruption(actions, v1, v2);
    expect(formatDisruption(d)).toBe(
      'disruption: Reboot (unit modules.service (onChange: reboot))',
    );
  });

  it('a plan with nothing to do is None, unless the node wants a reboot', () => {
    expect(planDisruption([], v2, v2).level).toBe('None');
    expect(planDisruption([], v2, v2, { rebootRequired: true }).level).toBe('Reboot');
  });

  it('drift repair that starts a unit is Restart even when the config did not change', () => {
    const plain = config([unit('app.service')]);
    expect(
      planDisruption(
        [{ kind: 'start', unit: 'app.service', reason: 'drift: stopped' }],
        plain,
        plain,
      ),
    ).toEqual({ level: 'Restart', reasons: ['the plan restarts or starts units'] });
    expect(
      planDisruption(
        [{ kind: 'enable', unit: 'app.service', reason: 'drift: disabled' }],
        plain,
        plain,
      ).level,
    ).toBe('None');
  });
});
