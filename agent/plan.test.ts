import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ResolvedConfig, ResolvedFile, ResolvedUnit } from '../api/resolved.js';
import { enablement } from '../api/systemd/enablement.js';
import type { DriftRepair } from './drift/policy.js';
import type { ObservedUnit } from './model/observed.js';
import type { Action, ObservedDisk } from './plan.js';
import { entriesOf, formatPlan, isUnitAction, plan, restartedUnits } from './plan.js';
import { applyToModel, diskOf, nodeFrom, type NodeModel } from './testing/node-model.js';

function file(path: string, data: string, extra: Partial<ResolvedFile> = {}): ResolvedFile {
  return { path, mode: 0o644, user: 'root', group: 'root', content: Buffer.from(data), ...extra };
}

function unit(name: string, extra: Partial<ResolvedUnit> = {}): ResolvedUnit {
  return {
    name,
    enable: true,
    mask: false,
    command: 'start',
    onChange: 'restart',
    content: `[Service]\nExecStart=/bin/${name}\n[Install]\nWantedBy=multi-user.target\n`,
    dropIns: [],
    filePaths: [],
    ...extra,
  };
}

function config(units: ResolvedUnit[], files: ResolvedFile[] = []): ResolvedConfig {
  return { type: 'debian', purpose: 'reconcile', units, files, packages: [] };
}

/** structuredClone turns Buffers into plain Uint8Arrays; keep them Buffers. */
function clone(c: ResolvedConfig): ResolvedConfig {
  const copy = structuredClone(c);
  copy.files = c.files.map((f) => ({ ...f, content: Buffer.from(f.content) }));
  return copy;
}

const disk = (c: ResolvedConfig | undefined, extra: Record<string, string> = {}): ObservedDisk =>
  diskOf(nodeFrom(c, extra));

const brief = (actions: Action[]): string[] =>
  actions.map((a) =>
    'unit' in a && a.kind !== 'writeFile' && a.kind !== 'removeFile'
      ? `${a.kind} ${a.unit}`
      : 'path' in a
        ? `${a.kind} ${a.path}`
        : a.kind,
  );

const base = config(
  [
    unit('a.service', { filePaths: ['/etc/a.conf'] }),
    unit('b.service', {
      onChange: 'reload',
      dropIns: [{ name: '10-x.conf', content: '[Service]\nEnvironment=X=1\n' }],
    }),
    unit('c.service'),
  ],
  [file('/etc/a.conf', 'a=1\n'), file('/etc/other.conf', 'o\n')],
);

