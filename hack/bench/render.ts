// Benchmark of the built-in renderers on a large OperatingSystemConfig: 300 files holding 2 MiB
// in all, 60 units with drop-ins, validated and resolved as the controller does it. For each
// content mix and each format it prints renders/s, MB/s of output and of content, and the cost of
// each stage: the guard's checks + OS profile (a validated config skips the guard: the column
// shows what a config built in code pays on top), encoding the file contents, serialising the
// rest. Node's raw Buffer base64 speed on the same bytes is the yardstick (target: a render at
// least half as fast as base64 alone).
//
// Fair comparison: every figure is CPU time of this process (user + system, process.cpuUsage),
// so other work on a shared machine does not count against either side, and the yardstick and
// the stages are measured interleaved with the renders, block by block, so a change in load or
// clock speed hits both alike (see measure). The yardstick is one base64 pass over the same
// bytes (all file contents concatenated): like a render, it produces an output of that size in
// fresh memory. The base64 of each file on its own (no large output to allocate) is printed for
// reference, and so is the floor: each file's base64 copied into one fresh Buffer, with nothing
// else written. Node 20 can only encode base64 into a new string, so that copy is the least any
// renderer returning bytes must do; "vs floor" is how close a render comes to it.
//
// Mixes: config-like text in 300 files of ~7 KB, the same text in 600 files of ~3.5 KB (within
// the 4 KiB up to which text is written readable: the scanning, indenting and quoting path),
// random bytes, and half text, half random.
//
// --heap controller runs it under the controller's heap settings (cli/support/memory.ts), where renders
// run for real: a small young generation, and full collections as for a small device.
//
//   node --import tsx hack/bench/render.ts [--seconds 1] [--mix text|small-text|binary|mixed]
//                                          [--heap controller]
import { NO_REFERENCES } from '../../api/resolve.js';
import type { ResolvedConfig, ResolvedFile } from '../../api/resolved.js';
import { validateAndResolve } from '../../api/validated.js';
import { tuneHeapForLongRunning } from '../../cli/support/memory.js';
import type { Format } from '../../api/schema.js';
import { contentField } from '../../renderers/cloud-config.js';
import { dataUrl } from '../../renderers/ignition.js';
import { fileCommand } from '../../renderers/script.js';
import { base64Length, ByteBuilder } from '../../renderers/byte-builder.js';
import { checkEveryField } from '../../renderers/guard.js';
import { expand } from '../../renderers/profiles.js';
import { defaultRegistry, renderOsc } from '../../renderers/registry.js';
import { runRounds } from './render-rounds.js';
import { benchDocuments, MIXES, type Mix, UNITS } from './render-config.js';

function option(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : undefined;
}
const SECONDS = Number(option('--seconds') ?? 1);
const HEAP = option('--heap') ?? 'default';
if (HEAP === 'controller') tuneHeapForLongRunning();
else if (HEAP !== 'default') throw new Error('--heap takes default or controller');
const ONLY_MIX = option('--mix')?.replace('-', ' ');
const ROUNDS = option('--rounds');
/**
 * The bench's OperatingSystemConfig for a mix, as the controller gets it: a document, validated
 * and resolved (validateAndResolve), so the renders below are of a validated config, exactly as
 * the controller's are. The contents are made once per mix and shared by every type.
 */
function makeDocuments(mix: Mix): (type: string) => ResolvedConfig {
  const documentFor = benchDocuments(mix);
  return (type) => {
    const r = validateAndResolve(documentFor(type), NO_REFERENCES);
    if (!r.ok) throw new Error(`the bench's OSC does not validate: ${JSON.stringify(r.errors)}`);
    return r.config;
  };
}

function cpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

const BLOCKS = 8;

/** CPU milliseconds per call, and page faults per call (first touches of fresh memory). */
interface Figure {
  ms: number;
  faults: number;
}

