// Crash safety: a real agent process (agent/testing/apply-child.ts, bundled once so each start is
// a plain `node` start) applying a large change into a directory root is killed with SIGKILL at a
// random instant inside the apply, 100 times. After each kill no file may be half-written (every
// path holds the old or the new bytes, or is absent if it is new), and after a restart the root
// converges to the new config with no unit restarted twice (jobs are logged to would-run.log in
// directory mode).
//
// Every kill lands inside an apply whatever the machine's load: the kill's clock starts when the
// child's journal appears (an inotify event: the apply has begun), and the child holds before a
// randomly chosen unit job until it is killed, so it cannot finish first. A kill lands either at
// the random instant (in the file writes or between unit jobs) or, if the child got that far, at
// its hold.
import { spawn } from 'node:child_process';
import { cp, mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { existsSync, watch } from 'node:fs';
import { createInterface } from 'node:readline';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyDesired, planFor } from './apply.js';
import { entriesOf } from './plan.js';
import { Journal } from './journal.js';
import { LocalSystemd } from './systemd.js';
import { bigConfig, desiredOf } from './testing/fixtures.js';

const TRIALS = 100;
const before = desiredOf(bigConfig(200, 20, 'one'));
const after = desiredOf(bigConfig(200, 20, 'two'));

let work: string;
let child: string;
let template: string;
/** The same apply in a child process, from its journal's appearance to its exit (cold code). */
let childApplyMs = 0;

beforeAll(async () => {
  // tmpfs when there is one: fsync is then cheap and 100 trials stay quick; a SIGKILL (unlike a
  // power cut) does not depend on fsync, so the property tested is the same
  work = await mkdtemp(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'oscar-crash-'));
  child = join(work, 'apply-child.mjs');
  const esbuild = await import('esbuild');
  await esbuild.build({
    entryPoints: [fileURLToPath(new URL('./testing/apply-child.ts', import.meta.url))],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    outfile: child,
    logLevel: 'error',
  });
  await writeFile(join(work, 'after.json'), after.bytes);
  // a root that has `before` applied, copied for every trial
  template = join(work, 'template');
  const stateDir = join(template, 'var/lib/oscar');
  await mkdir(stateDir, { recursive: true });
  const deps = {
    root: template,
    stateDir,
    systemd: new LocalSystemd(template, join(stateDir, 'would-run.log')),
    owners: false,
  };
  await applyDesired(deps, before);
  // the kills are spread over what the child takes, measured here, at this load; when the machine
  // is slower during the trials, more of them land at the child's hold
  const childProbe = join(work, 'child-probe');
  await cp(template, childProbe, { recursive: true });
  childApplyMs = (await runChild(childProbe, {})).applyMs;
  await rm(childProbe, { recursive: true, force: true });
}, 120_000);

afterAll(async () => {
  await rm(work, { recursive: true, force: true });
});

/** How a child run ended: by the random kill, at its hold, or by finishing its apply. */
type Ending = 'timer' | 'hold' | 'finished';

/**
 * Starts the child. With `kill`: the child holds before unit job `kill.holdBeforeJob`, and is
 * killed `kill.afterMs` after its journal appears or at its hold, whichever comes first. Without
 * it, the child runs to the end; `applyMs` is then the time from the journal's appearance to exit.
 */
function runChild(
  root: string,
  { kill }: { kill?: { afterMs: number; holdBeforeJob: number } },
): Promise<{ ending: Ending; applyMs: number }> {
  const stateDir = join(root, 'var/lib/oscar');
  return new Promise((resolve, reject) => {
    // watched before the child starts, so the journal's creation cannot be missed
    const watcher = watch(stateDir);
    const args = [child, root, stateDir, join(work, 'after.json')];
    if (kill) args.push(String(kill.holdBeforeJob));
    const p = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    p.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    let timer: NodeJS.Timeout | undefined;
    let journaled = 0;
    let ending: Ending = 'finished';
    const killNow = (why: Ending): void => {
      if (p.exitCode !== null || p.signalCode !== null || p.killed) return;
      ending = why;
      p.kill('SIGKILL');
    };
    watcher.on('change', (_event, name) => {
      if (name !== 'journal.json' || journaled > 0) return;
      journaled = performance.now(); // the apply has begun: the clock starts
      if (kill)
        timer = setTimeout(() => {
          killNow('timer');
        }, kill.afterMs);
    });
    createInterface({ input: p.stdout }).on('line', (line) => {
      if (line === 'holding') killNow('hold');
    });
    p.on('error', reject);
    p.on('exit', (code, signal) => {
      watcher.close();
      if (timer) clearTimeout(timer);
      const applyMs = journaled > 0 ? performance.now() - journaled : 0;
      if (signal === 'SIGKILL' && ending !== 'finished') resolve({ ending, applyMs });
      else if (code === 0 && !kill) resolve({ ending, applyMs });
      else
        reject(
          new Error(
            `apply-child exited ${code ?? signal ?? '?'}${kill ? ' instead of being killed' : ''}: ${stderr}`,
          ),
        );
    });
  });
}