describe('plan: table', () => {
  it('a fresh node gets every file, unit, one daemon-reload, enable and start', () => {
    expect(brief(plan(undefined, base, disk(undefined)))).toEqual([
      'writeFile /etc/a.conf',
      'writeFile /etc/other.conf',
      'writeFile /etc/systemd/system/a.service',
      'writeFile /etc/systemd/system/b.service',
      'writeFile /etc/systemd/system/b.service.d/10-x.conf',
      'writeFile /etc/systemd/system/c.service',
      'daemonReload',
      'enable a.service',
      'enable b.service',
      'enable c.service',
      'start a.service',
      'start b.service',
      'start c.service',
    ]);
  });

  it('nothing changed: nothing to do', () => {
    expect(plan(base, base, disk(base))).toEqual([]);
  });

  it('a file in filePaths changed: write it and restart only its unit, no daemon-reload', () => {
    const next = clone(base);
    next.files[0] = file('/etc/a.conf', 'a=2\n');
    const actions = plan(base, next, disk(base));
    expect(brief(actions)).toEqual(['writeFile /etc/a.conf', 'restart a.service']);
    expect(actions[0]?.reason).toBe('content changed');
    expect(actions[1]?.reason).toBe('/etc/a.conf changed');
  });

  it('a file no unit lists changed: written, nothing restarted', () => {
    const next = clone(base);
    next.files[1] = file('/etc/other.conf', 'o2\n', { mode: 0o600 });
    const actions = plan(base, next, disk(base));
    expect(brief(actions)).toEqual(['writeFile /etc/other.conf']);
    expect(actions[0]?.reason).toBe('content changed, mode 0644 → 0600');
  });

  it('a drop-in changed with onChange reload: daemon-reload then reload', () => {
    const next = clone(base);
    next.units[1]!.dropIns[0]!.content = '[Service]\nEnvironment=X=2\n';
    expect(brief(plan(base, next, disk(base)))).toEqual([
      'writeFile /etc/systemd/system/b.service.d/10-x.conf',
      'daemonReload',
      'reload b.service',
    ]);
  });

  it('onChange none writes but never restarts; stopStart stops and starts', () => {
    const last = config([
      unit('n.service', { onChange: 'none' }),
      unit('s.service', { onChange: 'stopStart' }),
    ]);
    const next = clone(last);
    next.units[0]!.content =
      '[Service]\nExecStart=/bin/n2\n[Install]\nWantedBy=multi-user.target\n';
    next.units[1]!.content =
      '[Service]\nExecStart=/bin/s2\n[Install]\nWantedBy=multi-user.target\n';
    expect(brief(plan(last, next, disk(last)))).toEqual([
      'writeFile /etc/systemd/system/n.service',
      'writeFile /etc/systemd/system/s.service',
      'daemonReload',
      'stopStart s.service',
    ]);
  });

  it('a removed unit is stopped and disabled before its files go; files oscar did not write stay', () => {
    const next = clone(base);
    next.units = next.units.filter((u) => u.name !== 'c.service');
    const observed = disk(base, { '/etc/systemd/system/foreign.service': 'x' });
    const actions = plan(base, next, observed);
    expect(brief(actions)).toEqual([
      'stop c.service',
      'disable c.service',
      'removeFile /etc/systemd/system/c.service',
      'daemonReload',
    ]);
  });

  it('a removed file oscar wrote is removed; one it did not write is never touched', () => {
    const next = clone(base);
    next.files = next.files.filter((f) => f.path !== '/etc/other.conf');
    expect(brief(plan(base, next, disk(base, { '/etc/keep': 'k' })))).toEqual([
      'removeFile /etc/other.conf',
    ]);
  });

  it('a file gone from the config and already gone from disk needs no action', () => {
    const next = clone(base);
    next.files = next.files.filter((f) => f.path !== '/etc/other.conf');
    const observed = disk(base);
    (observed.files as Map<string, unknown>).delete('/etc/other.conf');
    expect(plan(base, next, observed)).toEqual([]);
  });

  it('drift on disk is repaired and restarts the unit that lists the file', () => {
    const observed = disk(base);
    (observed.files as Map<string, unknown>).set('/etc/a.conf', {
      content: Buffer.from('tampered'),
      mode: 0o644,
      user: 'root',
      group: 'root',
    });
    const actions = plan(base, base, observed);
    expect(brief(actions)).toEqual(['writeFile /etc/a.conf', 'restart a.service']);
    expect(actions[0]?.reason).toBe('drift on disk: content differ');
  });

  it('drift in mode or owner is repaired; unknown ownership (undefined) is not compared', () => {
    const observed = disk(base);
    const m = observed.files as Map<
      string,
      { content: Buffer; mode: number; user?: string; group?: string }
    >;
    m.set('/etc/other.conf', {
      content: Buffer.from('o\n'),
      mode: 0o666,
      user: 'root',
      group: 'root',
    });
    expect(brief(plan(base, base, observed))).toEqual(['writeFile /etc/other.conf']);
    m.set('/etc/other.conf', {
      content: Buffer.from('o\n'),
      mode: 0o644,
      user: 'nobody',
      group: 'root',
    });
    expect(brief(plan(base, base, observed))).toEqual(['writeFile /etc/other.conf']);
    m.set('/etc/other.conf', { content: Buffer.from('o\n'), mode: 0o644 });
    expect(plan(base, base, observed)).toEqual([]);
  });

  it('a missing file is written again', () => {
    const observed = disk(base);
    (observed.files as Map<string, unknown>).delete('/etc/systemd/system/c.service');
    expect(brief(plan(base, base, observed))).toEqual([
      'writeFile /etc/systemd/system/c.service',
      'daemonReload',
      'restart c.service',
    ]);
  });

  it('enable, disable, mask and unmask follow the config', () => {
    const last = config([
      unit('e.service', { enable: false }),
      unit('d.service'),
      unit('m.service'),
    ]);
    const next = config([
      unit('e.service'),
      unit('d.service', { enable: false }),
      unit('m.service', { mask: true, enable: false, content: undefined }),
    ]);
    expect(brief(plan(last, next, disk(last)))).toEqual([
      'stop m.service',
      'disable m.service',
      'removeFile /etc/systemd/system/m.service',
      'daemonReload',
      'disable d.service',
      'enable e.service',
      'mask m.service',
      'start e.service',
    ]);
    expect(brief(plan(next, last, disk(next)))).toEqual([
      'unmask m.service',
      'writeFile /etc/systemd/system/m.service',
      'daemonReload',
      'enable d.service',
      'disable e.service',
      'enable m.service',
      'start d.service',
      'start m.service',
    ]);
  });

  it('command stop stops the unit; going back to start starts it', () => {
    const last = config([unit('x.service')]);
    const next = config([unit('x.service', { command: 'stop' })]);
    expect(brief(plan(last, next, disk(last)))).toEqual(['stop x.service']);
    expect(brief(plan(next, last, disk(next)))).toEqual(['start x.service']);
  });

  it('a new unit is started only when enabled; command restart restarts it', () => {
    const next = config([
      unit('on.service'),
      unit('off.service', { enable: false }),
      unit('re.service', { command: 'restart' }),
    ]);
    const actions = brief(plan(undefined, next, disk(undefined)));
    expect(actions).toContain('start on.service');
    expect(actions).toContain('restart re.service');
    expect(actions.filter((a) => a.includes('off.service'))).toEqual([
      'writeFile /etc/systemd/system/off.service',
    ]);
  });

  it('a changed unit that is not enabled is restarted only if it runs (try-restart)', () => {
    const last = config([unit('x.service', { enable: false })]);
    const next = config([
      unit('x.service', { enable: false, content: '[Service]\nExecStart=/bin/y\n' }),
    ]);
    expect(brief(plan(last, next, disk(last)))).toEqual([
      'writeFile /etc/systemd/system/x.service',
      'daemonReload',
      'tryRestart x.service',
    ]);
  });

  it('a socket-activated service is restarted through its socket', () => {
    const last = config(
      [unit('web.socket'), unit('web.service', { enable: false, filePaths: ['/etc/web.conf'] })],
      [file('/etc/web.conf', '1')],
    );
    const next = clone(last);
    next.files[0] = file('/etc/web.conf', '2');
    expect(brief(plan(last, next, disk(last)))).toEqual([
      'writeFile /etc/web.conf',
      'stop web.service',
      'restart web.socket',
    ]);
    const socketChanged = clone(last);
    socketChanged.units[1]!.content = '[Socket]\nListenStream=81\n';
    expect(brief(plan(last, socketChanged, disk(last))).slice(-2)).toEqual([
      'stop web.service',
      'restart web.socket',
    ]);
  });

  it('a unit of the OS managed only through drop-ins: its drop-ins come and go, its file is never touched', () => {
    const last = config([
      unit('containerd.service', {
        content: undefined,
        dropIns: [{ name: '10-oscar.conf', content: '[Service]\nLimitNOFILE=1\n' }],
      }),
    ]);
    const next = config([]);
    expect(brief(plan(last, next, disk(last)))).toEqual([
      'removeFile /etc/systemd/system/containerd.service.d/10-oscar.conf',
      'daemonReload',
      'tryRestart containerd.service',
    ]);
  });

  it('formatPlan prints one line per action with its reason and a summary', () => {
    const next = clone(base);
    next.files[0] = file('/etc/a.conf', 'a=2\n');
    const text = formatPlan(plan(base, next, disk(base)));
    expect(text).toBe(
      '  1. write /etc/a.conf (0644 root:root, 4 B) — content changed\n' +
        '  2. restart a.service — /etc/a.conf changed\n' +
        '2 action(s); restarts a.service\n',
    );
    expect(formatPlan([])).toMatch(/nothing to do/);
  });
});

