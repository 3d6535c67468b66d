// The agent loop with its drift monitor on a directory root (LocalSystemd: the jobs a node would
// run go to STATE/would-run.log): Revert puts back and restarts only the unit concerned, Report
// only reports, Ignore does nothing, and the agent's own applies are never drift.
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { DriftPolicy } from '../../api/constants.js';
import { memoryLogger } from '../../log/memory.js';
import { type Agent, type Reporter } from '../agent.js';
import { immediateAgent } from '../immediate.js';
import { Journal } from '../journal.js';
import { depsFor } from '../local.js';
import type { Source, SourceEvents } from '../source.js';
import { config, desiredOf, file, unit } from '../testing/fixtures.js';
import { DriftMonitor, type DriftReport } from './monitor.js';
import { RevertBackoff } from './policy.js';
import { revertDrift } from '../revert.js';
import { sleep } from '../../api/util.js';

let root: string;
let stateDir: string;
const stops: (() => Promise<void>)[] = [];

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'oscar-agent-drift-'));
  stateDir = join(root, 'var/lib/oscar');
  await mkdir(stateDir, { recursive: true });
});

afterEach(async () => {
  for (const s of stops.splice(0)) await s();
  await rm(root, { recursive: true, force: true });
});

class HandSource implements Source {
  readonly description = 'hand';
  events: SourceEvents | undefined;
  start(events: SourceEvents): Promise<void> {
    this.events = events;
    return Promise.resolve();
  }
  stop(): Promise<void> {
    return Promise.resolve();
  }
}

function version(
  n: string,
  policy?: DriftPolicy,
  bPolicy?: DriftPolicy,
): ReturnType<typeof desiredOf> {
  const c = config(
    [
      unit('a.service', { filePaths: ['/etc/app/a.conf'] }),
      unit('b.service', { filePaths: ['/etc/app/b.conf'] }),
    ],
    [
      file('/etc/app/a.conf', `a ${n}\n`),
      file('/etc/app/b.conf', `b ${n}\n`, bPolicy ? { driftPolicy: bPolicy } : {}),
    ],
  );
  return desiredOf(policy ? { ...c, driftPolicy: policy } : c);
}

async function start() {
  const source = new HandSource();
  const reports: DriftReport[] = [];
  const reverted: string[] = [];
  const { log, records } = memoryLogger('agent');
  const deps = depsFor({ root, stateDir });
  const reporter: Reporter = {
    desired: () => undefined,
    applied: () => undefined,
    failed: () => undefined,
    sourceFailed: () => undefined,
    drift: (r) => reports.push(r),
    reverted: (r) => reverted.push(r.touchedUnits.map((u) => `${u.action} ${u.name}`).join(',')),
  };
  const late: { agent?: Agent } = {}; // the monitor asks the agent, which takes the monitor
  const monitor = new DriftMonitor({
    root,
    owners: deps.owners,
    auditIntervalMs: 0,
    debounceMs: 20,
    report: (r) => reporter.drift?.(r),
    requestRevert: () => late.agent?.revert(),
    log,
    backoff: new RevertBackoff({ baseMs: 50, maxMs: 50 }),
  });
  const agent = immediateAgent({
    source,
    deps,
    reporters: [reporter],
    log,
    drift: monitor,
  });
  late.agent = agent;
  await agent.start();
  stops.push(() => agent.stop());
  const want = async (d: ReturnType<typeof desiredOf>): Promise<void> => {
    source.events?.onDesired(d);
    await agent.idle();
    await monitor.idle();
  };
  const jobs = async (): Promise<string[]> =>
    (await readFile(join(stateDir, 'would-run.log'), 'utf8').catch(() => ''))
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => l.split(' ').slice(1).join(' '));
  const settle = async (): Promise<void> => {
    await sleep(40);
    await monitor.idle();
    await agent.idle();
    await monitor.idle();
  };
  return { agent, monitor, reports, reverted, records, want, jobs, settle };
}

const conf = (p: string): Promise<string> => readFile(join(root, p), 'utf8');

