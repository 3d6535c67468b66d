// Drift at scale, in process: the agent's drift monitor (agent/drift/, its real inotify watcher
// and reader) over N files in a directory root (one OSC holds at most 1,024 files; a node's agent
// takes up to NODE_LIMITS.files = 16,384 from its Secret, which hack/bench/drift.ts measures end
// to end on real systemd). Figures per size: the start (first audit, every watch armed), the
// watches held, the RSS they cost, write → drift found p50/p99 by name and through a hard link
// (the report the agent would send; no API server), the process's CPU per detection (what a
// detection costs whatever the machine's load), one watch-triggered check's own time, one audit,
// idle CPU.
//
//   node --import tsx hack/bench/drift-scale.ts [--sizes 1000,10000] [--edits 100] [--idle 60]
//       [--debounce MS]
import {
  appendFile,
  link,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rm,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { DriftMonitor, type DriftReport } from '../../agent/drift/monitor.js';
import { bigConfig } from '../../agent/testing/fixtures.js';
import { entriesOf } from '../../agent/model/entries.js';
import { silentLogger } from '../../log/logger.js';
import { sleep } from '../../api/util.js';
import { quantiles } from './agent-api.js';

const { values } = parseArgs({
  options: {
    sizes: { type: 'string', default: '1000,10000' },
    edits: { type: 'string', default: '100' },
    idle: { type: 'string', default: '60' },
    // the monitor's quiet time after an event (DriftMonitorOptions.debounceMs; default its own)
    debounce: { type: 'string' },
  },
});

const mb = (b: number): string => (b / 1024 / 1024).toFixed(1);

async function inotifyWatches(): Promise<number> {
  let n = 0;
  for (const fd of await readdir('/proc/self/fdinfo')) {
    const info = await readFile(`/proc/self/fdinfo/${fd}`, 'utf8').catch(() => '');
    n += info.match(/^inotify wd:/gm)?.length ?? 0;
  }
  return n;
}

async function measure(files: number): Promise<void> {
  const root = await mkdtemp(join(tmpdir(), 'oscar-drift-scale-'));
  const config = bigConfig(files, 0, '0');
  for (const e of entriesOf(config).values()) {
    await mkdir(join(root, e.path, '..'), { recursive: true });
    await writeFile(join(root, e.path), e.content, { mode: e.mode });
  }
  await mkdir(join(root, 'var/tmp'), { recursive: true });
  let onReport: ((r: DriftReport) => void) | undefined;
  const checks: number[] = [];
  const monitor = new DriftMonitor({
    root,
    owners: false,
    auditIntervalMs: 0,
    ...(values.debounce !== undefined ? { debounceMs: Number(values.debounce) } : {}),
    checked: (trigger, ms) => {
      if (trigger === 'watch') checks.push(ms);
    },
    report: (r) => onReport?.(r),
    requestRevert: () => undefined,
    log: silentLogger(),
  });
  global.gc?.();
  const rss0 = process.memoryUsage().rss;
  const t0 = performance.now();
  await monitor.start(config);
  const startMs = performance.now() - t0;
  global.gc?.();
  const rss1 = process.memoryUsage().rss;
  console.log(
    `${String(files)} files: start (audit + watches) ${startMs.toFixed(0)} ms; ${String(await inotifyWatches())} inotify watches (${String(monitor.watchedFiles)} inodes, ${String(monitor.watchedDirectories)} directories); RSS +${mb(rss1 - rss0)} MB (${mb(rss1)} MB)`,
  );
  const found = (path: string): Promise<number> =>
    new Promise((resolve) => {
      onReport = (r) => {
        if (r.added.some((i) => i.path === path)) resolve(performance.now());
      };
    });
  const back = (): Promise<void> =>
    new Promise((resolve) => {
      onReport = (r) => {
        if (r.items.length === 0) resolve();
      };
    });
  const byName: number[] = [];
  const byLink: number[] = [];
  // CPU (user + system) of the whole process from the write to the report: the watch event, the
  // check, the report — what a detection costs whatever the load
  const cpu: number[] = [];
  checks.length = 0;
  for (let i = 0; i < Number(values.edits); i++) {
    const f = config.files[(i * 37) % config.files.length];
    if (!f) throw new Error('no file');
    const viaLink = i % 2 === 1;
    const host = join(root, f.path);
    const other = join(root, 'var/tmp/link');
    if (viaLink) await link(host, other);
    const seen = found(f.path);
    const c0 = process.cpuUsage();
    const w = performance.now();
    await appendFile(viaLink ? other : host, 'edited\n');
    (viaLink ? byLink : byName).push((await seen) - w);
    const c = process.cpuUsage(c0);
    cpu.push((c.user + c.system) / 1000);
    const clean = back();
    await writeFile(host, f.content);
    await clean;
    if (viaLink) await rm(other);
  }
  const q = (s: number[]): string => {
    const x = quantiles(s);
    return `p50 ${x.p50.toFixed(0)} ms, p99 ${x.p99.toFixed(0)} ms, max ${x.max.toFixed(0)} ms`;
  };
  console.log(`  write by name → drift found: ${q(byName)} (${String(byName.length)})`);
  console.log(`  write through a hard link → drift found: ${q(byLink)} (${String(byLink.length)})`);
  console.log(`  CPU per detection (write → found, the whole process): ${q(cpu)}`);
  console.log(
    `  one watch-triggered check (read, compare, publish): ${q(checks)} (${String(checks.length)})`,
  );
  const a0 = performance.now();
  await monitor.beforeApply('apply'); // an audit of every file, as the periodic one
  console.log(`  one audit of every file: ${(performance.now() - a0).toFixed(0)} ms`);
  monitor.afterApply({ unchanged: true });
  await monitor.idle();
  const c0 = process.cpuUsage();
  const idle = Number(values.idle);
  await sleep(idle * 1000);
  const c = process.cpuUsage(c0);
  console.log(
    `  idle ${String(idle)} s: CPU ${(((c.user + c.system) / 1e6 / idle) * 100).toFixed(3)} % of a core; RSS ${mb(process.memoryUsage().rss)} MB`,
  );
  await monitor.stop();
  await rm(root, { recursive: true, force: true });
}

for (const n of values.sizes.split(',').map(Number)) await measure(n);
