// The state directory's lock, with real processes: a lock file naming a PID that is alive but not
// an agent (PID 1, the situation after a reboot), a holder killed with SIGKILL, and many agents
// racing for a stale lock at the same instant. The race's winner holds the lock until every racer
// has tried: the earlier version let it go after 400 ms, so under load a racer that started after
// that took the lock in its turn — two "locked" in one round that were never held together (the
// lock was right, the count was not). Now two "locked" in a round can only be two holders at once;
// a lock that excludes nobody fails every round. OSCAR_LOCK_ROUNDS=40 runs the stress variant.
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { lockStateDir } from './lock.js';

let work: string;
let child: string;
let stateDir: string;

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'oscar-lock-'));
  child = join(work, 'lock-child.mjs');
  const esbuild = await import('esbuild');
  await esbuild.build({
    entryPoints: [fileURLToPath(new URL('./testing/lock-child.ts', import.meta.url))],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    outfile: child,
    logLevel: 'error',
  });
}, 60_000);

afterAll(async () => {
  await rm(work, { recursive: true, force: true });
});

let n = 0;
beforeEach(async () => {
  stateDir = join(work, `state${n++}`);
  await mkdir(stateDir, { mode: 0o700 });
});

interface Child {
  pid: number;
  /** The first line the child printed ("locked" or "held …"). */
  said: Promise<string>;
  exited: Promise<void>;
  kill(): void;
  /** Ends its stdin: a holder started with HOLD_MS "stdin" lets go. */
  release(): void;
}

function start(startMs: number, holdMs: number | 'stdin'): Child {
  const p = spawn(process.execPath, [child, stateDir, String(startMs), String(holdMs)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  // a holder for a time never reads its stdin; one held "until stdin ends" waits for release()
  if (holdMs !== 'stdin') p.stdin.end();
  let out = '';
  const said = new Promise<string>((resolve) => {
    p.stdout.on('data', (b: Buffer) => {
      out += b.toString();
      if (out.includes('\n')) resolve(out.split('\n')[0] ?? '');
    });
    p.on('exit', () => {
      resolve(out.split('\n')[0] ?? '');
    });
  });
  const exited = new Promise<void>((resolve) =>
    p.on('exit', () => {
      resolve();
    }),
  );
  return {
    pid: p.pid ?? -1,
    said,
    exited,
    kill: () => p.kill('SIGKILL'),
    release: () => p.stdin.end(),
  };
}

/**
 * One round: a stale lock (its holder killed), then `racers` agents trying at the same instant;
 * whoever takes it holds it until every racer has said what it got, so a racer the load made
 * start late still tries against the holder. What each said.
 */
async function race(racers: number): Promise<string[]> {
  const stale = start(0, 60_000);
  expect(await stale.said).toBe('locked');
  stale.kill();
  await stale.exited;
  const at = Date.now() + 300;
  const children = Array.from({ length: racers }, () => start(at, 'stdin'));
  const said = await Promise.all(children.map((c) => c.said));
  for (const c of children) c.release();
  await Promise.all(children.map((c) => c.exited));
  return said;
}

/** Rounds of the stress variant: OSCAR_LOCK_ROUNDS=40 for a longer run. */
const ROUNDS = Number(process.env.OSCAR_LOCK_ROUNDS ?? 8);

describe('lockStateDir', () => {
  it('one holder at a time in a process; released, it can be taken again', async () => {
    const unlock = await lockStateDir(stateDir);
    await expect(lockStateDir(stateDir)).rejects.toThrow(
      new RegExp(`another oscar agent \\(pid ${process.pid}\\) holds ${stateDir}/agent.lock`),
    );
    await unlock();
    const again = await lockStateDir(stateDir);
    await again();
  });

  it('a lock file naming a live PID that is no agent (PID 1 after a reboot) does not block', async () => {
    // the old scheme's file and the new one, both naming init
    await writeFile(join(stateDir, 'agent.pid'), '1\n');
    await writeFile(join(stateDir, 'agent.lock'), '1\n');
    const unlock = await lockStateDir(stateDir);
    expect(await readFile(join(stateDir, 'agent.lock'), 'utf8')).toBe(`${process.pid}\n`);
    await unlock();
  });

  it('a holder killed with SIGKILL leaves nothing that blocks the next agent', async () => {
    const holder = start(0, 60_000);
    expect(await holder.said).toBe('locked');
    const second = start(0, 0);
    expect(await second.said).toMatch(
      new RegExp(`^held another oscar agent \\(pid ${holder.pid}\\)`),
    );
    holder.kill();
    await holder.exited;
    const third = start(0, 0);
    expect(await third.said).toBe('locked');
    await Promise.all([second.exited, third.exited]);
  });

  it('agents racing for a stale lock at the same instant: exactly one holds it while all the others try, every round', async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const said = await race(8);
      expect(
        said.filter((s) => s === 'locked'),
        `round ${String(round)}: ${said.join(' | ')}`,
      ).toHaveLength(1);
      expect(said.filter((s) => s.startsWith('held another oscar agent'))).toHaveLength(7);
    }
  }, 300_000);
});