describe('the agent with drift detection (directory root)', () => {
  it('Revert: a drifted file is put back and only the unit that lists it restarts; Report only reports', async () => {
    const t = await start();
    await t.want(version('1', 'Revert'));
    const before = (await t.jobs()).length;
    await writeFile(join(root, 'etc/app/a.conf'), 'edited by hand\n');
    for (let i = 0; i < 100 && (await conf('etc/app/a.conf')) !== 'a 1\n'; i++) await t.settle();
    expect(await conf('etc/app/a.conf')).toBe('a 1\n');
    await t.settle();
    expect((await t.jobs()).slice(before)).toEqual(['restart a.service']);
    expect(t.reverted).toEqual(['restart a.service']);
    expect(t.reports.at(-1)).toMatchObject({ items: [], reverted: true });
    expect(t.reports.find((r) => r.added.length > 0)?.added[0]).toMatchObject({
      path: '/etc/app/a.conf',
      reason: 'content',
      policy: 'Revert',
    });

    // the same config with Report: reported, left as found, nothing restarted
    await t.want(version('1', 'Report'));
    const jobs = (await t.jobs()).length;
    await writeFile(join(root, 'etc/app/a.conf'), 'edited again\n');
    // on a loaded machine the event may come after one settle: wait for the report (bounded)
    for (let i = 0; i < 100 && t.monitor.drifted.length === 0; i++) await t.settle();
    await t.settle();
    expect(await conf('etc/app/a.conf')).toBe('edited again\n');
    expect(t.monitor.drifted.map((i) => `${i.path ?? ''} ${i.policy}`)).toEqual([
      '/etc/app/a.conf Report',
    ]);
    expect((await t.jobs()).length).toBe(jobs);
  });

  it('Ignore: nothing happens, while a Revert file changed at the same time is put back', async () => {
    const t = await start();
    await t.want(version('1', 'Revert', 'Ignore'));
    const before = (await t.jobs()).length;
    await writeFile(join(root, 'etc/app/b.conf'), 'tuned\n');
    await writeFile(join(root, 'etc/app/a.conf'), 'edited\n');
    for (let i = 0; i < 100 && (await conf('etc/app/a.conf')) !== 'a 1\n'; i++) await t.settle();
    await t.settle();
    expect(await conf('etc/app/a.conf')).toBe('a 1\n');
    expect(await conf('etc/app/b.conf')).toBe('tuned\n');
    expect((await t.jobs()).slice(before)).toEqual(['restart a.service']);
    for (const r of t.reports) expect(r.items.map((i) => i.path)).not.toContain('/etc/app/b.conf');
    // and an apply of a new state leaves the tuned file alone too, unless it changes it
    await t.want(version('2', 'Revert', 'Ignore'));
    expect(await conf('etc/app/b.conf')).toBe('b 2\n'); // its declaration changed: written
    await writeFile(join(root, 'etc/app/b.conf'), 'tuned again\n');
    const v2 = version('2', 'Revert', 'Ignore').config;
    await t.want(desiredOf({ ...v2, units: [...v2.units, unit('c.service')] }));
    expect(await conf('etc/app/b.conf')).toBe('tuned again\n');
  });

  it("the agent's own applies are never drift", async () => {
    const t = await start();
    for (const n of ['1', '2', '3', '4']) await t.want(version(n, 'Revert'));
    await t.settle();
    expect(t.reports).toMatchObject([{ trigger: 'start', items: [] }]); // nothing but the start's
    expect(t.reverted).toEqual([]);
    expect(t.records().filter((r) => String(r.msg).startsWith('drift'))).toEqual([]);
  });
});

describe('oscar plan (planFor) and drift', () => {
  it('shows drift as the reason of an action; an Ignore path drifts silently; a revert plan repairs only Revert drift', async () => {
    const deps = depsFor({ root, stateDir });
    const { applyDesired, planFor } = await import('../apply.js');
    const { formatPlan } = await import('../plan.js');
    const v1 = version('1', undefined, 'Ignore');
    await applyDesired(deps, v1);
    await writeFile(join(root, 'etc/app/a.conf'), 'edited\n');
    await writeFile(join(root, 'etc/app/b.conf'), 'tuned\n');
    const text = formatPlan(await planFor(deps, v1));
    expect(text).toBe(
      '  1. write /etc/app/a.conf (0644 root:root, 4 B) — drift on disk: content differ\n' +
        '  2. restart a.service — /etc/app/a.conf changed\n' +
        '2 action(s); restarts a.service\n',
    );
    // Report drift is not a revert's to repair
    expect(await planFor(deps, v1, { revert: true })).toEqual([]);
  });
});

describe('revertDrift', () => {
  it("with a scope (the monitor's Revert drift): puts back and restarts only what it names", async () => {
    const deps = depsFor({ root, stateDir });
    const v1 = version('1', 'Revert');
    const { applyDesired } = await import('../apply.js');
    await applyDesired(deps, v1);
    await writeFile(join(root, 'etc/app/a.conf'), 'edited\n');
    await writeFile(join(root, 'etc/app/b.conf'), 'edited\n');
    const { log } = memoryLogger('agent');
    const scope = {
      paths: new Set(['/etc/app/b.conf']),
      units: new Set<string>(),
      packages: new Set<string>(),
    };
    const result = await revertDrift(deps, log, scope);
    expect(
      result?.actions.map(
        (a) => `${a.kind} ${'path' in a ? a.path : ''}${'unit' in a ? a.unit : ''}`,
      ),
    ).toEqual(['writeFile /etc/app/b.conf', 'restart b.service']);
    expect(await conf('etc/app/b.conf')).toBe('b 1\n');
    expect(await conf('etc/app/a.conf')).toBe('edited\n'); // not named: its own revert follows
    // without a scope: all of the Revert drift
    const all = await revertDrift(deps, log);
    expect(all?.actions.map((a) => a.kind)).toEqual(['writeFile', 'restart']);
    expect(await conf('etc/app/a.conf')).toBe('a 1\n');
  });

  it('waits for an interrupted apply of another state to resume instead of undoing half of it', async () => {
    const deps = depsFor({ root, stateDir });
    const v1 = version('1', 'Revert');
    const { applyDesired } = await import('../apply.js');
    await applyDesired(deps, v1);
    const v2 = version('2', 'Revert');
    await Journal.start(stateDir, v2.checksum, []);
    const { log, records } = memoryLogger('agent');
    await writeFile(join(root, 'etc/app/a.conf'), 'a 2\n'); // v2's write got this far
    expect(await revertDrift(deps, log)).toBeUndefined();
    expect(records()).toMatchObject([
      {
        msg: 'drift revert postponed: an interrupted apply resumes first',
        checksum: v2.checksum.slice(0, 12),
      },
    ]);
    expect(await conf('etc/app/a.conf')).toBe('a 2\n');
  });
});
