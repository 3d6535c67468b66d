import { describe, expect, it } from 'vitest';
import { disruptionDigests, disruptionOf, levelBetween, atLeast } from './disruption.js';
import type { ResolvedConfig, ResolvedFile, ResolvedUnit } from './resolved.js';
import { validateOperatingSystemConfig } from './validate.js';
import { validateConfig } from './validate-config.js';

const file = (path: string, data: string, extra: Partial<ResolvedFile> = {}): ResolvedFile => ({
  path,
  mode: 0o644,
  user: 'root',
  group: 'root',
  content: Buffer.from(data),
  ...extra,
});

const unit = (name: string, extra: Partial<ResolvedUnit> = {}): ResolvedUnit => ({
  name,
  enable: true,
  mask: false,
  command: 'start',
  onChange: 'restart',
  content: '[Service]\nExecStart=/bin/true\n',
  dropIns: [],
  filePaths: [],
  ...extra,
});

const config = (c: Partial<ResolvedConfig> = {}): ResolvedConfig => ({
  type: 'debian',
  purpose: 'reconcile',
  units: [],
  files: [],
  packages: [],
  ...c,
});

/** The level both ways the code computes it: from configs (node) and from digests (controller). */
function level(from: ResolvedConfig, to: ResolvedConfig, rebootRequired = false): string {
  const byConfig = disruptionOf(from, to, { rebootRequired });
  if (!rebootRequired) {
    expect(levelBetween(disruptionDigests(from), disruptionDigests(to))).toBe(byConfig.level);
  }
  return byConfig.level;
}

describe('disruption levels', () => {
  const base = config({
    files: [
      file('/etc/app.conf', 'a'),
      file('/etc/default/grub.d/oscar.cfg', 'x', { onChange: 'reboot' }),
    ],
    units: [unit('app.service', { filePaths: ['/etc/app.conf'] }), unit('containerd.service')],
    packages: [{ name: 'curl' }],
  });

  it('None: a file no unit reacts to', () => {
    const to = config({ ...base, files: [...base.files, file('/etc/motd', 'hi')] });
    expect(level(base, to)).toBe('None');
    expect(disruptionOf(base, to).reasons).toEqual([]);
  });

  it('Restart: a unit restarts through its filePaths, or a package is installed', () => {
    const to = config({ ...base, files: [file('/etc/app.conf', 'b'), base.files[1]!] });
    expect(level(base, to)).toBe('Restart');
    expect(level(base, config({ ...base, packages: [{ name: 'curl', version: '8' }] }))).toBe(
      'Restart',
    );
  });

  it('Drain: the container runtime restarts, spec.cri changes, its package changes', () => {
    const to = config({
      ...base,
      units: [
        base.units[0]!,
        unit('containerd.service', {
          dropIns: [{ name: 'a.conf', content: '[Service]\nNice=1\n' }],
        }),
      ],
    });
    expect(level(base, to)).toBe('Drain');
    expect(disruptionOf(base, to).reasons).toEqual([
      'container runtime containerd.service restarts (pods stop)',
    ]);
    expect(
      level(base, config({ ...base, cri: { name: 'containerd', cgroupDriver: 'systemd' } })),
    ).toBe('Drain');
    expect(level(base, config({ ...base, packages: [...base.packages, { name: 'runc' }] }))).toBe(
      'Drain',
    );
  });

  it('a runtime unit with onChange none does not drain when only its content changes', () => {
    const from = config({ units: [unit('containerd.service', { onChange: 'none' })] });
    const to = config({
      units: [
        unit('containerd.service', {
          onChange: 'none',
          content: '[Service]\nExecStart=/bin/false\n',
        }),
      ],
    });
    expect(level(from, to)).toBe('None');
  });

  it('Reboot: a file or a unit declared onChange: reboot changes, appears or goes', () => {
    const grub = config({
      ...base,
      files: [base.files[0]!, file('/etc/default/grub.d/oscar.cfg', 'y', { onChange: 'reboot' })],
    });
    expect(level(base, grub)).toBe('Reboot');
    expect(disruptionOf(base, grub).reasons).toEqual([
      'file /etc/default/grub.d/oscar.cfg (onChange: reboot)',
    ]);
    const gone = config({ ...base, files: [base.files[0]!] });
    expect(disruptionOf(base, gone).reasons).toEqual([
      'file /etc/default/grub.d/oscar.cfg (onChange: reboot): removed',
    ]);
    const withUnit = config({
      ...base,
      units: [...base.units, unit('modules.service', { onChange: 'reboot' })],
    });
    expect(level(base, withUnit)).toBe('Reboot');
    // the unit's filePaths count too
    const viaFile = config({
      files: [file('/etc/modprobe.d/x.conf', 'a')],
      units: [unit('m.service', { onChange: 'reboot', filePaths: ['/etc/modprobe.d/x.conf'] })],
    });
    const changed = config({ ...viaFile, files: [file('/etc/modprobe.d/x.conf', 'b')] });
    expect(level(viaFile, changed)).toBe('Reboot');
  });

  it('Reboot when the node says so, whatever the config', () => {
    expect(level(base, base, true)).toBe('Reboot');
    expect(disruptionOf(base, base, { rebootRequired: true }).reasons).toEqual([
      'the node requires a reboot (/var/run/reboot-required)',
    ]);
  });

  it('nothing applied yet compares with an empty node; unknown digests count as changed', () => {
    expect(disruptionOf(undefined, base).level).toBe('Reboot');
    expect(disruptionOf(undefined, config({ files: [file('/etc/x', '1')] })).level).toBe('Restart');
    expect(levelBetween(undefined, disruptionDigests(base))).toBe('Reboot');
    const d = disruptionDigests(base);
    expect(levelBetween(d, { restart: d.restart, drain: d.drain })).toBe('Reboot');
    expect(levelBetween(d, d)).toBe('None');
  });

  it('orders levels', () => {
    expect(atLeast('Reboot', 'Drain')).toBe(true);
    expect(atLeast('Restart', 'Drain')).toBe(false);
    expect(atLeast('None', 'None')).toBe(true);
  });
});

