// Agent benchmark:
//   - planner time for 1,000 files and 100 units (no change, one change, all changed);
//   - apply time of 1,000 small files into a directory root (atomic writes with fsync);
//   - with the real test API server (hack/bench/agent-api.ts): Secret update → apply start p50/p99,
//     idle CPU, RSS and API requests per minute of the agent as it ships (dist/, its own process).
//
//   npm run build && node --import tsx hack/bench/agent.ts [--runs N] [--dir DIR]
//       [--changes 50] [--idle 600] [--settle 30] [--poll-interval S] [--skip-api | --api-only]
//       [--quiet 40] [--quiet-only] [--entry OTHER/dist/cli/oscar.js] [--jit agent|full]
//       [--glibc-defaults | --malloc-env NAME=VALUE,...]
// The agents start with the malloc settings of their systemd unit (AGENT_MALLOC_ENV);
// --glibc-defaults leaves them out, --malloc-env gives others (e.g. MALLOC_MMAP_THRESHOLD_=32768).
// Env: OSCAR_TESTENV_STATE attaches to a running test cluster instead of starting one.
// Targets (docs/agent.md): plan ≤ 20 ms; update → apply start p99 ≤ 1 s; idle < 0.5 % of a core,
// ≤ 1 API request per minute; RSS < 70 MB.
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { limitJitForAgent } from '../../cli/support/memory.js';
import { applyDesired } from '../../agent/apply.js';
import { plan } from '../../agent/plan.js';
import { LocalSystemd } from '../../agent/systemd.js';
import { applyToModel, diskOf, nodeFrom } from '../../agent/testing/node-model.js';
import { bigConfig, desiredOf, file } from '../../agent/testing/fixtures.js';
import { benchApi, parseEnvList } from './agent-api.js';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '200' },
    dir: { type: 'string' },
    changes: { type: 'string', default: '50' },
    // 10 minutes: five metadata polls and one watch renewal, so the request rate is the steady one
    idle: { type: 'string', default: '600' },
    settle: { type: 'string', default: '30' },
    'poll-interval': { type: 'string' },
    files: { type: 'string', default: '100' },
    units: { type: 'string', default: '10' },
    'skip-api': { type: 'boolean', default: false },
    'api-only': { type: 'boolean', default: false },
    // a second agent without /metrics, its RSS read this many seconds after its first apply
    quiet: { type: 'string', default: '40' },
    'quiet-only': { type: 'boolean', default: false },
    // measure another build (before/after): its dist/cli/oscar.js, or a single executable
    // (npm run build:agent: dist/artifacts/oscar-agent-linux-amd64)
    entry: { type: 'string' },
    // plan and apply with V8's tiers as the agent sets them (agent), or all of them (full)
    jit: { type: 'string', default: 'agent' },
    'glibc-defaults': { type: 'boolean', default: false },
    'malloc-env': { type: 'string' },
  },
});
if (values.jit === 'agent') limitJitForAgent();
else if (values.jit !== 'full') throw new Error('--jit takes agent or full');
const runs = Number(values.runs);

function stats(samples: number[]): string {
  const s = [...samples].sort((a, b) => a - b);
  const q = (p: number): number => s[Math.min(s.length - 1, Math.floor(p * s.length))] ?? NaN;
  return `p50 ${q(0.5).toFixed(2)} ms  p99 ${q(0.99).toFixed(2)} ms  max ${(s.at(-1) ?? NaN).toFixed(2)} ms`;
}

function time(f: () => void): number {
  const t0 = performance.now();
  f();
  return performance.now() - t0;
}

function benchPlan(): void {
  const base = bigConfig(1000, 100, 'one');
  const all = bigConfig(1000, 100, 'two');
  const one = structuredClone(base);
  one.files = base.files.map((f, i) => (i === 500 ? file(f.path, 'changed\n') : f));
  const disk = diskOf(nodeFrom(base));
  // An agent plans once per change, so its planner usually runs cold (interpreted): shown apart.
  const cold = time(() => plan(base, all, disk));
  console.log(`plan  all changed, first call in the process (cold): ${cold.toFixed(2)} ms`);
  for (const [name, next] of [
    ['no change', base],
    ['one file changed', one],
    ['all changed', all],
  ] as const) {
    for (let i = 0; i < 20; i++) plan(base, next, disk); // warm up
    const samples = Array.from({ length: runs }, () => time(() => plan(base, next, disk)));
    const n = plan(base, next, disk).length;
    console.log(`plan  ${name.padEnd(17)} ${String(n).padStart(5)} actions  ${stats(samples)}`);
  }
  // sanity: the plan of "all changed" reaches the desired state in the model
  const model = nodeFrom(base);
  applyToModel(model, plan(base, all, disk));
  if (plan(all, all, diskOf(model)).length !== 0)
    throw new Error('bench sanity: model did not converge');
}

async function benchApply(): Promise<void> {
  const parent = values.dir ?? tmpdir();
  const applySamples: number[] = [];
  const noopSamples: number[] = [];
  const files = desiredOf(bigConfig(1000, 0, 'x'));
  for (let i = 0; i < 5; i++) {
    const root = await mkdtemp(join(parent, 'oscar-bench-'));
    const stateDir = join(root, 'var/lib/oscar');
    await mkdir(stateDir, { recursive: true });
    const deps = {
      root,
      stateDir,
      systemd: new LocalSystemd(root, join(stateDir, 'would-run.log')),
      owners: false,
    };
    let t0 = performance.now();
    await applyDesired(deps, files);
    applySamples.push(performance.now() - t0);
    t0 = performance.now();
    await applyDesired(deps, files);
    noopSamples.push(performance.now() - t0);
    await rm(root, { recursive: true, force: true });
  }
  console.log(`apply 1,000 small files into ${parent}: ${stats(applySamples)}`);
  console.log(`apply again (observe 1,000 files, nothing to do): ${stats(noopSamples)}`);
}

console.log(`agent bench (${new Date().toISOString()}, --jit ${values.jit})`);
if (!values['api-only']) {
  console.log(`plan: 1,000 files, 100 units, ${String(runs)} runs each`);
  benchPlan();
  await benchApply();
}
if (!values['skip-api']) {
  await benchApi({
    changes: Number(values.changes),
    idleSeconds: Number(values.idle),
    settleSeconds: Number(values.settle),
    files: Number(values.files),
    units: Number(values.units),
    ...(values['poll-interval'] !== undefined ? { pollInterval: values['poll-interval'] } : {}),
    quietSeconds: Number(values.quiet),
    quietOnly: values['quiet-only'],
    ...(values.entry !== undefined ? { entry: values.entry } : {}),
    ...(values['glibc-defaults']
      ? { mallocEnv: {} }
      : values['malloc-env'] !== undefined
        ? { mallocEnv: parseEnvList(values['malloc-env']) }
        : {}),
  });
}