describe('plan: drift', () => {
  const running: ObservedUnit = {
    load: 'loaded',
    active: 'active',
    sub: 'running',
    fileState: 'enabled',
    result: 'success',
    restsInactive: false,
  };
  const seen = (units: Record<string, Partial<ObservedUnit>>, c = base): ObservedDisk => {
    const d = disk(c);
    return {
      files: d.files,
      units: new Map(Object.entries(units).map(([n, u]) => [n, { ...running, ...u }])),
    };
  };
  const only = (paths: string[], units: string[]): DriftRepair => ({
    path: (p) => paths.includes(p),
    unit: (u) => units.includes(u),
    package: () => false,
  });

  it('a stopped or failed unit is started, with the drift as its reason', () => {
    const stopped = plan(base, base, seen({ 'a.service': { active: 'inactive', sub: 'dead' } }));
    expect(brief(stopped)).toEqual(['start a.service']);
    expect(stopped[0]?.reason).toBe('drift: stopped: expected active, found inactive (dead)');
    const failed = plan(
      base,
      base,
      seen({ 'b.service': { active: 'failed', sub: 'failed', result: 'signal' } }),
    );
    expect(brief(failed)).toEqual(['start b.service']);
    expect(failed[0]?.reason).toBe('drift: failed: expected active, found failed (signal)');
  });

  it('a disabled unit is enabled; a masked one unmasked (and started when it stopped)', () => {
    expect(brief(plan(base, base, seen({ 'c.service': { fileState: 'disabled' } })))).toEqual([
      'enable c.service',
    ]);
    const masked = seen({
      'c.service': { load: 'masked', fileState: 'masked', active: 'inactive', sub: 'dead' },
    });
    const actions = plan(base, base, masked);
    expect(brief(actions)).toEqual(['unmask c.service', 'enable c.service', 'start c.service']);
    expect(actions[0]?.reason).toBe('drift: masked: expected not masked, found masked (masked)');
  });

  it('a unit declared masked that someone unmasked is stopped and masked again', () => {
    const last = config([unit('m.service', { mask: true, enable: false, content: undefined })]);
    expect(brief(plan(last, last, seen({ 'm.service': {} }, last)))).toEqual([
      'stop m.service',
      'mask m.service',
    ]);
    expect(
      brief(plan(last, last, seen({ 'm.service': { active: 'inactive', fileState: '' } }, last))),
    ).toEqual(['mask m.service']);
  });

  it('is not drift: a oneshot at rest, a service behind its declared socket, a unit on its way up, one declared stopped or not enabled', () => {
    const c = config([
      unit('o.service'),
      unit('web.socket'),
      unit('web.service'),
      unit('up.service'),
      unit('halt.service', { command: 'stop' }),
      unit('off.service', { enable: false }),
    ]);
    const states = seen(
      {
        'o.service': { active: 'inactive', sub: 'dead', restsInactive: true },
        'web.service': { active: 'inactive', sub: 'dead' },
        'web.socket': { sub: 'listening' },
        'up.service': { active: 'activating', sub: 'auto-restart' },
        'halt.service': { active: 'inactive', sub: 'dead' },
        'off.service': { active: 'inactive', sub: 'dead', fileState: 'disabled' },
      },
      c,
    );
    expect(plan(c, c, states)).toEqual([]);
    // a oneshot that failed is drift
    const failed = seen({ 'o.service': { active: 'failed', restsInactive: true } }, c);
    expect(brief(plan(c, c, failed))).toEqual(['start o.service']);
  });

  it("a unit whose declaration changes is planned by its change, not by its state's drift", () => {
    const last = config([unit('x.service', { enable: false })]);
    const next = config([unit('x.service')]);
    const states = seen({ 'x.service': { active: 'inactive', fileState: 'disabled' } }, last);
    expect(brief(plan(last, next, states))).toEqual(['enable x.service', 'start x.service']);
  });

  it('a drifted unit file restarts the unit, which starts it: no second start', () => {
    const observed = seen({ 'a.service': { active: 'inactive', sub: 'dead' } });
    (observed.files as Map<string, unknown>).set('/etc/systemd/system/a.service', {
      content: Buffer.from('tampered'),
      mode: 0o644,
      user: 'root',
      group: 'root',
    });
    expect(brief(plan(base, base, observed))).toEqual([
      'writeFile /etc/systemd/system/a.service',
      'daemonReload',
      'restart a.service',
    ]);
  });

  it('repairs only the drift it is given: the rest stays as found, declared changes are written anyway', () => {
    const observed = seen({
      'a.service': { active: 'inactive' },
      'b.service': { active: 'failed' },
    });
    const files = observed.files as Map<string, { content: Buffer; mode: number }>;
    files.set('/etc/a.conf', { content: Buffer.from('tuned'), mode: 0o644 });
    files.set('/etc/other.conf', { content: Buffer.from('tuned'), mode: 0o644 });
    expect(plan(base, base, observed, only([], []))).toEqual([]);
    expect(brief(plan(base, base, observed, only(['/etc/other.conf'], ['b.service'])))).toEqual([
      'writeFile /etc/other.conf',
      'start b.service',
    ]);
    // a change of the declaration is written whatever the drift policy
    const next = clone(base);
    next.files[0] = file('/etc/a.conf', 'a=2\n');
    expect(brief(plan(base, next, observed, only([], [])))).toEqual([
      'writeFile /etc/a.conf',
      'restart a.service',
    ]);
  });
});