describe('onChange: reboot is validated, naming the field', () => {
  const osc = (spec: Record<string, unknown>) => ({
    apiVersion: 'oscar.dev/v1alpha1',
    kind: 'OperatingSystemConfig',
    metadata: { name: 'n' },
    spec: { type: 'debian', purpose: 'reconcile', ...spec },
  });
  const messages = (doc: unknown) =>
    validateOperatingSystemConfig(doc).map((e) => `${e.path}: ${e.message}`);
  const grubFile = {
    path: '/etc/default/grub.d/oscar.cfg',
    content: { inline: { data: 'GRUB_CMDLINE_LINUX="x"\n' } },
    onChange: 'reboot',
  };

  it('accepts a reboot on a reconcile config', () => {
    expect(
      messages(
        osc({
          files: [grubFile],
          units: [
            { name: 'm.service', onChange: 'reboot', content: '[Service]\nExecStart=/bin/true\n' },
          ],
        }),
      ),
    ).toEqual([]);
  });

  it('refuses a reboot on a provision config', () => {
    const got = messages(
      osc({
        purpose: 'provision',
        files: [grubFile],
        units: [
          { name: 'm.service', onChange: 'reboot', content: '[Service]\nExecStart=/bin/true\n' },
        ],
      }),
    );
    expect(got).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^spec\.units\[0\]\.onChange: "reboot" needs purpose reconcile/),
        expect.stringMatching(/^spec\.files\[0\]\.onChange: "reboot" needs purpose reconcile/),
      ]),
    );
  });

  it('refuses a reboot with nothing to reboot for', () => {
    expect(messages(osc({ units: [{ name: 'm.service', onChange: 'reboot' }] }))).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^spec\.units\[0\]\.onChange: "reboot" has nothing to reboot for/),
      ]),
    );
    expect(
      messages(osc({ units: [{ name: 'm.service', onChange: 'reboot', mask: true }] })),
    ).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^spec\.units\[0\]\.onChange: "reboot" on a masked unit/),
      ]),
    );
  });

  it('the resolved config check agrees (what a node refuses)', () => {
    const errors = validateConfig(
      config({ purpose: 'provision', files: [file('/etc/k', 'x', { onChange: 'reboot' })] }),
    ).map((e) => e.path);
    expect(errors).toEqual(['spec.files[0].onChange']);
    const bad = validateConfig(
      config({ files: [file('/etc/k', 'x', { onChange: 'bogus' as 'reboot' })] }),
    ).map((e) => `${e.path}: ${e.message}`);
    expect(bad).toEqual(['spec.files[0].onChange: must be "reboot" when set (omit it for none)']);
  });
});
