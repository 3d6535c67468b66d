import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../log/logger.js';
import type { Reporter } from './agent.js';
import { immediateAgent } from './immediate.js';
import type { Source, SourceEvents } from './source.js';
import { depsFor } from './local.js';
import { config, desiredOf, file, unit } from './testing/fixtures.js';
import { DriftMonitor } from './drift/monitor.js';
import { SystemctlSystemd } from './systemd.js';
import { SystemctlUnitStates } from './unit-state.js';

let root: string;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'oscar-agent-'));
  await mkdir(join(root, 'var/lib/oscar'), { recursive: true });
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

/** A source the test drives by hand. */
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

describe('Agent', () => {
  it('retries a failed apply, but not one that needs a new machine: it waits for the next state', async () => {
    const stateDir = join(root, 'var/lib/oscar');
    const source = new HandSource();
    const outcomes: string[] = [];
    const reporter: Reporter = {
      desired: () => undefined,
      applied: (r) => outcomes.push(`applied ${r.checksum.slice(0, 4)}`),
      failed: (_c, e) => outcomes.push(`failed ${e.name}`),
      sourceFailed: () => undefined,
    };
    const agent = immediateAgent({
      source,
      deps: depsFor({ root, stateDir }),
      reporters: [reporter],
      log: silentLogger(),
      retryBaseMs: 5,
      retryMaxMs: 5,
    });
    await agent.start();
    const debian = config([], [file('/etc/x', 'x\n')]);
    source.events?.onDesired(desiredOf(debian));
    await agent.idle();
    source.events?.onDesired(desiredOf({ ...debian, type: 'flatcar' }));
    await agent.idle();
    await new Promise((r) => setTimeout(r, 100)); // twenty retry delays: none may come
    expect(outcomes).toEqual([
      `applied ${desiredOf(debian).checksum.slice(0, 4)}`,
      'failed ReplacementNeeded',
    ]);
    // a new state is applied as usual
    const next = config([], [file('/etc/x', 'x2\n')]);
    source.events?.onDesired(desiredOf(next));
    await agent.idle();
    expect(outcomes.at(-1)).toBe(`applied ${desiredOf(next).checksum.slice(0, 4)}`);
    // a state oscar's rules refuse (handed over without the source's check) is not retried either
    const invalid = config([], [file('/etc/x/../../y', 'x\n')]);
    source.events?.onDesired(desiredOf(invalid));
    await agent.idle();
    await new Promise((r) => setTimeout(r, 100));
    expect(outcomes.slice(-1)).toEqual(['failed InvalidConfigError']);
    expect(agent.applied).toBe(desiredOf(next).checksum);
    await agent.stop();
  });
});

describe('Agent and drift reverts', () => {
  it('a revert asked for while a failed apply waits for its retry neither runs nor hurries the retry', async () => {
    const stateDir = join(root, 'var/lib/oscar');
    const source = new HandSource();
    const outcomes: string[] = [];
    const reporter: Reporter = {
      desired: () => undefined,
      applied: (r) => outcomes.push(`applied ${r.checksum.slice(0, 4)}`),
      failed: () => outcomes.push('failed'),
      sourceFailed: () => undefined,
      reverted: () => outcomes.push('reverted'),
    };
    const agent = immediateAgent({
      source,
      deps: depsFor({ root, stateDir }),
      reporters: [reporter],
      log: silentLogger(),
      retryBaseMs: 60_000,
      retryMaxMs: 60_000,
    });
    await agent.start();
    const v1 = config([], [file('/etc/x', 'x\n')]);
    source.events?.onDesired(desiredOf(v1));
    await agent.idle();
    // a directory where the next state wants a file: the apply fails, its retry is a minute away
    await mkdir(join(root, 'etc/blocked/y'), { recursive: true });
    source.events?.onDesired(desiredOf(config([], [file('/etc/blocked/y', 'y\n')])));
    await agent.idle();
    agent.revert();
    await agent.idle();
    expect(outcomes).toEqual([`applied ${desiredOf(v1).checksum.slice(0, 4)}`, 'failed']);
    await agent.stop();
  });
});

describe('the agent at idle', () => {
  /** A `systemctl` that only counts its calls: the seam every spawn of systemctl goes through. */
  async function countingSystemctl(): Promise<{ path: string; calls: () => Promise<number> }> {
    const path = join(root, 'systemctl');
    const log = join(root, 'systemctl.calls');
    await writeFile(path, `#!/bin/sh\necho "$*" >> '${log}'\n`, { mode: 0o755 });
    const calls = async (): Promise<number> =>
      (await readFile(log, 'utf8').catch(() => '')).split('\n').filter(Boolean).length;
    return { path, calls };
  }

  async function idleSpawns(drift: boolean): Promise<number> {
    const stateDir = join(root, 'var/lib/oscar');
    const systemctl = await countingSystemctl();
    const deps = {
      ...depsFor({ root, stateDir }),
      systemd: new SystemctlSystemd({ systemctl: systemctl.path }),
      unitStates: new SystemctlUnitStates(systemctl.path),
    };
    const source = new HandSource();
    const late: { agent?: { revert(): void } } = {};
    const monitor = drift
      ? new DriftMonitor({
          root,
          owners: false,
          units: deps.unitStates,
          auditIntervalMs: 50,
          watch: false,
          report: () => undefined,
          requestRevert: () => late.agent?.revert(),
          log: silentLogger(),
        })
      : undefined;
    const agent = immediateAgent({
      source,
      deps,
      reporters: [],
      log: silentLogger(),
      ...(monitor ? { drift: monitor } : {}),
    });
    late.agent = agent;
    await agent.start();
    source.events?.onDesired(desiredOf(config([unit('app.service')], [file('/etc/x', 'x\n')])));
    await agent.idle();
    expect(agent.applied).toBeDefined();
    const afterApply = await systemctl.calls();
    await new Promise((r) => setTimeout(r, 400)); // eight audit intervals
    const spawns = (await systemctl.calls()) - afterApply;
    await agent.stop();
    return spawns;
  }

  it('without drift detection (--no-drift) spawns no systemctl; with it, the audit asks systemd', async () => {
    expect(await idleSpawns(false)).toBe(0);
    await rm(join(root, 'systemctl.calls'), { force: true });
    expect(await idleSpawns(true)).toBeGreaterThan(0); // the count sees spawns when there are some
  });
});
