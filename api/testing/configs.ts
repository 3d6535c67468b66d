/**
 * Test helpers for the two layers of validation: the OperatingSystemConfig document that declares
 * exactly a given resolved config, and a generator of resolved configs that mixes legal values with
 * the hostile ones a tampered Secret or a careless operator could bring (paths that climb out, are
 * relative or too long, files that must also be directories, unit names with "/", modes out of
 * range, owners and packages that are not names).
 */
import fc from 'fast-check';
import { API_VERSION, CGROUP_DRIVERS, ON_CHANGE, UNIT_COMMANDS } from '../constants.js';
import { safeMode } from '../file-rules.js';
import {
  formatMode,
  type ResolvedConfig,
  type ResolvedFile,
  type ResolvedUnit,
} from '../resolved.js';

/**
 * An OperatingSystemConfig document declaring exactly `config` (inline contents, every unit field
 * written out, so nothing is left to defaults).
 */
export function documentOf(config: ResolvedConfig): unknown {
  return {
    apiVersion: API_VERSION,
    kind: 'OperatingSystemConfig',
    metadata: { name: 'x', namespace: 'default' },
    spec: {
      type: config.type,
      purpose: config.purpose,
      ...(config.format ? { format: config.format } : {}),
      ...(config.cri ? { cri: config.cri } : {}),
      packages: config.packages,
      files: config.files.map((f) => ({
        path: f.path,
        permissions: Number.isInteger(f.mode) && f.mode >= 0 ? formatMode(f.mode) : String(f.mode),
        owner: `${f.user}:${f.group}`,
        content: { inline: { encoding: 'b64', data: f.content.toString('base64') } },
      })),
      units: config.units.map((u) => ({
        name: u.name,
        mask: u.mask,
        enable: u.enable,
        command: u.command,
        onChange: u.onChange,
        ...(u.content === undefined ? {} : { content: u.content }),
        dropIns: u.dropIns,
        filePaths: u.filePaths,
      })),
    },
  };
}

const LONG_NAME = 'n'.repeat(256);
const LONG_UTF8_NAME = 'é'.repeat(128); // 256 bytes in 128 characters

const GOOD_PATHS = [
  '/etc/app.conf',
  '/etc/app',
  '/etc/app/inner.conf',
  '/etc/kubernetes/kubelet.conf',
  '/home/core/.ssh/authorized_keys',
  '/opt/odd dir/ü.txt',
  `/opt/${'n'.repeat(255)}`,
  '/var/lib/oscarish',
  '/etc/systemd/system/x.service.d',
  '/etc/systemd/system/x.service',
  '/etc/systemd/system/x.service/inner',
  '/etc/systemd/system/a.service.d/10-a.conf',
];

const HOSTILE_PATHS = [
  '/../../x',
  '/etc/../shadow',
  'relative/x',
  '',
  '/etc/',
  '/etc//x',
  '/etc/./x',
  '/proc/sys/x',
  '/etc',
  '/var/lib/oscar',
  '/var/lib/oscar/last-applied.json',
  `/opt/${LONG_NAME}`,
  `/opt/${LONG_UTF8_NAME}/x`,
  '/etc/a\0b',
  '/etc/a\rb',
  '/etc/\u202egnp.sh',
  '/etc/ssh/sshd_config\u200b',
  '/etc/cafe\u0301',
  '/etc/a\ud800',
];

const pathArb = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...GOOD_PATHS) },
  { weight: 1, arbitrary: fc.constantFrom(...HOSTILE_PATHS) },
);

const modeArb = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 0, max: 0o7777 }).map(safeMode) },
  { weight: 1, arbitrary: fc.constantFrom(0o10000, -1, 1.5, 0o666, 0o4775) },
);

const ownerArb = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.constantFrom(
      ['root', 'root'],
      ['1000', '1000'],
      ['kube', 'kube'],
      ['core', 'root'],
    ),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      ['a b', 'x'],
      ['', 'x'],
      ['x', 'a:b'],
      ['-x', 'root'],
      ['x'.repeat(130), 'y'],
      ['4294967295', '0'],
    ),
  },
);

const fileArb: fc.Arbitrary<ResolvedFile> = fc
  .record({
    path: pathArb,
    mode: modeArb,
    owner: ownerArb,
    content: fc.uint8Array({ maxLength: 64 }).map((a) => Buffer.from(a)),
  })
  .map(({ path, mode, owner: [user = 'root', group = 'root'], content }) => ({
    path,
    mode,
    user,
    group,
    content,
  }));

