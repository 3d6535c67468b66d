/**
 * fast-check generators of renderable configs with odd but legal content: binary and UTF-8
 * bytes (CR, tabs, trailing spaces, non-BMP, NUL), paths with spaces, quotes, backslashes,
 * newlines and non-ASCII, every mode from 0 to 07777 a config may have (api/file-rules.ts), owners by name and by id, unit names with
 * escapes, templates and instances, drop-ins, masks. Shared by the unit round-trip tests and the
 * apply-for-real tests.
 */
import fc from 'fast-check';
import { PROTECTED_PATHS } from '../../api/deep-validate.js';
import { safeMode } from '../../api/file-rules.js';
import type {
  ResolvedConfig,
  ResolvedFile,
  ResolvedPackage,
  ResolvedUnit,
} from '../../api/resolved.js';
import type { Purpose, UnitCommand } from '../../api/schema.js';

// eslint-disable-next-line @typescript-eslint/no-misused-spread -- ASCII only: one character per element
const ODD_CHARS = [...'abcXYZ019 -_.~\'"\\$`:#*?[]{}&;|<>!%=,+@()\t\n', 'é', '中', '😀', '\u00a0'];

const segment = fc
  .array(fc.constantFrom(...ODD_CHARS), { minLength: 1, maxLength: 12 })
  .map((cs) => cs.join(''))
  .filter((s) => s !== '.' && s !== '..');

const plainSegment = fc.stringMatching(/^[a-z0-9][a-z0-9._-]{0,11}$/).filter((s) => s !== '..');

export interface FileOptions {
  /** Only characters every tool path handles plainly (for apply tests through real tools). */
  plainPaths?: boolean;
  /** Users to draw from (and groups, unless `groups` is given). */
  owners?: readonly string[];
  groups?: readonly string[];
  maxBytes?: number;
}

const TOPS = ['/etc/oscar-test', '/opt/odd dir', '/var/lib/x', '/srv', '/usr/local/etc/ü'];

export function pathArb(plain = false): fc.Arbitrary<string> {
  return fc
    .tuple(
      fc.constantFrom(...(plain ? ['/etc/oscar-test', '/opt/app', '/var/lib/x', '/srv/s'] : TOPS)),
      fc.array(plain ? plainSegment : segment, { minLength: 1, maxLength: 3 }),
    )
    .map(([top, segs]) => `${top}/${segs.join('/')}`)
    .filter((p) => !PROTECTED_PATHS.has(p));
}

const textContent = fc
  .array(
    fc.oneof(
      fc.string({ maxLength: 40 }),
      fc.string({ unit: 'grapheme', maxLength: 20 }),
      fc.constantFrom(
        '',
        ' ',
        '  indented',
        '\t',
        'trailing ',
        '\r',
        'key: value',
        '# c',
        '---',
        '\'"',
        '\\',
      ),
    ),
    { maxLength: 12 },
  )
  .chain((lines) => fc.constantFrom('\n', '\r\n').map((nl) => lines.join(nl)))
  .chain((body) => fc.constantFrom('', '\n', '\n\n').map((end) => body + end))
  .map((s) => Buffer.from(s, 'utf8'));

export function contentArb(maxBytes = 2048): fc.Arbitrary<Buffer> {
  return fc.oneof(
    { weight: 4, arbitrary: textContent },
    { weight: 2, arbitrary: fc.uint8Array({ maxLength: maxBytes }).map((a) => Buffer.from(a)) },
    {
      weight: 1,
      // large and compressible: exercises gzip
      arbitrary: fc
        .tuple(fc.string({ minLength: 1, maxLength: 30 }), fc.integer({ min: 20, max: 200 }))
        .map(([s, n]) => Buffer.from(`${s}\n`.repeat(n), 'utf8')),
    },
    { weight: 1, arbitrary: fc.constant(Buffer.alloc(0)) },
  );
}

export const DEFAULT_OWNERS = ['root', 'nobody', 'daemon', '0', '1000', '_apt', 'user.name-1'];

export function fileArb(options: FileOptions = {}): fc.Arbitrary<ResolvedFile> {
  const owners = options.owners ?? DEFAULT_OWNERS;
  return fc.record({
    path: pathArb(options.plainPaths),
    mode: fc.integer({ min: 0, max: 0o7777 }).map(safeMode),
    user: fc.constantFrom(...owners),
    group: fc.constantFrom(...(options.groups ?? owners)),
    content: contentArb(options.maxBytes),
  });
}

