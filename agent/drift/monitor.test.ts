// The drift monitor on a real file system (a directory root in tmpdir) with its real inotify
// watcher: random sequences of edits, replace-by-rename, deletions, chmods and directory removals
// on owned and foreign paths must end with exactly the owned paths that differ reported.
import fc from 'fast-check';
import {
  appendFileSync,
  chmodSync,
  closeSync,
  existsSync,
  linkSync,
  openSync,
  writeSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ResolvedConfig } from '../../api/resolved.js';
import { createLogger, silentLogger } from '../../log/logger.js';
import { entriesOf } from '../plan.js';
import { config, file, unit } from '../testing/fixtures.js';
import { DriftMonitor, type DriftReport } from './monitor.js';
import { RevertBackoff } from './policy.js';
import type { ObservedUnit } from '../model/observed.js';
import type { UnitStateReader } from '../unit-state.js';
import { sleep } from '../../api/util.js';

let root: string;
const monitors: DriftMonitor[] = [];

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'oscar-drift-'));
});

afterEach(async () => {
  for (const m of monitors.splice(0)) await m.stop();
  await rm(root, { recursive: true, force: true });
});

/** Writes `c` into the root as an apply would (mode set explicitly, whatever the umask). */
function lay(c: ResolvedConfig): void {
  for (const f of entriesOf(c).values()) {
    const p = join(root, f.path);
    mkdirSync(dirname(p), { recursive: true });
    writeFileSync(p, f.content);
    chmodSync(p, f.mode);
  }
}

interface Harness {
  monitor: DriftMonitor;
  reports: DriftReport[];
  reverts: { n: number };
  /** The paths and units reported drifted now. */
  drifted(): string[];
}

function harness(opts: Partial<ConstructorParameters<typeof DriftMonitor>[0]> = {}): Harness {
  const reports: DriftReport[] = [];
  const reverts = { n: 0 };
  const monitor = new DriftMonitor({
    root,
    owners: true,
    auditIntervalMs: 0,
    debounceMs: 20,
    packageQuietMs: 50,
    report: (r) => reports.push(r),
    requestRevert: () => reverts.n++,
    log: silentLogger(),
    ...opts,
  });
  monitors.push(monitor);
  return {
    monitor,
    reports,
    reverts,
    drifted: () => monitor.drifted.map((i) => i.key).sort(),
  };
}

/** Lets inotify deliver what the synchronous file operations caused, then waits for the checks. */
async function settle(m: DriftMonitor): Promise<void> {
  await sleep(30);
  await m.idle();
}

/**
 * Settles, then waits (at most 10 s) until exactly `want` is drifted, and asserts it: on a loaded
 * machine inotify's events may reach the process after settle's 30 ms (its timers run before
 * its I/O), so a check of what they name may not have begun yet.
 */
async function drifts(h: Harness, want: readonly string[], why?: string): Promise<void> {
  await until(h, () => JSON.stringify(h.drifted()) === JSON.stringify(want));
  expect(h.drifted(), why).toEqual(want);
}

/** Settles, then waits (at most 10 s) until `test` holds; the caller asserts what it needs. */
async function until(h: Harness, test: () => boolean): Promise<void> {
  await settle(h.monitor);
  for (let waited = 0; !test() && waited < 10_000; waited += 20) {
    await sleep(20);
    await h.monitor.idle();
  }
}

const OWNED = ['/etc/app/a.conf', '/etc/app/b.conf', '/opt/x/y/c.conf'];
const FOREIGN = ['/etc/app/foreign.conf', '/etc/other/f.conf', '/opt/x/y/z.conf'];
const DIRS = ['/etc/app', '/opt/x', '/opt/x/y', '/etc/other'];

const applied = config(
  [],
  [
    file('/etc/app/a.conf', 'a\n', { mode: 0o640 }),
    file('/etc/app/b.conf', 'b\n'),
    file('/opt/x/y/c.conf', 'c\n', { mode: 0o600 }),
  ],
);

/** Hard links to the owned files, made at start in a directory oscar does not watch. */
const LINKS = '/var/tmp/links';
const linkOf = (path: string): string => `${LINKS}/${path.replaceAll('/', '_')}`;