/**
 * Runs each function in blocks of repeated calls, taking turns block by block (BLOCKS blocks of
 * SECONDS / BLOCKS each), and returns, per function, the CPU milliseconds (and page faults) per
 * call of its best block. Blocks rather than single calls: a call's garbage is collected during some later call,
 * so a block keeps each function paying for its own garbage; the first fifth of each block is
 * not timed (it collects what the previous block left behind). The best block rather than the
 * mean: on this shared VM a block now and then runs several times slower for reasons outside
 * the code (other jobs, and page faults on fresh memory costing ~10 µs each), and that noise
 * only ever adds time. Yardstick and renders are treated alike.
 */
async function measure(fns: readonly (() => unknown)[]): Promise<Figure[]> {
  const best: Figure[] = fns.map(() => ({ ms: Infinity, faults: 0 }));
  const blockMs = (SECONDS * 1000) / BLOCKS;
  for (let block = 0; block < BLOCKS; block++) {
    for (let i = 0; i < fns.length; i++) {
      const fn = fns[i];
      if (fn === undefined) continue;
      const warm = cpuMs() + blockMs / 5;
      do await fn();
      while (cpuMs() < warm);
      const faults = process.resourceUsage().minorPageFault;
      const start = cpuMs();
      let now = start;
      let n = 0;
      while (now < start + blockMs || n < 2) {
        await fn();
        n++;
        now = cpuMs();
      }
      const ms = (now - start) / n;
      if (ms < (best[i]?.ms ?? Infinity)) {
        best[i] = { ms, faults: (process.resourceUsage().minorPageFault - faults) / n };
      }
    }
  }
  return best;
}

/**
 * The encode stage: every file's content in its format's encoding (readable text, base64, gzip),
 * written into one buffer as a render writes them; the rest of a render is the serialise stage.
 */
const ENCODERS: Record<Format, (files: readonly ResolvedFile[]) => Buffer> = {
  'cloud-config': (files) => {
    const out = new ByteBuilder();
    for (const f of files) contentField(f, 'reconcile', undefined, out);
    return out.toBuffer();
  },
  ignition: (files) => {
    const out = new ByteBuilder();
    for (const f of files) {
      const url = dataUrl(f, 'reconcile', undefined);
      out.ascii(url.scheme);
      if (typeof url.data === 'string') out.ascii(url.data);
      else out.base64(url.data);
    }
    return out.toBuffer();
  },
  script: (files) => {
    const out = new ByteBuilder();
    for (const f of files) fileCommand(f, undefined, out);
    return out.toBuffer();
  },
};

const TYPES: Record<Format, string> = {
  'cloud-config': 'ubuntu',
  ignition: 'flatcar',
  script: 'generic',
};

/**
 * The floor: every file's base64 copied into one fresh Buffer of the total size, nothing else.
 * A render writes at least this (plus its markup), since Node 20 encodes base64 only into a new
 * string that must then be copied into the output.
 */
function floorOf(files: readonly ResolvedFile[]): () => Buffer {
  const size = files.reduce((n, f) => n + base64Length(f.content.length), 0);
  return () => {
    const out = Buffer.allocUnsafe(size);
    let offset = 0;
    for (const f of files) offset += out.write(f.content.toString('base64'), offset, 'latin1');
    return out;
  };
}

const pct = (part: number, whole: number): string => `${((part / whole) * 100).toFixed(0)} %`;
const registry = defaultRegistry();
const mbps = (bytes: number, ms: number): string => (bytes / 1e6 / (ms / 1000)).toFixed(0);
const col = (s: string, width: number): string => s.padStart(width);

if (ROUNDS !== undefined) {
  // the steady mode: many interleaved rounds, median and interquartile range (render-rounds.ts)
  const format = option('--format') ?? 'cloud-config';
  await runRounds({
    rounds: Number(ROUNDS),
    blockMs: Number(option('--block-ms') ?? 60),
    warmupMs: Number(option('--warmup-ms') ?? 1000),
    mix: (ONLY_MIX ?? 'small text') as Mix,
    formats: format === 'all' ? ['cloud-config', 'ignition', 'script'] : [format as Format],
    against: option('--against'),
    clock: option('--clock') === 'thread' ? 'thread' : 'process',
  });
  process.exit(0);
}