const unitBase = fc.oneof(
  fc.stringMatching(/^[a-z][a-z0-9-]{0,10}$/),
  fc.constantFrom('a\\x2db', 'x:y', 'odd_name.v2', 'getty@tty1', 'tmpl@'),
);

const descriptionArb = fc
  .string({ unit: 'grapheme', maxLength: 30 })
  .map((s) => s.replace(/[\r\n\0\\]/g, ' ').trim() || 'test unit');

function unitContent(withInstall: boolean): fc.Arbitrary<string> {
  return descriptionArb.map(
    (d) =>
      `[Unit]\nDescription=${d}\n\n[Service]\nType=oneshot\nExecStart=/bin/true\n` +
      (withInstall ? '\n[Install]\nWantedBy=multi-user.target\n' : ''),
  );
}

const dropInArb = fc.record({
  name: fc.stringMatching(/^[0-9]{2}-[a-z]{1,8}\.conf$/),
  content: fc.constantFrom(
    '[Service]\nEnvironment=A=1\n',
    '[Unit]\nAfter=network.target\n',
    '# comment only\n[Service]\nTimeoutStartSec=5\n',
  ),
});

export const unitArb: fc.Arbitrary<ResolvedUnit> = fc
  .record({
    base: unitBase,
    type: fc.constantFrom('service', 'service', 'timer', 'socket', 'target', 'path'),
    mask: fc.integer({ min: 0, max: 3 }).map((n) => n === 0),
    enable: fc.boolean(),
    withContent: fc.boolean(),
    withInstall: fc.boolean(),
    command: fc.constantFrom<UnitCommand>('start', 'restart', 'stop'),
    dropIns: fc.uniqueArray(dropInArb, { maxLength: 3, selector: (d) => d.name }),
  })
  .chain((r) =>
    unitContent(r.withInstall).map((content) => {
      const unit: ResolvedUnit = {
        name: `${r.base}.${r.type}`,
        enable: r.mask ? false : r.enable,
        mask: r.mask,
        command: r.command,
        onChange: 'restart',
        dropIns: r.mask ? [] : [...r.dropIns].sort((a, b) => (a.name < b.name ? -1 : 1)),
        filePaths: [],
      };
      if (!r.mask && r.withContent) unit.content = content;
      return unit;
    }),
  );

const packageArb: fc.Arbitrary<ResolvedPackage> = fc
  .record({
    // never ending in "-", apt's "remove" (api/constants.ts PATTERNS.packageName)
    name: fc.stringMatching(/^[a-z0-9]([a-z0-9+.-]{0,14}[a-z0-9+.])?$/),
    version: fc.option(fc.stringMatching(/^[0-9][0-9a-z.+~:-]{0,10}$/), { nil: undefined }),
  })
  .map((p) => (p.version === undefined ? { name: p.name } : { name: p.name, version: p.version }));

function byKey<T>(key: (t: T) => string): (a: T, b: T) => number {
  return (a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0);
}

export interface ConfigOptions extends FileOptions {
  types: readonly string[];
  maxFiles?: number;
  maxUnits?: number;
  packages?: boolean;
  cri?: boolean;
}

export function configArb(options: ConfigOptions): fc.Arbitrary<ResolvedConfig> {
  return fc
    .record({
      type: fc.constantFrom(...options.types),
      purpose: fc.constantFrom<Purpose>('provision', 'reconcile'),
      files: fc.uniqueArray(fileArb(options), {
        maxLength: options.maxFiles ?? 6,
        selector: (f) => f.path,
      }),
      units: fc.uniqueArray(unitArb, { maxLength: options.maxUnits ?? 4, selector: (u) => u.name }),
      packages:
        options.packages === false
          ? fc.constant([])
          : fc.uniqueArray(packageArb, { maxLength: 3, selector: (p) => p.name }),
      cri:
        options.cri === false
          ? fc.constant(undefined)
          : fc.option(fc.constantFrom('systemd', 'cgroupfs'), { nil: undefined }),
    })
    .map((r) => {
      // a path cannot be both a file and a directory of another file
      const files = r.files
        .filter((f) => !r.files.some((g) => g !== f && g.path.startsWith(`${f.path}/`)))
        .sort(byKey((f) => f.path));
      const config: ResolvedConfig = {
        type: r.type,
        purpose: r.purpose,
        units: [...r.units].sort(byKey((u) => u.name)),
        files,
        packages: [...r.packages].sort(byKey((p) => p.name)),
      };
      if (r.cri !== undefined) {
        config.cri = { name: 'containerd', cgroupDriver: r.cri };
      }
      return config;
    });
}