type Op =
  | { kind: 'edit' | 'replace'; path: string; data: string }
  /** A write or chmod through the hard link: the owned file's inode, unless it was replaced. */
  | { kind: 'linkEdit'; path: string; data: string }
  | { kind: 'linkChmod'; path: string; mode: number }
  | { kind: 'delete'; path: string }
  | { kind: 'chmod'; path: string; mode: number }
  | { kind: 'rmdir'; dir: string };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    kind: fc.constantFrom('edit' as const, 'replace' as const),
    path: fc.constantFrom(...OWNED, ...FOREIGN),
    // the original content comes up often: an edit back to it is no drift
    data: fc.constantFrom('a\n', 'b\n', 'c\n', 'changed\n', ''),
  }),
  fc.record({ kind: fc.constant('delete' as const), path: fc.constantFrom(...OWNED, ...FOREIGN) }),
  fc.record({
    kind: fc.constant('chmod' as const),
    path: fc.constantFrom(...OWNED, ...FOREIGN),
    mode: fc.constantFrom(0o640, 0o644, 0o600, 0o666),
  }),
  fc.record({ kind: fc.constant('rmdir' as const), dir: fc.constantFrom(...DIRS) }),
  fc.record({
    kind: fc.constant('linkEdit' as const),
    path: fc.constantFrom(...OWNED),
    data: fc.constantFrom('changed\n', ''),
  }),
  fc.record({
    kind: fc.constant('linkChmod' as const),
    path: fc.constantFrom(...OWNED),
    mode: fc.constantFrom(0o640, 0o666),
  }),
);

function linkAll(): void {
  mkdirSync(join(root, LINKS), { recursive: true });
  for (const p of OWNED) linkSync(join(root, p), join(root, linkOf(p)));
}

function run(op: Op): void {
  if (op.kind === 'rmdir') {
    rmSync(join(root, op.dir), { recursive: true, force: true });
    return;
  }
  const p = join(root, op.path);
  switch (op.kind) {
    case 'linkEdit':
      appendFileSync(join(root, linkOf(op.path)), op.data);
      return;
    case 'linkChmod':
      chmodSync(join(root, linkOf(op.path)), op.mode);
      return;
    case 'edit': {
      const existed = existsSync(p);
      mkdirSync(dirname(p), { recursive: true });
      writeFileSync(p, op.data);
      if (!existed) chmodSync(p, 0o644);
      return;
    }
    case 'replace': {
      mkdirSync(dirname(p), { recursive: true });
      const tmp = join(dirname(p), `.${String(Math.random()).slice(2)}.tmp`);
      writeFileSync(tmp, op.data);
      chmodSync(tmp, 0o644);
      renameSync(tmp, p);
      return;
    }
    case 'delete':
      rmSync(p, { force: true });
      return;
    case 'chmod':
      if (existsSync(p)) chmodSync(p, op.mode);
  }
}

/** The owned paths whose state on disk differs from what was applied. */
function expectedDrift(): string[] {
  return applied.files
    .filter((f) => {
      const p = join(root, f.path);
      if (!existsSync(p)) return true;
      return !readFileSync(p).equals(f.content) || (statSync(p).mode & 0o7777) !== f.mode;
    })
    .map((f) => `path:${f.path}`)
    .sort();
}

