import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ResolvedConfig } from '../api/resolved.js';
import {
  CONTAINERD_CONFIG_PATH,
  CONTAINERD_DROP_IN,
  containerdConfig,
  expand,
  profileFor,
} from './profiles.js';
import { configArb } from './testdata/arbitraries.js';

const empty = (type: string): ResolvedConfig => ({
  type,
  purpose: 'reconcile',
  units: [],
  files: [],
  packages: [],
});

describe('expand', () => {
  it('masks the Flatcar auto-update services', () => {
    const { config, extraUnits, extraFiles } = expand(empty('flatcar'));
    expect(config.units.map((u) => [u.name, u.mask, u.enable])).toEqual([
      ['locksmithd.service', true, false],
      ['update-engine.service', true, false],
    ]);
    expect(extraUnits.map((u) => u.name)).toEqual(['locksmithd.service', 'update-engine.service']);
    expect(extraFiles).toEqual([]);
    expect(expand(empty('ubuntu')).config.units).toEqual([]);
  });

  it('gives containerd its config (SystemdCgroup per cgroupDriver), a drop-in and the package', () => {
    for (const [driver, flag] of [
      ['systemd', 'true'],
      ['cgroupfs', 'false'],
    ] as const) {
      const { config, extraFiles, extraUnits } = expand({
        ...empty('ubuntu'),
        cri: { name: 'containerd', cgroupDriver: driver },
      });
      expect(extraFiles.map((f) => f.path)).toEqual([CONTAINERD_CONFIG_PATH]);
      expect(extraFiles[0]?.content.toString()).toContain(`SystemdCgroup = ${flag}\n`);
      expect(extraFiles[0]?.mode).toBe(0o644);
      const unit = extraUnits[0];
      expect(unit?.name).toBe('containerd.service');
      expect(unit?.content).toBeUndefined();
      expect(unit?.dropIns.map((d) => d.name)).toEqual([CONTAINERD_DROP_IN]);
      expect(unit?.filePaths).toEqual([CONTAINERD_CONFIG_PATH]);
      expect(config.packages).toEqual([{ name: 'containerd' }]);
    }
    // Flatcar ships containerd: no package, but the same file and drop-in
    const flatcar = expand({
      ...empty('flatcar'),
      cri: { name: 'containerd', cgroupDriver: 'systemd' },
    });
    expect(flatcar.config.packages).toEqual([]);
    expect(flatcar.extraFiles.map((f) => f.path)).toEqual([CONTAINERD_CONFIG_PATH]);
  });

  it('lets declarations win: own config file, own unit, own masked unit', () => {
    const own = Buffer.from('version = 2\n');
    const input: ResolvedConfig = {
      ...empty('flatcar'),
      cri: { name: 'containerd', cgroupDriver: 'systemd' },
      files: [
        { path: CONTAINERD_CONFIG_PATH, mode: 0o600, user: 'root', group: 'root', content: own },
      ],
      units: [
        {
          name: 'containerd.service',
          enable: false,
          mask: false,
          command: 'start',
          onChange: 'none',
          dropIns: [{ name: '00-mine.conf', content: '[Service]\n' }],
          filePaths: [],
        },
        {
          name: 'update-engine.service',
          enable: true,
          mask: false,
          command: 'start',
          onChange: 'restart',
          dropIns: [],
          filePaths: [],
        },
      ],
    };
    const before = JSON.stringify(input);
    const { config, extraFiles } = expand(input);
    expect(JSON.stringify(input)).toBe(before); // pure
    expect(extraFiles).toEqual([]);
    expect(config.files[0]?.content).toBe(own);
    const containerd = config.units.find((u) => u.name === 'containerd.service');
    expect(containerd?.enable).toBe(false);
    expect(containerd?.dropIns.map((d) => d.name)).toEqual(['00-mine.conf', CONTAINERD_DROP_IN]);
    expect(config.units.find((u) => u.name === 'update-engine.service')?.mask).toBe(false);
    expect(config.units.find((u) => u.name === 'locksmithd.service')?.mask).toBe(true);
  });

  it('is idempotent and keeps resolve order (property)', () => {
    fc.assert(
      fc.property(configArb({ types: ['ubuntu', 'flatcar', 'generic', 'opensuse'] }), (c) => {
        const once = expand(c).config;
        const twice = expand(once);
        expect(twice.config).toEqual(once);
        expect(twice.extraFiles).toEqual([]);
        const names = once.units.map((u) => u.name);
        expect(names).toEqual([...names].sort());
        const paths = once.files.map((f) => f.path);
        expect(paths).toEqual([...paths].sort());
      }),
      { numRuns: 200 },
    );
  });

  it('knows each OS package manager', () => {
    expect(profileFor('ubuntu').packageManager).toBe('apt');
    expect(profileFor('debian').packageManager).toBe('apt');
    expect(profileFor('opensuse').packageManager).toBe('zypper');
    expect(profileFor('flatcar').hasPackages).toBe(false);
    expect(profileFor('generic').packageManager).toBeUndefined();
    expect(containerdConfig({ name: 'containerd', cgroupDriver: 'systemd' })).toMatch(
      /^# .*\nversion = 2\n/,
    );
  });
});
