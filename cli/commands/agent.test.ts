import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { logReporter } from '../../agent/agent.js';
import { immediateAgent } from '../../agent/immediate.js';
import { applyDesired } from '../../agent/apply.js';
import { depsFor } from '../../agent/local.js';
import type { Source } from '../../agent/source.js';
import type { Desired } from '../../agent/state.js';
import { readLastApplied } from '../../agent/state.js';
import { LocalSystemd, type UnitJob } from '../../agent/systemd.js';
import { config, desiredOf, file, unit } from '../../agent/testing/fixtures.js';
import { memoryLogger } from '../../log/memory.js';
import { Deadline } from '../support/shutdown.js';
import { stopRunning } from './agent.js';

let root: string;
beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'oscar-agent-stop-'));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

/** Delivers one desired state; nothing to watch. */
function once(desired: Desired): Source {
  return {
    description: 'test',
    start: (events) => {
      events.onDesired(desired);
      return Promise.resolve();
    },
    stop: () => Promise.resolve(),
  };
}

/** A node whose restart of `hung` never returns (a unit that does not stop, a job stuck). */
class HangingSystemd extends LocalSystemd {
  started = false;
  override async job(job: UnitJob, name: string): Promise<void> {
    if (job === 'restart' && name === 'app.service') {
      this.started = true;
      return new Promise(() => undefined);
    }
    return super.job(job, name);
  }
}

describe('oscar agent on SIGTERM', () => {
  it('stops by the deadline while a unit job hangs; the journal lets the next start finish the apply', async () => {
    const v1 = desiredOf(
      config([unit('app.service', { filePaths: ['/etc/app.conf'] })], [file('/etc/app.conf', '1')]),
    );
    const v2 = desiredOf(
      config([unit('app.service', { filePaths: ['/etc/app.conf'] })], [file('/etc/app.conf', '2')]),
    );
    const base = depsFor({ root });
    await applyDesired(base, v1);

    const systemd = new HangingSystemd(root, join(base.stateDir, 'would-run.log'));
    const { log, records } = memoryLogger('agent');
    const agent = immediateAgent({
      source: once(v2),
      deps: { ...base, systemd },
      reporters: [logReporter(log)],
      log,
    });
    await agent.start();
    while (!systemd.started) await new Promise((r) => setTimeout(r, 10));

    const t0 = Date.now();
    await stopRunning({ agent, reporters: [], closers: [] }, new Deadline(400), log);
    expect(Date.now() - t0).toBeLessThan(1_000);
    expect(records().map((r) => r.msg)).toContain(
      'an apply is still running at the shutdown deadline; its journal resumes it on the next start',
    );
    // the file is written, the restart journaled as begun; last-applied is still v1
    expect(await readFile(join(root, 'etc/app.conf'), 'utf8')).toBe('2');
    expect(JSON.parse(await readFile(join(base.stateDir, 'journal.json'), 'utf8'))).toMatchObject({
      checksum: v2.checksum,
    });
    expect((await readLastApplied(base.stateDir))?.checksum).toBe(v1.checksum);

    // the next start resumes the journal (the restart is the one action left) and converges
    const result = await applyDesired(base, v2);
    expect(result.resumed).toBe(true);
    expect(result.touchedUnits.map((u) => `${u.action} ${u.name}`)).toEqual([
      'restart app.service',
    ]);
    expect((await readLastApplied(base.stateDir))?.checksum).toBe(v2.checksum);
  });
});