describe('DriftMonitor on a real file system', () => {
  it('reports exactly the owned paths that differ after random edits (by name and through hard links), renames, deletions, chmods and directory removals — foreign paths never (property, inotify only)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 8 }), async (ops) => {
        await rm(root, { recursive: true, force: true });
        mkdirSync(root);
        lay(applied);
        linkAll();
        for (const f of FOREIGN) run({ kind: 'edit', path: f, data: 'foreign\n' });
        const h = harness();
        await h.monitor.start(applied);
        expect(h.drifted()).toEqual([]);
        for (const op of ops) run(op);
        await drifts(h, expectedDrift(), JSON.stringify(ops));
        for (const r of h.reports) for (const i of r.added) expect(OWNED).toContain(i.path);
        // and back: the applied state again resolves everything, as the watcher sees it
        lay(applied);
        await drifts(h, []);
        await h.monitor.stop();
        monitors.splice(monitors.indexOf(h.monitor), 1);
      }),
      { numRuns: 40 },
    );
  });

  it('says what differs, with expected and found hashes, modes and owners', async () => {
    lay(applied);
    const h = harness();
    await h.monitor.start(applied);
    expect(h.reports).toMatchObject([{ trigger: 'start', items: [] }]); // where things stand
    h.reports.length = 0;
    writeFileSync(join(root, '/etc/app/a.conf'), 'tampered\n');
    chmodSync(join(root, '/opt/x/y/c.conf'), 0o644);
    rmSync(join(root, '/etc/app/b.conf'));
    await drifts(h, ['path:/etc/app/a.conf', 'path:/etc/app/b.conf', 'path:/opt/x/y/c.conf']);
    const byPath = new Map(h.monitor.drifted.map((i) => [i.path, i]));
    expect(byPath.get('/etc/app/a.conf')).toMatchObject({
      reason: 'content',
      expected: expect.stringMatching(/^sha256:[0-9a-f]{12} 0640 root:root$/) as string,
      found: expect.stringMatching(/^sha256:[0-9a-f]{12} 0640 root:root$/) as string,
      policy: 'Report',
    });
    expect(byPath.get('/etc/app/a.conf')?.expected).not.toBe(byPath.get('/etc/app/a.conf')?.found);
    expect(byPath.get('/opt/x/y/c.conf')).toMatchObject({ reason: 'mode' });
    expect(byPath.get('/opt/x/y/c.conf')?.found).toMatch(/ 0644 root:root$/);
    expect(byPath.get('/etc/app/b.conf')).toMatchObject({ reason: 'missing', found: 'missing' });
    // a symlink where the file was: reported as one, never followed
    rmSync(join(root, '/etc/app/a.conf'));
    symlinkSync('/etc/passwd', join(root, '/etc/app/a.conf'));
    await until(h, () => h.monitor.drifted.some((i) => i.found === 'symlink'));
    expect(h.monitor.drifted.find((i) => i.path === '/etc/app/a.conf')).toMatchObject({
      reason: 'notRegularFile',
      found: 'symlink',
    });
    // one report per change, listing what appeared
    expect(
      h.reports
        .at(0)
        ?.added.map((i) => i.path)
        .sort(),
    ).toEqual(['/etc/app/a.conf', '/etc/app/b.conf', '/opt/x/y/c.conf']);
    expect(h.reports.at(0)?.trigger).toBe('watch');
  });

  it('sees an edit through any name of a file: a hard link, an open descriptor, a link to the file that replaced it', async () => {
    lay(applied);
    linkAll();
    const h = harness();
    await h.monitor.start(applied);
    expect(h.monitor.watchedFiles).toBe(OWNED.length);
    appendFileSync(join(root, linkOf('/etc/app/a.conf')), 'through a hard link\n');
    await drifts(h, ['path:/etc/app/a.conf']);
    expect(h.reports.at(-1)?.trigger).toBe('watch');
    chmodSync(join(root, linkOf('/opt/x/y/c.conf')), 0o666);
    await drifts(h, ['path:/etc/app/a.conf', 'path:/opt/x/y/c.conf']);
    // a descriptor opened before, written after the file was put back by name
    const fd = openSync(join(root, '/etc/app/b.conf'), 'r+');
    try {
      writeFileSync(join(root, '/etc/app/a.conf'), 'a\n');
      chmodSync(join(root, '/opt/x/y/c.conf'), 0o600);
      await drifts(h, []);
      writeSync(fd, 'X', 0);
    } finally {
      closeSync(fd);
    }
    await drifts(h, ['path:/etc/app/b.conf']);
    // replaced by rename: the new inode is watched (re-armed), the old one no longer counts
    writeFileSync(join(root, '/etc/app/.b.new'), 'b\n');
    chmodSync(join(root, '/etc/app/.b.new'), 0o644);
    renameSync(join(root, '/etc/app/.b.new'), join(root, '/etc/app/b.conf'));
    await drifts(h, []);
    appendFileSync(join(root, linkOf('/etc/app/b.conf')), 'the old inode: not oscars any more\n');
    await drifts(h, []);
    linkSync(join(root, '/etc/app/b.conf'), join(root, '/var/tmp/links/new-b'));
    appendFileSync(join(root, '/var/tmp/links/new-b'), 'the new one\n');
    await drifts(h, ['path:/etc/app/b.conf']);
    expect(h.monitor.watchedFiles).toBe(OWNED.length);
  });

  it("packages: dpkg's database changing asks for a package check; a removed or moved package is reported, put back it resolves", async () => {
    const c = { ...applied, packages: [{ name: 'chrony' }, { name: 'jq', version: '1.6' }] };
    lay(c);
    const dpkg = join(root, 'var/lib/dpkg');
    mkdirSync(dpkg, { recursive: true });
    // as dpkg writes it: a new file renamed over the old
    const db = (entries: Record<string, string>): void => {
      const text = Object.entries(entries)
        .map(([n, v]) => `Package: ${n}\nStatus: ${v}\n`)
        .join('\n');
      writeFileSync(join(dpkg, 'status-new'), text);
      renameSync(join(dpkg, 'status-new'), join(dpkg, 'status'));
    };
    const both = {
      chrony: 'install ok installed\nVersion: 4.3',
      jq: 'install ok installed\nVersion: 1.6',
    };
    db(both);
    const h = harness();
    await h.monitor.start(c);
    expect(h.drifted()).toEqual([]);
    db({ jq: 'install ok installed\nVersion: 1.7' });
    await until(h, () => h.monitor.drifted.length === 2);
    expect(h.monitor.drifted).toMatchObject([
      { key: 'package:chrony', package: 'chrony', reason: 'missing', found: 'missing' },
      { key: 'package:jq', reason: 'version', expected: 'installed 1.6', found: 'installed 1.7' },
    ]);
    expect(h.reports.at(-1)?.trigger).toBe('watch');
    db(both);
    await drifts(h, []);
    // Ignore: never reported
    await h.monitor.stop();
    const ignoring = harness();
    await ignoring.monitor.start({ ...c, driftPolicy: 'Ignore' });
    db({});
    await settle(ignoring.monitor);
    expect(ignoring.drifted()).toEqual([]);
  });

  it("packages: a dpkg run's steps are not read mid-run — only what it ends with is drift", async () => {
    const c = { ...applied, packages: [{ name: 'jq', version: '1.6' }] };
    lay(c);
    const dpkg = join(root, 'var/lib/dpkg');
    mkdirSync(dpkg, { recursive: true });
    const db = (status: string): void => {
      writeFileSync(join(dpkg, 'status-new'), `Package: jq\nStatus: ${status}\n`);
      renameSync(join(dpkg, 'status-new'), join(dpkg, 'status'));
    };
    db('install ok installed\nVersion: 1.6');
    const h = harness({ packageQuietMs: 400 });
    await h.monitor.start(c);
    // apt-get install jq=1.7 as dpkg writes it: unpacked, its scripts run, then installed
    db('install ok half-installed\nVersion: 1.7');
    await sleep(60);
    db('install ok unpacked\nVersion: 1.7');
    await sleep(120);
    db('install ok installed\nVersion: 1.7');
    await until(h, () => h.monitor.drifted.length === 1);
    expect(h.monitor.drifted).toMatchObject([{ key: 'package:jq', reason: 'version' }]);
    expect(h.reports.flatMap((r) => [...r.added, ...r.items].map((i) => i.reason))).not.toContain(
      'broken',
    );
  });

  it('inotify limits too low for every watch: one warning naming the sysctl and the number to set', async () => {
    lay(applied);
    const lines: string[] = [];
    const log = createLogger({
      component: 'agent',
      level: 'warn',
      destination: { write: (l: string) => void lines.push(l) },
    });
    const h = harness({
      log,
      inotifyLimits: () => Promise.resolve({ maxUserWatches: 4, maxUserInstances: 128 }),
    });
    await h.monitor.start(applied);
    const warned = lines.map((l) => (JSON.parse(l) as { msg: string }).msg);
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatch(
      /needs \d+ watches \(3 files and \d+ directories\).*fs\.inotify\.max_user_watches is 4.*sysctl -w fs\.inotify\.max_user_watches=\d+/,
    );
    // the same verdict after the next apply: said once
    await h.monitor.beforeApply('apply');
    h.monitor.afterApply({ applied });
    await settle(h.monitor);
    expect(lines).toHaveLength(1);
  });

  it('a first apply on a fresh node: every file it wrote is watched on its inode at once', async () => {
    const h = harness();
    await h.monitor.start(undefined);
    await h.monitor.beforeApply('apply');
    lay(applied);
    linkAll();
    h.monitor.afterApply({ applied });
    await until(h, () => h.monitor.watchedFiles === OWNED.length);
    expect(h.monitor.watchedFiles).toBe(OWNED.length);
    appendFileSync(join(root, linkOf('/opt/x/y/c.conf')), 'through a hard link\n');
    await drifts(h, ['path:/opt/x/y/c.conf']);
  });

  it('a file written in steps is checked once it is quiet: a restore in 60 small writes is no drift', async () => {
    const h = harness({ debounceMs: 400, debounceMaxMs: 10_000 });
    lay(applied);
    await h.monitor.start(applied);
    const path = join(root, '/etc/app/b.conf');
    // ~600 ms of writes ~10 ms apart, ending with the applied bytes: a check that did not wait
    // for quiet (as the fixed window from the first event did) would read a half-written file
    writeFileSync(path, '');
    for (let i = 0; i < 60; i++) {
      appendFileSync(path, i === 59 ? 'b\n' : '');
      chmodSync(path, i % 2 === 0 ? 0o600 : 0o644);
      await sleep(10);
    }
    await settle(h.monitor);
    await sleep(450);
    await h.monitor.idle();
    expect(h.reports.flatMap((r) => r.added.map((i) => i.key))).toEqual([]);
  });

  it('events that never stop are checked at the latest debounceMaxMs after the first', async () => {
    const h = harness({ debounceMs: 50, debounceMaxMs: 100 });
    lay(applied);
    await h.monitor.start(applied);
    const path = join(root, '/etc/app/b.conf');
    let seenWhileWriting = false;
    // writes every ~10 ms for 3 s: never 50 ms of quiet, so only the cap lets a check run
    for (let i = 0; i < 300 && !seenWhileWriting; i++) {
      appendFileSync(path, 'x');
      await sleep(10);
      seenWhileWriting = h.drifted().includes('path:/etc/app/b.conf');
    }
    expect(seenWhileWriting).toBe(true);
  });

  it('finds at start what changed while the agent was down; the audit finds what no event told', async () => {
    lay(applied);
    writeFileSync(join(root, '/etc/app/a.conf'), 'changed while down\n');
    const h = harness({ watch: false });
    await h.monitor.start(applied);
    expect(h.drifted()).toEqual(['path:/etc/app/a.conf']);
    expect(h.reports.at(-1)?.trigger).toBe('start');
    // no watcher: only an audit (here the one before an apply) sees this
    writeFileSync(join(root, '/etc/app/b.conf'), 'restored from an old backup\n');
    await drifts(h, ['path:/etc/app/a.conf']);
    await h.monitor.beforeApply('apply');
    expect(h.drifted()).toEqual(['path:/etc/app/a.conf', 'path:/etc/app/b.conf']);
    expect(h.reports.at(-1)?.trigger).toBe('apply');
  });

  it('reads beneath the root as the agent writes: a directory swapped for a link to an identical copy is drift, never followed', async () => {
    lay(applied);
    mkdirSync(join(root, 'elsewhere'));
    renameSync(join(root, 'etc/app'), join(root, 'elsewhere/app'));
    symlinkSync(join(root, 'elsewhere/app'), join(root, 'etc/app'));
    const h = harness({ watch: false });
    await h.monitor.start(applied);
    expect(h.drifted()).toEqual(['path:/etc/app/a.conf', 'path:/etc/app/b.conf']);
    expect(h.monitor.drifted.find((i) => i.path === '/etc/app/a.conf')).toMatchObject({
      reason: 'notRegularFile',
      found: 'symlink in its path',
    });
  });

  it('the periodic audit runs on its interval', async () => {
    lay(applied);
    const h = harness({ watch: false, auditIntervalMs: 50 });
    await h.monitor.start(applied);
    writeFileSync(join(root, '/opt/x/y/c.conf'), 'x');
    for (let i = 0; i < 100 && h.drifted().length === 0; i++) await sleep(20);
    expect(h.drifted()).toEqual(['path:/opt/x/y/c.conf']);
    expect(h.reports.at(-1)?.trigger).toBe('audit');
  });

  it("the agent's own writes are never drift: paused while it applies, checked against the new state after", async () => {
    lay(applied);
    const h = harness();
    await h.monitor.start(applied);
    h.reports.length = 0;
    await h.monitor.beforeApply('apply');
    const next = config(
      [],
      [
        file('/etc/app/a.conf', 'a2\n', { mode: 0o644 }),
        file('/etc/app/b.conf', 'b\n'),
        file('/etc/new/d.conf', 'd\n'),
      ],
    );
    rmSync(join(root, '/opt/x/y/c.conf')); // removed by the apply: no longer in the config
    lay(next);
    await sleep(50); // events arrive while paused
    h.monitor.afterApply({ applied: next });
    await settle(h.monitor);
    expect(h.reports).toEqual([]);
    // and the new state is what is watched now
    writeFileSync(join(root, '/etc/new/d.conf'), 'edited\n');
    writeFileSync(join(root, '/opt/x/y/c.conf'), 'no longer oscars\n');
    await drifts(h, ['path:/etc/new/d.conf']);
  });

  it('a failed apply: what it wrote is not drift, neither is what was applied', async () => {
    lay(applied);
    const h = harness();
    await h.monitor.start(applied);
    await h.monitor.beforeApply('apply');
    const next = config([], [file('/etc/app/a.conf', 'a2\n', { mode: 0o640 })]);
    writeFileSync(join(root, '/etc/app/a.conf'), 'a2\n'); // it got this far
    h.monitor.afterApply({ failed: next });
    await drifts(h, []);
    rmSync(join(root, '/etc/app/b.conf')); // the unfinished apply removes it: not drift either
    writeFileSync(join(root, '/opt/x/y/c.conf'), 'neither\n');
    await drifts(h, ['path:/opt/x/y/c.conf']);
  });

  it('Ignore paths are never read nor reported; Revert asks for a revert, with a backoff while drift keeps coming back', async () => {
    const c = config(
      [],
      [
        file('/etc/app/a.conf', 'a\n', { driftPolicy: 'Revert' }),
        file('/etc/app/b.conf', 'b\n', { driftPolicy: 'Ignore' }),
        file('/opt/x/y/c.conf', 'c\n'),
      ],
    );
    lay(c);
    let now = 0;
    const h = harness({
      now: () => new Date(now),
      backoff: new RevertBackoff({ baseMs: 60_000, maxMs: 60_000 }),
    });
    await h.monitor.start(c);
    h.reports.length = 0;
    writeFileSync(join(root, '/etc/app/b.conf'), 'tuned by hand\n');
    await settle(h.monitor);
    expect(h.reports).toEqual([]);
    writeFileSync(join(root, '/etc/app/a.conf'), 'x\n');
    await drifts(h, ['path:/etc/app/a.conf']);
    await until(h, () => h.reverts.n === 1);
    expect(h.monitor.drifted[0]?.policy).toBe('Revert');
    expect(h.reverts.n).toBe(1);
    // the revert happens (the agent's apply), then someone changes it again at once: the next
    // revert waits for the backoff
    await h.monitor.beforeApply('revert');
    writeFileSync(join(root, '/etc/app/a.conf'), 'a\n');
    h.monitor.afterApply({ unchanged: true, revert: true });
    await until(h, () => h.reports.at(-1)?.reverted === true);
    expect(h.reports.at(-1)).toMatchObject({ reverted: true, trigger: 'revert' });
    now = 1_000;
    writeFileSync(join(root, '/etc/app/a.conf'), 'y\n');
    await settle(h.monitor);
    await sleep(50);
    expect(h.reverts.n).toBe(1); // 59 s to go
  });

  it("a revert's scope is the Revert drift known now; after the revert (nothing re-armed but what it wrote) an edit through a hard link is still seen", async () => {
    const c = config(
      [unit('r.service', { driftPolicy: 'Revert', content: undefined })],
      [
        file('/etc/app/a.conf', 'a\n', { driftPolicy: 'Revert' }),
        file('/etc/app/b.conf', 'b\n', { driftPolicy: 'Revert' }),
        file('/etc/app/c.conf', 'c\n'), // Report
      ],
    );
    lay(c);
    const h = harness();
    await h.monitor.start(c);
    for (const n of ['a', 'c']) writeFileSync(join(root, `/etc/app/${n}.conf`), 'edited\n');
    await drifts(h, ['path:/etc/app/a.conf', 'path:/etc/app/c.conf']);
    await h.monitor.beforeApply('revert');
    const scope = h.monitor.revertScope();
    expect({
      paths: [...scope.paths],
      units: [...scope.units],
      packages: [...scope.packages],
    }).toEqual({ paths: ['/etc/app/a.conf'], units: [], packages: [] });
    // the revert writes a.conf as an apply does: a new inode renamed over the name
    writeFileSync(join(root, '/etc/app/.a.tmp'), 'a\n');
    renameSync(join(root, '/etc/app/.a.tmp'), join(root, '/etc/app/a.conf'));
    h.monitor.afterApply({ unchanged: true, revert: true });
    await until(h, () => h.reports.at(-1)?.reverted === true);
    expect(h.drifted()).toEqual(['path:/etc/app/c.conf']);
    // the check after the revert armed the new inode's watch: a write through another name
    // (which no directory watch hears) is drift
    mkdirSync(join(root, 'var/tmp'), { recursive: true });
    linkSync(join(root, '/etc/app/a.conf'), join(root, 'var/tmp/a-link'));
    appendFileSync(join(root, 'var/tmp/a-link'), 'through a link\n');
    await drifts(h, ['path:/etc/app/a.conf', 'path:/etc/app/c.conf']);
  });

  it('units: a change in systemd state directories asks for a unit check; stopped, disabled and masked units are reported', async () => {
    // a unit of the OS changed through a drop-in: masking it links its name to /dev/null
    const c = config([
      unit('a.service', {
        content: undefined,
        dropIns: [{ name: '10-x.conf', content: '[Service]\nEnvironment=X=1\n' }],
      }),
      unit('b.service', { driftPolicy: 'Ignore' }),
    ]);
    lay(c);
    const states = new Map<string, ObservedUnit>();
    const running: ObservedUnit = {
      load: 'loaded',
      active: 'active',
      sub: 'running',
      fileState: 'enabled',
      result: 'success',
      restsInactive: false,
    };
    states.set('a.service', running);
    states.set('b.service', running);
    const asked: string[][] = [];
    const reader: UnitStateReader = {
      read: (units) => {
        asked.push([...units]);
        return Promise.resolve(new Map(units.map((u) => [u, states.get(u) ?? running])));
      },
    };
    for (const d of ['run/systemd/units', 'etc/systemd/system/multi-user.target.wants'])
      mkdirSync(join(root, d), { recursive: true });
    writeFileSync(join(root, 'run/systemd/units/invocation:a.service'), '');
    const h = harness({ units: reader });
    await h.monitor.start(c);
    expect(asked).toEqual([['a.service']]); // the Ignore unit is not even asked about
    // someone stops a.service: systemd drops its invocation link
    states.set('a.service', { ...running, active: 'inactive', sub: 'dead' });
    rmSync(join(root, 'run/systemd/units/invocation:a.service'));
    await until(h, () => h.monitor.drifted.length === 1);
    expect(h.monitor.drifted).toMatchObject([
      {
        key: 'unit:a.service',
        reason: 'stopped',
        expected: 'active',
        found: 'inactive (dead)',
      },
    ]);
    // and disables and masks it: its .wants link goes, a /dev/null link appears
    states.set('a.service', {
      ...running,
      load: 'masked',
      fileState: 'masked',
      active: 'inactive',
      sub: 'dead',
    });
    symlinkSync('/dev/null', join(root, 'etc/systemd/system/a.service'));
    await until(h, () => h.monitor.drifted[0]?.reason === 'masked, stopped');
    expect(h.monitor.drifted[0]).toMatchObject({ reason: 'masked, stopped' });
    // an event for a unit nobody declared asks nothing
    const before = asked.length;
    writeFileSync(join(root, 'run/systemd/units/invocation:other.service'), '');
    await settle(h.monitor);
    expect(asked.length).toBe(before);
  });
});
