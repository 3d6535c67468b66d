// Crash safety: a real agent process (agent/testing/apply-child.ts, bundled once so each start is
// a plain `node` start) applying a large change into a directory root is killed with SIGKILL at a
// random instant, 100 times. After each kill no file may be half-written (every path holds the old
// or the new bytes, or is absent if it is new), and after a restart the root converges to the new
// config with no unit restarted twice (jobs are logged to would-run.log in directory mode).
import { spawn } from 'node:child_process';
import { cp, mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
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
let applyMs = 0;
/** The same apply in a child process, from holding the lock to its exit (cold code, this load). */
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
  // how long the change takes in a process, to spread the kills over it
  const probe = join(work, 'probe');
  await cp(template, probe, { recursive: true });
  const probeState = join(probe, 'var/lib/oscar');
  const t0 = performance.now();
  await applyDesired(
    {
      ...deps,
      root: probe,
      stateDir: probeState,
      systemd: new LocalSystemd(probe, join(probeState, 'would-run.log')),
    },
    after,
  );
  applyMs = performance.now() - t0;
  // the kills are spread over what the child takes, which a loaded machine stretches far beyond
  // the warm in-process figure (with the in-process figure, 11 of 100 kills landed in an apply at
  // load 7; the test needs a quarter)
  const childProbe = join(work, 'child-probe');
  await cp(template, childProbe, { recursive: true });
  childApplyMs = (await runChild(childProbe, undefined)).applyMs;
  await rm(childProbe, { recursive: true, force: true });
}, 120_000);

afterAll(async () => {
  await rm(work, { recursive: true, force: true });
});

/** Starts the child; kills it `delayMs` after it reports it holds the lock (or lets it finish). */
function runChild(
  root: string,
  delayMs: number | undefined,
): Promise<{ killed: boolean; applyMs: number }> {
  return new Promise((resolve, reject) => {
    const p = spawn(
      process.execPath,
      [child, root, join(root, 'var/lib/oscar'), join(work, 'after.json')],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stderr = '';
    p.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    let timer: NodeJS.Timeout | undefined;
    let locked = 0;
    // the clock starts when the child holds the lock, just before it applies
    p.stdout.once('data', () => {
      locked = performance.now();
      if (delayMs !== undefined) timer = setTimeout(() => p.kill('SIGKILL'), delayMs);
    });
    p.on('error', reject);
    p.on('exit', (code, signal) => {
      if (timer) clearTimeout(timer);
      const applyMs = locked > 0 ? performance.now() - locked : 0;
      if (signal === 'SIGKILL') resolve({ killed: true, applyMs });
      else if (code === 0) resolve({ killed: false, applyMs });
      else reject(new Error(`apply-child exited ${code ?? signal ?? '?'}: ${stderr}`));
    });
  });
}

describe('crash safety (SIGKILL during an apply)', () => {
  it(`${TRIALS} kills at random instants: never a half-written file, converges, no unit restarted twice`, async () => {
    const old = entriesOf(before.config);
    const want = entriesOf(after.config);
    let interrupted = 0;
    for (let trial = 0; trial < TRIALS; trial++) {
      const root = join(work, `t${trial}`);
      await cp(template, root, { recursive: true });
      const stateDir = join(root, 'var/lib/oscar');
      const logBefore =
        (await readFile(join(stateDir, 'would-run.log'), 'utf8')).split('\n').length - 1;
      const delay = Math.random() * Math.max(applyMs, childApplyMs) * 1.2;
      const { killed } = await runChild(root, delay);

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
      if (killed && (await Journal.read(stateDir)) !== undefined) interrupted++;

      // 2. a restarted agent converges (every 10th trial in a fresh process, the rest in this one:
      // the same code, without paying a process start each time)
      const systemd = new LocalSystemd(root, join(stateDir, 'would-run.log'));
      const deps = { root, stateDir, systemd, owners: false };
      if (trial % 10 === 0) await runChild(root, undefined);
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
      `crash test: ${TRIALS} trials, ${interrupted} killed mid-apply (apply ≈ ${applyMs.toFixed(0)} ms in-process, ${childApplyMs.toFixed(0)} ms in a child)`,
    );
    // the kills must actually land inside applies, or the test proves nothing (36-42 of 100 here;
    // 11-18 on a machine at load 7-9, where the child slows down after its timing was taken)
    expect(interrupted).toBeGreaterThanOrEqual(TRIALS / 10);
  }, 900_000);
});