describe('crash safety (SIGKILL during an apply)', () => {
  it(`${TRIALS} kills at random instants: never a half-written file, converges, no unit restarted twice`, async () => {
    const old = entriesOf(before.config);
    const want = entriesOf(after.config);
    let interrupted = 0;
    const endings: Record<Ending, number> = { timer: 0, hold: 0, finished: 0 };
    const unitJobs = after.config.units.length; // each changed unit: one restart or try-restart
    for (let trial = 0; trial < TRIALS; trial++) {
      const root = join(work, `t${trial}`);
      await cp(template, root, { recursive: true });
      const stateDir = join(root, 'var/lib/oscar');
      const logBefore =
        (await readFile(join(stateDir, 'would-run.log'), 'utf8')).split('\n').length - 1;
      const delay = Math.random() * childApplyMs;
      const holdBeforeJob = Math.floor(Math.random() * unitJobs);
      const { ending } = await runChild(root, { kill: { afterMs: delay, holdBeforeJob } });
      endings[ending]++;

      // 1. every managed path holds exactly the old or the new bytes
      for (const [path, entry] of want) {
        let bytes: Buffer | undefined;
        try {
          bytes = await readFile(join(root, path));
        } catch {
          bytes = undefined;
        }
        const oldBytes = old.get(path)?.content;
        const ok =
          (bytes === undefined && oldBytes === undefined) ||
          bytes?.equals(entry.content) ||
          (oldBytes !== undefined && bytes?.equals(oldBytes));
        expect(
          ok,
          `trial ${trial} (kill after ${delay.toFixed(0)} ms): ${path} is half-written`,
        ).toBe(true);
      }
      if (ending !== 'finished' && (await Journal.read(stateDir)) !== undefined) interrupted++;

      // 2. a restarted agent converges (every 10th trial in a fresh process, the rest in this one:
      // the same code, without paying a process start each time)
      const systemd = new LocalSystemd(root, join(stateDir, 'would-run.log'));
      const deps = { root, stateDir, systemd, owners: false };
      if (trial % 10 === 0) await runChild(root, {});
      else await applyDesired(deps, after);
      expect(await planFor(deps, after), `trial ${trial}: not converged`).toEqual([]);
      expect(await Journal.read(stateDir)).toBeUndefined();

      // 3. each changed unit restarted exactly once over both runs (half of them try-restart: not enabled)
      const jobs = (await systemd.loggedJobs()).slice(logBefore);
      const restarts = new Map<string, number>();
      for (const j of jobs)
        if (j.job === 'restart' || j.job === 'tryRestart')
          restarts.set(j.unit, (restarts.get(j.unit) ?? 0) + 1);
      expect([...restarts.keys()].sort(), `trial ${trial}`).toEqual(
        after.config.units.map((u) => u.name).sort(),
      );
      for (const [u, n] of restarts) expect(n, `trial ${trial}: ${u} restarted ${n} times`).toBe(1);
      // no temp file survives the second run in the directories oscar writes
      for (const d of ['etc/big/d0', 'etc/systemd/system']) {
        expect((await readdir(join(root, d))).filter((n) => n.includes('.oscar-tmp'))).toEqual([]);
      }
      await rm(root, { recursive: true, force: true });
    }
    console.log(
      `crash test: ${TRIALS} trials, ${interrupted} killed mid-apply (${endings.timer} at the random instant, ${endings.hold} at the hold before a unit job; apply ≈ ${childApplyMs.toFixed(0)} ms in a child)`,
    );
    // every kill landed inside an apply (its journal was there to resume), or the test proves less
    // than it says
    expect(interrupted).toBe(TRIALS);
  }, 900_000);
});