// ---- properties -------------------------------------------------------------------------

const FILES = ['/etc/f1', '/etc/f2', '/etc/d/f3', '/var/lib/f4'];
const UNITS = ['a.service', 'b.service', 'c.service', 'web.socket', 'web.service', 't.timer'];
const DROPINS = ['10-a.conf', '20-b.conf'];

const arbFile = (path: string): fc.Arbitrary<ResolvedFile> =>
  fc.record({
    path: fc.constant(path),
    mode: fc.constantFrom(0o644, 0o600, 0o755),
    user: fc.constantFrom('root', 'nobody'),
    group: fc.constant('root'),
    content: fc.constantFrom('x', 'y', '').map((s) => Buffer.from(s)),
  });

const arbConfig: fc.Arbitrary<ResolvedConfig> = fc
  .tuple(fc.subarray(FILES), fc.subarray(UNITS))
  .chain(([paths, names]) =>
    fc.record({
      files: fc.tuple(...paths.map(arbFile)),
      units: fc.tuple(
        ...names.map((name) =>
          fc
            .record({
              mask: fc.integer({ min: 0, max: 9 }).map((n) => n < 3),
              enable: fc.boolean(),
              command: fc.constantFrom('start', 'start', 'restart', 'stop'),
              onChange: fc.constantFrom('restart', 'reload', 'none', 'stopStart'),
              content: fc.option(
                fc.constantFrom(
                  '[Install]\nWantedBy=a.target\n',
                  '[Install]\nWantedBy=b.target\n',
                  '[Service]\nType=oneshot\n',
                ),
                { nil: undefined },
              ),
              dropIns: fc
                .subarray(DROPINS)
                .chain((ds) =>
                  fc.tuple(
                    ...ds.map((d) =>
                      fc.constantFrom('p', 'q').map((c) => ({ name: d, content: c })),
                    ),
                  ),
                ),
              filePaths: fc.subarray(paths),
            })
            .map((u): ResolvedUnit => ({
              name,
              enable: u.mask ? false : u.enable,
              mask: u.mask,
              command: u.command,
              onChange: u.onChange,
              ...(u.mask || u.content === undefined ? {} : { content: u.content }),
              dropIns: u.dropIns,
              filePaths: [...u.filePaths].sort(),
            })),
        ),
      ),
    }),
  )
  .map(({ files, units }) => config(units, files));