const UNIT_NAMES = [
  'a.service',
  'x.service',
  'y.socket',
  'y.service',
  'getty@.service',
  'getty@tty1.service',
  `${'u'.repeat(246)}.service`, // 254 characters: a name, but its "NAME.d" is too long
];
const HOSTILE_UNIT_NAMES = [
  'a/b.service',
  'kubelet',
  'x.Service',
  '@x.service',
  '../x.service',
  '',
];

const UNIT_TEXTS = [
  '[Unit]\nDescription=x\n[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n',
  '[Service]\nExecStart=/bin/sleep infinity\nExecReload=/bin/true\n',
  '[Service]\nExecStart=/bin/true\n',
];
const HOSTILE_UNIT_TEXTS = [
  'not a unit',
  '[Service\nExecStart=/bin/true\n',
  'ExecStart=/bin/true\n',
];

const dropInArb = fc.record({
  name: fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom('10-a.conf', '20-b.conf') },
    { weight: 1, arbitrary: fc.constantFrom('a/b.conf', '.hidden.conf', 'x.txt', '.conf') },
  ),
  content: fc.oneof(
    {
      weight: 4,
      arbitrary: fc.constantFrom(
        '[Service]\nEnvironment=A=1\n',
        '[Service]\nExecReload=/bin/true\n',
      ),
    },
    { weight: 1, arbitrary: fc.constantFrom(...HOSTILE_UNIT_TEXTS) },
  ),
});

function unitArb(filePaths: readonly string[]): fc.Arbitrary<ResolvedUnit> {
  return fc
    .record({
      name: fc.oneof(
        { weight: 5, arbitrary: fc.constantFrom(...UNIT_NAMES) },
        { weight: 1, arbitrary: fc.constantFrom(...HOSTILE_UNIT_NAMES) },
      ),
      enable: fc.boolean(),
      mask: fc.oneof(
        { weight: 5, arbitrary: fc.constant(false) },
        { weight: 1, arbitrary: fc.constant(true) },
      ),
      command: fc.constantFrom(...UNIT_COMMANDS),
      onChange: fc.constantFrom(...ON_CHANGE),
      content: fc.oneof(
        { weight: 2, arbitrary: fc.constant(undefined) },
        { weight: 4, arbitrary: fc.constantFrom(...UNIT_TEXTS) },
        { weight: 1, arbitrary: fc.constantFrom(...HOSTILE_UNIT_TEXTS) },
      ),
      dropIns: fc.array(dropInArb, { maxLength: 2 }),
      filePaths: fc.uniqueArray(fc.constantFrom(...filePaths, '/missing/file'), { maxLength: 2 }),
    })
    .map((u) => {
      const unit: ResolvedUnit = {
        name: u.name,
        enable: u.enable,
        mask: u.mask,
        command: u.command,
        onChange: u.onChange,
        dropIns: u.dropIns,
        filePaths: u.filePaths,
      };
      if (u.content !== undefined) unit.content = u.content;
      return unit;
    });
}

const packageArb = fc.record(
  {
    name: fc.oneof(
      { weight: 4, arbitrary: fc.constantFrom('curl', 'kubelet', 'containerd') },
      { weight: 1, arbitrary: fc.constantFrom('bad name', '-x', '', 'a'.repeat(254)) },
    ),
    version: fc.oneof(
      { weight: 4, arbitrary: fc.constantFrom('1.0', '1.31.2-1.1') },
      { weight: 1, arbitrary: fc.constantFrom('bad version', '1.0;rm') },
    ),
  },
  { requiredKeys: ['name'] },
);

/**
 * Resolved configs that are often valid and often not, in every way the two validators must agree
 * on. Contents stay small and unit texts never empty: sizes near the limits and `content: ""` are
 * tested on their own.
 */
export function hostileConfigArb(): fc.Arbitrary<ResolvedConfig> {
  return fc
    .record({
      type: fc.oneof(
        { weight: 6, arbitrary: fc.constantFrom('ubuntu', 'debian', 'generic', 'flatcar') },
        { weight: 1, arbitrary: fc.constantFrom('Ubuntu', '', 'a'.repeat(64), '-x') },
      ),
      purpose: fc.constantFrom('provision' as const, 'reconcile' as const),
      files: fc.array(fileArb, { maxLength: 4 }),
      packages: fc.array(packageArb, { maxLength: 2 }),
      cri: fc.option(
        fc.record({
          name: fc.constant('containerd' as const),
          cgroupDriver: fc.constantFrom(...CGROUP_DRIVERS),
        }),
        { nil: undefined },
      ),
    })
    .chain((c) =>
      fc.array(unitArb(c.files.map((f) => f.path)), { maxLength: 3 }).map((units) => {
        const config: ResolvedConfig = {
          type: c.type,
          purpose: c.purpose,
          units,
          files: c.files,
          packages: c.packages,
        };
        if (c.cri) config.cri = c.cri;
        return config;
      }),
    );
}