console.log(
  `oscar render benchmark: 2.0 MiB of file content, ${UNITS} units (+ drop-ins); CPU ms, best of ${BLOCKS} blocks, ~${SECONDS} s per figure; ${HEAP === 'controller' ? "the controller's heap settings" : "Node's default heap settings"}`,
);
for (const mix of MIXES.filter((m) => ONLY_MIX === undefined || m === ONLY_MIX)) {
  const configFor = makeDocuments(mix);
  const base = configFor('ubuntu');
  const all = Buffer.concat(base.files.map((f) => f.content));
  const floor = floorOf(base.files);
  const [perFile, floorAlone, b64Alone] = await measure([
    () => {
      for (const f of base.files) f.content.toString('base64');
    },
    floor,
    () => all.toString('base64'),
  ]);
  const perFileMs = perFile?.ms ?? 0;
  const floorMs = floorAlone?.ms ?? 0;
  console.log(
    `\n${mix}: ${base.files.length} files of ${base.files[0]?.content.length ?? 0} bytes; base64 of each file on its own: ${perFileMs.toFixed(2)} ms (${mbps(all.length, perFileMs)} MB/s); floor ${floorMs.toFixed(2)} ms (${pct(b64Alone?.ms ?? NaN, floorMs)} of base64 speed)`,
  );
  console.log(
    '  format        renders/s  ms/render  output     out MB/s  in MB/s  base64 ms  vs base64  floor ms  vs floor  guard+profile  encode  serialise  faults: render  base64',
  );
  for (const format of ['cloud-config', 'ignition', 'script'] as const) {
    const config = configFor(TYPES[format]);
    const options = { name: 'bench', namespace: 'bench', format };
    const size = (await renderOsc(registry, config, options)).userData.length;
    const [b64, render, guard, encode, floorMs] = await measure([
      () => all.toString('base64'),
      () => renderOsc(registry, config, options),
      () => {
        checkEveryField(config);
        return expand(config);
      },
      () => ENCODERS[format](config.files),
      floor,
    ]);
    const total = render?.ms ?? NaN;
    const serialise = Math.max(0, total - (guard?.ms ?? 0) - (encode?.ms ?? 0));
    console.log(
      [
        `  ${format.padEnd(12)}`,
        col((1000 / total).toFixed(1), 9),
        col(total.toFixed(2), 10),
        `${col((size / 1048576).toFixed(2), 6)} MiB`,
        col(mbps(size, total), 8),
        col(mbps(all.length, total), 8),
        col((b64?.ms ?? NaN).toFixed(2), 10),
        col(pct(b64?.ms ?? NaN, total), 10),
        col((floorMs?.ms ?? NaN).toFixed(2), 9),
        col(pct(floorMs?.ms ?? NaN, total), 9),
        `${col((guard?.ms ?? NaN).toFixed(2), 11)} ms`,
        col((encode?.ms ?? NaN).toFixed(2), 6),
        col(serialise.toFixed(2), 9),
        col((render?.faults ?? NaN).toFixed(0), 15),
        col((b64?.faults ?? NaN).toFixed(0), 7),
      ].join(' '),
    );
  }
}
console.log(
  [
    '',
    'vs base64: CPU time of one raw Buffer base64 pass over the same content / CPU time of a full render',
    "(100 % = as fast as base64 alone; target >= 50 %). vs floor: the floor (each file's base64 copied into",
    'one fresh Buffer, nothing else) / a full render. faults: minor page faults per call, i.e. pages of',
    'fresh memory touched for the first time; on this VM each costs several microseconds.',
  ].join('\n'),
);
