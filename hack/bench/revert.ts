// A revert of drift at scale, in process: the agent's real drift monitor (its inotify watcher and
// reader) and the real executor (agent/apply.ts, its journal, a directory root with the would-run
// systemd) over N files and U units, every path under the Revert policy. Each round edits one
// file that a unit lists, waits for the monitor to report it, then runs the revert as the agent
// does (the applier wrapped by withDrift, agent/applier.ts) and times it: wall clock and the
// process's CPU, which the load of other processes does not stretch. hack/bench/drift.ts measures
// the same end to end on real systemd.
//
//   node --import tsx hack/bench/revert.ts [--files 10000] [--units 50] [--reverts 20]
//       [--profile FILE.cpuprofile]   # V8's CPU profile of the reverts alone (not the setup)
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Session } from 'node:inspector/promises';
import { parseArgs } from 'node:util';
import { applyDesired } from '../../agent/apply.js';
import { nodeApplier, withDrift } from '../../agent/applier.js';
import { DriftMonitor, type DriftReport } from '../../agent/drift/monitor.js';
import { LocalSystemd } from '../../agent/systemd.js';
import { bigConfig, desiredOf } from '../../agent/testing/fixtures.js';
import { silentLogger } from '../../log/logger.js';

const { values } = parseArgs({
  options: {
    files: { type: 'string', default: '10000' },
    units: { type: 'string', default: '50' },
    reverts: { type: 'string', default: '20' },
    dir: { type: 'string' },
    profile: { type: 'string' },
  },
});

function stats(samples: number[]): string {
  const s = [...samples].sort((a, b) => a - b);
  const q = (p: number): number => s[Math.min(s.length - 1, Math.floor(p * s.length))] ?? NaN;
  return `p50 ${q(0.5).toFixed(0)} ms  p95 ${q(0.95).toFixed(0)} ms  max ${(s.at(-1) ?? NaN).toFixed(0)} ms`;
}

const files = Number(values.files);
const units = Number(values.units);
const root = await mkdtemp(join(values.dir ?? tmpdir(), 'oscar-bench-revert-'));
try {
  const stateDir = join(root, 'var/lib/oscar');
  await mkdir(stateDir, { recursive: true });
  const config = { ...bigConfig(files, units, '0'), driftPolicy: 'Revert' as const };
  const deps = {
    root,
    stateDir,
    systemd: new LocalSystemd(root, join(stateDir, 'would-run.log')),
    owners: false,
  };
  let t0 = performance.now();
  await applyDesired(deps, desiredOf(config));
  console.log(
    `revert bench (${new Date().toISOString()}): ${String(files)} files, ${String(units)} units, every path Revert; first apply ${(performance.now() - t0).toFixed(0)} ms`,
  );
  let onReport: ((r: DriftReport) => void) | undefined;
  const monitor = new DriftMonitor({
    root,
    owners: false,
    auditIntervalMs: 0,
    report: (r) => onReport?.(r),
    requestRevert: () => undefined, // the bench runs each revert itself, timed
    log: silentLogger(),
  });
  t0 = performance.now();
  await monitor.start(config);
  console.log(`monitor start (audit, watches): ${(performance.now() - t0).toFixed(0)} ms`);
  const applier = withDrift(nodeApplier(deps, silentLogger()), monitor);
  const revertDrift = applier.revertDrift?.bind(applier);
  if (!revertDrift) throw new Error('the node applier has no revert');

  const session = values.profile !== undefined ? new Session() : undefined;
  if (session) {
    session.connect();
    await session.post('Profiler.enable');
    await session.post('Profiler.start');
  }
  const wall: number[] = [];
  const cpu: number[] = [];
  const actions = new Set<string>();
  for (let i = 0; i < Number(values.reverts); i++) {
    // f{k} for k < units is listed by unit big{k}: its revert restarts the unit
    const f = config.files.find((x) => x.path.endsWith(`/f${String(i % units)}.conf`));
    if (!f) throw new Error('no file');
    const path = join(root, f.path);
    const drifted = new Promise<void>((resolve) => {
      onReport = (r) => {
        if (r.added.some((x) => x.path === f.path)) resolve();
      };
    });
    await writeFile(path, `edited by hand ${String(i)}\n`);
    await drifted;
    const reverted = new Promise<void>((resolve) => {
      onReport = (r) => {
        if (r.reverted && r.items.length === 0) resolve();
      };
    });
    const c0 = process.cpuUsage();
    t0 = performance.now();
    const result = await revertDrift();
    wall.push(performance.now() - t0);
    const c = process.cpuUsage(c0);
    cpu.push((c.user + c.system) / 1000);
    await reverted;
    if (!(await readFile(path)).equals(f.content)) throw new Error(`${f.path} was not reverted`);
    actions.add(result?.actions.map((a) => a.kind).join(' ') ?? 'nothing');
  }
  if (session && values.profile !== undefined) {
    const { profile } = await session.post('Profiler.stop');
    await writeFile(values.profile, JSON.stringify(profile));
    session.disconnect();
    console.log(`CPU profile of the reverts: ${values.profile}`);
  }
  console.log(`revert of one drifted file (${String(wall.length)}): wall ${stats(wall)}`);
  console.log(`  the process's CPU per revert: ${stats(cpu)}`);
  console.log(`  actions per revert: ${[...actions].join(' | ')}`);
  await monitor.stop();
} finally {
  await rm(root, { recursive: true, force: true });
}