/** By the rules: units in both configs, runnable in both, whose own files or filePaths changed. */
function expectedRestarts(last: ResolvedConfig, next: ResolvedConfig): Set<string> {
  const le = entriesOf(last);
  const ne = entriesOf(next);
  const differs = (p: string): boolean => {
    const a = le.get(p);
    const b = ne.get(p);
    if (!a || !b) return a !== b;
    return (
      !a.content.equals(b.content) || a.mode !== b.mode || a.user !== b.user || a.group !== b.group
    );
  };
  const paths = new Set([...le.keys(), ...ne.keys()]);
  const out = new Set<string>();
  const changedUnit = (u: ResolvedUnit, lu: ResolvedUnit | undefined): boolean =>
    [...paths].some(
      (p) => (le.get(p)?.unit === u.name || ne.get(p)?.unit === u.name) && differs(p),
    ) || [...new Set([...u.filePaths, ...(lu?.filePaths ?? [])])].some(differs);
  for (const u of next.units) {
    const lu = last.units.find((x) => x.name === u.name);
    if (u.command === 'restart' && u.enable && !u.mask) {
      // oscar starts it (new, unmasked, was stopped, or enabled now): command restart restarts
      const changed = changedUnit(u, lu);
      const enabledNow = lu !== undefined && !lu.enable;
      if (
        !lu ||
        lu.mask ||
        lu.command === 'stop' ||
        (enabledNow && (!changed || u.onChange === 'none'))
      ) {
        out.add(u.name);
      }
    }
    if (!lu || lu.mask || u.mask || lu.command === 'stop' || u.command === 'stop') continue;
    if (u.onChange !== 'restart' && u.onChange !== 'stopStart') continue;
    if (changedUnit(u, lu)) out.add(u.name);
  }
  for (const lu of last.units) {
    if (
      !next.units.some((u) => u.name === lu.name) &&
      !lu.mask &&
      lu.content === undefined &&
      lu.dropIns.length > 0
    ) {
      out.add(lu.name); // an OS unit whose drop-ins oscar removed (try-restart)
    }
  }
  // socket activation: the socket restarts instead of the service
  const names = new Set(next.units.map((u) => u.name));
  const masked = next.units.some(
    (u) => u.name.startsWith('web.') && (u.mask || u.command === 'stop'),
  );
  if (names.has('web.socket') && names.has('web.service') && !masked && out.has('web.service')) {
    out.delete('web.service');
    out.add('web.socket');
  }
  return out;
}

describe('plan: properties', () => {
  it('plan(x, x, disk(x)) is empty', () => {
    fc.assert(
      fc.property(arbConfig, (x) => {
        expect(plan(x, x, disk(x))).toEqual([]);
      }),
      { numRuns: 500 },
    );
  });

  it('applying the plan to a model node yields exactly the desired state, and converges', () => {
    fc.assert(
      fc.property(fc.option(arbConfig, { nil: undefined }), arbConfig, (last, next) => {
        const node = nodeFrom(last, { '/etc/foreign': 'not oscar' });
        applyToModel(node, plan(last, next, diskOf(node)));
        const want = entriesOf(next);
        const got = new Map(node.files);
        expect(got.get('/etc/foreign')?.content.toString()).toBe('not oscar');
        got.delete('/etc/foreign');
        // files: exactly the desired entries, plus unit files of the OS that oscar never owned
        expect([...got.keys()].sort()).toEqual([...want.keys()].sort());
        for (const [p, e] of want) {
          const f = got.get(p)!;
          expect([f.content.toString(), f.mode, f.user, f.group]).toEqual([
            e.content.toString(),
            e.mode,
            e.user,
            e.group,
          ]);
        }
        for (const u of next.units) {
          expect(node.masked.has(u.name)).toBe(u.mask);
          expect(node.enabled.has(u.name)).toBe(enablement(u).enable); // the renderers' decision
          if (u.mask || u.command === 'stop') expect(node.active.has(u.name)).toBe(false);
          else if (u.enable && u.name !== 'web.service') expect(node.active.has(u.name)).toBe(true);
        }
        for (const lu of last?.units ?? []) {
          if (next.units.some((u) => u.name === lu.name)) continue;
          expect(node.masked.has(lu.name)).toBe(false);
          if (lu.content !== undefined) expect(node.active.has(lu.name)).toBe(false);
        }
        // converged: planning again finds nothing to do
        expect(plan(next, next, diskOf(node))).toEqual([]);
      }),
      { numRuns: 1000 },
    );
  });

  it('the restarted units are exactly the changed units (by the rules), each at most once', () => {
    fc.assert(
      fc.property(arbConfig, arbConfig, (last, next) => {
        const node = nodeFrom(last);
        const actions = plan(last, next, diskOf(node));
        applyToModel(node, actions);
        expect(new Set(restartedUnits(actions))).toEqual(expectedRestarts(last, next));
        for (const n of node.restarts.values()) expect(n).toBe(1);
      }),
      { numRuns: 1000 },
    );
  });

  it('a unit whose files did not change is never touched', () => {
    fc.assert(
      fc.property(
        arbConfig,
        fc.constantFrom(...FILES),
        fc.constantFrom('x', 'changed'),
        (x, path, data) => {
          const next = clone(x);
          next.files = next.files.map((f) =>
            f.path === path ? { ...f, content: Buffer.from(data) } : f,
          );
          const actions = plan(x, next, disk(x));
          for (const a of actions) {
            if (a.kind === 'writeFile') expect(a.path).toBe(path);
            else if (isUnitAction(a)) {
              const u = x.units.find(
                (v) => v.name === a.unit || v.name.replace(/\.socket$/, '.service') === a.unit,
              );
              expect(u, `${a.kind} ${a.unit}`).toBeDefined();
              const listing = x.units.filter((v) => v.filePaths.includes(path)).map((v) => v.name);
              const related = listing.flatMap((n) => [
                n,
                n.replace(/\.service$/, '.socket'),
                n.replace(/\.socket$/, '.service'),
              ]);
              expect(related).toContain(a.unit);
            }
          }
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe('template units (name@.service)', () => {
  const template = (extra: Partial<ResolvedUnit> = {}): ResolvedUnit =>
    unit('worker@.service', {
      content: '[Service]\nExecStart=/bin/worker %i\n[Install]\nWantedBy=multi-user.target\n',
      ...extra,
    });
  const instance = (extra: Partial<ResolvedUnit> = {}): ResolvedUnit => {
    const u = unit('worker@a.service', extra);
    delete u.content;
    return u;
  };

  it('a template is written but never enabled without DefaultInstance=, started, stopped or restarted; its instance is', () => {
    const c = config([template(), instance()]);
    expect(brief(plan(undefined, c, disk(undefined)))).toEqual([
      'writeFile /etc/systemd/system/worker@.service',
      'daemonReload',
      'enable worker@a.service',
      'start worker@a.service',
    ]);
    // a change to the template restarts its declared instance, not the template
    const changed = config([
      template({
        content: '[Service]\nExecStart=/bin/worker2 %i\n[Install]\nWantedBy=multi-user.target\n',
      }),
      instance(),
    ]);
    expect(brief(plan(c, changed, disk(c)))).toEqual([
      'writeFile /etc/systemd/system/worker@.service',
      'daemonReload',
      'restart worker@a.service',
    ]);
    // command: stop or restart on a template does nothing at run time either
    const stop = config([template({ command: 'stop' }), instance()]);
    expect(brief(plan(c, stop, disk(c)))).toEqual([]);
  });

  it('a template with DefaultInstance= is enabled and disabled, never started or stopped', () => {
    const withDefault = template({
      content:
        '[Service]\nExecStart=/bin/worker %i\n[Install]\nWantedBy=multi-user.target\nDefaultInstance=main\n',
    });
    const c = config([withDefault]);
    expect(brief(plan(undefined, c, disk(undefined)))).toEqual([
      'writeFile /etc/systemd/system/worker@.service',
      'daemonReload',
      'enable worker@.service',
    ]);
    expect(brief(plan(c, config([]), disk(c)))).toEqual([
      'disable worker@.service',
      'removeFile /etc/systemd/system/worker@.service',
      'daemonReload',
    ]);
    expect(brief(plan(c, config([{ ...withDefault, enable: false }]), disk(c)))).toEqual([
      'disable worker@.service',
    ]);
  });

  it('an instance of a template oscar wrote is stopped and disabled when it leaves the config', () => {
    const c = config([template(), instance()]);
    expect(brief(plan(c, config([]), disk(c)))).toEqual([
      'stop worker@a.service',
      'disable worker@a.service',
      'removeFile /etc/systemd/system/worker@.service',
      'daemonReload',
    ]);
    expect(brief(plan(c, config([template()]), disk(c)))).toEqual([
      'stop worker@a.service',
      'disable worker@a.service',
    ]);
  });

  it('a template that leaves the config or is masked is not stopped', () => {
    const c = config([template()]);
    expect(brief(plan(c, config([]), disk(c)))).toEqual([
      'removeFile /etc/systemd/system/worker@.service',
      'daemonReload',
    ]);
    const masked = template({ mask: true, enable: false });
    delete masked.content;
    expect(brief(plan(c, config([masked]), disk(c)))).toEqual([
      'removeFile /etc/systemd/system/worker@.service',
      'daemonReload',
      'mask worker@.service',
    ]);
  });
});

type DriftOp =
  | { kind: 'edit' | 'chmod' | 'delete'; path: string }
  | { kind: 'stop' | 'disable' | 'mask' | 'unmask'; unit: string };

const arbDriftOps: fc.Arbitrary<DriftOp[]> = fc.array(
  fc.oneof(
    fc.record({
      kind: fc.constantFrom('edit' as const, 'chmod' as const, 'delete' as const),
      path: fc.constantFrom(
        ...FILES,
        '/etc/foreign',
        ...UNITS.map((u) => `/etc/systemd/system/${u}`),
        `/etc/systemd/system/a.service.d/${DROPINS[0] ?? ''}`,
      ),
    }),
    fc.record({
      kind: fc.constantFrom(
        'stop' as const,
        'disable' as const,
        'mask' as const,
        'unmask' as const,
      ),
      unit: fc.constantFrom(...UNITS, 'foreign.service'),
    }),
  ),
  { maxLength: 8 },
);

/** What someone else does to a node: edits, chmods, deletions, systemctl stop/disable/mask/unmask. */
function driftModel(node: NodeModel, ops: readonly DriftOp[]): void {
  for (const op of ops) {
    if ('path' in op) {
      const f = node.files.get(op.path);
      if (op.kind === 'delete') node.files.delete(op.path);
      // a unit file planted where the OS unit had none overrides it (systemd then calls it
      // static): another unit, not drift of this one, so the model edits only existing ones
      else if (op.kind === 'edit' && (f || !op.path.startsWith('/etc/systemd/system/')))
        node.files.set(op.path, {
          ...(f ?? { mode: 0o644, user: 'root', group: 'root' }),
          content: Buffer.from(`${f?.content.toString() ?? ''}edited`),
        });
      else if (f) node.files.set(op.path, { ...f, mode: f.mode ^ 0o022 });
      continue;
    }
    node.known.add(op.unit);
    if (op.kind === 'stop') node.active.delete(op.unit);
    else if (op.kind === 'disable') node.enabled.delete(op.unit);
    else if (op.kind === 'mask') node.masked.add(op.unit);
    else node.masked.delete(op.unit);
  }
}

describe('plan: drift properties', () => {
  it('repairing all drift puts back exactly what oscar declared, touches nothing foreign, and converges', () => {
    fc.assert(
      fc.property(arbConfig, arbDriftOps, (x, ops) => {
        const node = nodeFrom(x, { '/etc/foreign': 'not oscar' });
        node.known.add('foreign.service');
        driftModel(node, ops);
        const foreign = node.files.get('/etc/foreign');
        const foreignUnit = JSON.stringify(diskOf(node).units?.get('foreign.service'));
        const actions = plan(x, x, diskOf(node));
        for (const a of actions) {
          if ('path' in a) expect(entriesOf(x).has(a.path), a.path).toBe(true);
          if (isUnitAction(a)) expect(a.unit).not.toBe('foreign.service');
        }
        applyToModel(node, actions);
        expect(node.files.get('/etc/foreign')).toEqual(foreign);
        expect(JSON.stringify(diskOf(node).units?.get('foreign.service'))).toBe(foreignUnit);
        for (const [p, e] of entriesOf(x)) {
          const f = node.files.get(p);
          expect(f && [f.content.toString(), f.mode], p).toEqual([e.content.toString(), e.mode]);
        }
        const socket = (u: ResolvedUnit): boolean =>
          u.name === 'web.service' && x.units.some((v) => v.name === 'web.socket');
        for (const u of x.units) {
          expect(node.masked.has(u.name), `${u.name} masked`).toBe(u.mask);
          if (enablement(u).enable)
            expect(node.enabled.has(u.name), `${u.name} enabled`).toBe(true);
          if (u.enable && !u.mask && u.command !== 'stop' && !socket(u))
            expect(node.active.has(u.name), `${u.name} active`).toBe(true);
        }
        expect(plan(x, x, diskOf(node))).toEqual([]);
      }),
      { numRuns: 1000 },
    );
  });

  it('repairs only what the policy lets it: other drift stays exactly as found', () => {
    fc.assert(
      fc.property(
        arbConfig,
        arbDriftOps,
        fc.subarray(FILES),
        fc.subarray(UNITS),
        (x, ops, paths, units) => {
          const node = nodeFrom(x);
          driftModel(node, ops);
          const repair: DriftRepair = {
            path: (p) => paths.includes(p),
            unit: (u) => units.includes(u),
            package: () => false,
          };
          const actions = plan(x, x, diskOf(node), repair);
          const written = actions.flatMap((a) => (a.kind === 'writeFile' ? [a.path] : []));
          for (const p of written) expect(paths).toContain(p);
          for (const a of actions) {
            if (!isUnitAction(a) || units.includes(a.unit)) continue;
            // any other unit action is the restart (or reload) a rewritten file of it calls for
            // (for a socket-activated pair, of either of the two)
            const related = [a.unit, a.unit.replace(/\.socket$/, '.service')];
            related.push(related[1]!.replace(/\.service$/, '.socket'));
            const listing = x.units.filter(
              (v) => related.includes(v.name) && v.filePaths.some((p) => written.includes(p)),
            );
            expect(listing.length, `${a.kind} ${a.unit}`).toBeGreaterThan(0);
          }
        },
      ),
      { numRuns: 1000 },
    );
  });
});

describe('packages', () => {
  const withPackages = (
    c: ResolvedConfig,
    packages: ResolvedConfig['packages'],
  ): ResolvedConfig => ({
    ...clone(c),
    packages,
  });

  it("installs packages after the root's files and the units, before files owned by other names (cloud-init's order)", () => {
    const c = withPackages(
      {
        ...base,
        files: [
          file('/etc/apt/keyrings/repo.gpg', 'key'),
          file('/etc/apt/sources.list.d/repo.list', 'deb [signed-by=...] file:/repo ./\n'),
          file('/etc/app/by-id.conf', 'x', { user: '1000', group: '1000' }),
          file('/etc/app/app.conf', 'x', { user: 'app', group: 'app' }),
          file('/etc/app/group.conf', 'x', { user: 'root', group: 'app' }),
        ],
        units: [unit('app.service')],
      },
      [{ name: 'chrony' }, { name: 'jq', version: '1.6-2.1' }],
    );
    const actions = plan(undefined, c, disk(undefined));
    expect(brief(actions)).toEqual([
      'writeFile /etc/app/by-id.conf',
      'writeFile /etc/apt/keyrings/repo.gpg',
      'writeFile /etc/apt/sources.list.d/repo.list',
      'writeFile /etc/systemd/system/app.service',
      'installPackages',
      'writeFile /etc/app/app.conf',
      'writeFile /etc/app/group.conf',
      'daemonReload',
      'enable app.service',
      'start app.service',
    ]);
    expect(actions[4]).toEqual({
      kind: 'installPackages',
      packages: [{ name: 'chrony' }, { name: 'jq', version: '1.6-2.1' }],
      reason: 'chrony new, jq new',
    });
    expect(formatPlan(actions)).toContain('  5. install chrony jq=1.6-2.1 — chrony new, jq new');
    expect(plan(c, clone(c), disk(c)).filter((a) => a.kind === 'installPackages')).toEqual([]);
  });

  it('installs only what is new or pinned to another version; never removes a package', () => {
    const last = withPackages(base, [{ name: 'a' }, { name: 'b', version: '1' }, { name: 'c' }]);
    const next = withPackages(base, [{ name: 'a' }, { name: 'b', version: '2' }, { name: 'd' }]);
    expect(plan(last, next, disk(last))).toEqual([
      {
        kind: 'installPackages',
        packages: [{ name: 'b', version: '2' }, { name: 'd' }],
        reason: 'b 1 → 2, d new',
      },
    ]);
    const unpinned = withPackages(base, [{ name: 'a', version: '3' }]);
    expect(plan(unpinned, withPackages(base, [{ name: 'a' }]), disk(unpinned))).toEqual([
      { kind: 'installPackages', packages: [{ name: 'a' }], reason: 'a 3 → any version' },
    ]);
    // c left the config: nothing to do (a package is never removed in place)
    expect(
      plan(last, withPackages(base, [{ name: 'a' }, { name: 'b', version: '1' }]), disk(last)),
    ).toEqual([]);
  });
  it('drift: a declared package the database shows missing, at another version or half-installed is installed again, when the repair allows it', () => {
    const c = withPackages(base, [
      { name: 'a' },
      { name: 'b', version: '1' },
      { name: 'c' },
      { name: 'd', version: '2' },
    ]);
    const observed: ObservedDisk = {
      ...disk(c),
      packages: new Map([
        ['a', { version: '9', state: 'installed' }], // any version will do
        ['b', { version: '1.1', state: 'installed' }],
        ['c', { version: '3', state: 'config-files' }],
        ['d', { version: '0:2', state: 'half-configured' }],
      ]),
    };
    expect(plan(c, clone(c), observed)).toEqual([
      {
        kind: 'installPackages',
        packages: [{ name: 'b', version: '1' }, { name: 'c' }, { name: 'd', version: '2' }],
        reason:
          'b drifted: installed 1.1, expected installed 1, c drifted: config-files 3, expected installed, d drifted: half-configured 0:2, expected installed 2',
      },
    ]);
    // not observed (no database): nothing; a repair that excludes packages (Report on a revert): nothing
    expect(plan(c, clone(c), disk(c))).toEqual([]);
    const noPackages: DriftRepair = { path: () => true, unit: () => true, package: () => false };
    expect(plan(c, clone(c), observed, noPackages)).toEqual([]);
    // as declared: nothing
    const fine: ObservedDisk = {
      ...disk(c),
      packages: new Map([
        ['a', { version: '1', state: 'installed' }],
        ['b', { version: '0:1', state: 'installed' }],
        ['c', { version: '1', state: 'triggers-pending' }],
        ['d', { version: '2', state: 'installed' }],
      ]),
    };
    expect(plan(c, clone(c), fine)).toEqual([]);
  });
});
