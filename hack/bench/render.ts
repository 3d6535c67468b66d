// Benchmark of the built-in renderers on a large OperatingSystemConfig: 300 files holding 2 MiB
// in all, 60 units with drop-ins. For each content mix and each format it prints renders/s, MB/s
// of output and of content, and the cost of each stage: guard + OS profile, encoding the file
// contents, serialising the rest. Node's raw Buffer base64 speed on the same bytes is the
// yardstick (target: a render at least half as fast as base64 alone).
//
// Fair comparison: every figure is CPU time of this process (user + system, process.cpuUsage),
// so other work on a shared machine does not count against either side, and the yardstick and
// the stages are measured interleaved with the renders, block by block, so a change in load or
// clock speed hits both alike (see measure). The yardstick is one base64 pass over the same bytes (all file
// contents concatenated): like a render, it produces an output of that size in fresh memory.
// The base64 of each file on its own (no large output to allocate) is printed for reference.
//
// Mixes: config-like text in 300 files of ~7 KB, the same text in 600 files of ~3.5 KB (within
// the 4 KiB up to which text is written readable: the scanning, indenting and quoting path),
// random bytes, and half text, half random.
//
//   node --import tsx hack/bench/render.ts [--seconds 1] [--mix text|small-text|binary|mixed]
import { randomBytes } from 'node:crypto';
import type { ResolvedConfig, ResolvedFile, ResolvedUnit } from '../../api/resolved.js';
import type { Format } from '../../api/schema.js';
import { contentField } from '../../renderers/cloud-config.js';
import { dataUrl } from '../../renderers/ignition.js';
import { fileCommand } from '../../renderers/script.js';
import { ByteBuilder } from '../../renderers/byte-builder.js';
import { checkResolved } from '../../renderers/guard.js';
import { expand } from '../../renderers/profiles.js';
import { defaultRegistry, renderOsc } from '../../renderers/registry.js';

function option(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : undefined;
}
const SECONDS = Number(option('--seconds') ?? 1);
const ONLY_MIX = option('--mix')?.replace('-', ' ');
const TOTAL = 2 * 1024 * 1024;
const UNITS = 60;

function textContent(i: number, size: number): Buffer {
  // config-like text: keys, numbers, paths; varied enough that gzip does not collapse it to nothing
  const lines: string[] = [];
  let n = 0;
  let k = i * 7919;
  while (n < size) {
    k = (k * 1103515245 + 12345) & 0x7fffffff;
    const line = `setting_${k % 997}.${(k >> 8) % 31} = "/var/lib/app-${k % 53}/data-${k % 100003}" # ${k.toString(36)}`;
    lines.push(line);
    n += line.length + 1;
  }
  // end on a letter: a space before the final newline would make the text unreadable
  return Buffer.from(lines.join('\n').slice(0, size - 2) + 'x\n');
}

type Mix = 'text' | 'small text' | 'binary' | 'mixed';
const MIXES: readonly Mix[] = ['text', 'small text', 'binary', 'mixed'];

function makeConfig(mix: Mix, type: string): ResolvedConfig {
  const count = mix === 'small text' ? 600 : 300;
  const per = Math.floor(TOTAL / count);
  const files: ResolvedFile[] = [];
  for (let i = 0; i < count; i++) {
    const binary = mix === 'binary' || (mix === 'mixed' && i % 2 === 1);
    files.push({
      path: `/etc/bench/dir-${i % 17}/file-${String(i).padStart(3, '0')}.conf`,
      mode: i % 3 === 0 ? 0o600 : 0o644,
      user: 'root',
      group: 'root',
      content: binary ? randomBytes(per) : textContent(i, per),
    });
  }
  const units: ResolvedUnit[] = [];
  for (let i = 0; i < UNITS; i++) {
    units.push({
      name: `bench-${String(i).padStart(2, '0')}.service`,
      enable: true,
      mask: false,
      command: 'restart',
      onChange: 'restart',
      content: `[Unit]\nDescription=bench ${i}\nAfter=network-online.target\n\n[Service]\nExecStart=/usr/bin/bench --id ${i} --config /etc/bench/dir-${i % 17}/file-${String(i).padStart(3, '0')}.conf\nRestart=always\n\n[Install]\nWantedBy=multi-user.target\n`,
      dropIns: [{ name: '10-env.conf', content: `[Service]\nEnvironment=BENCH_ID=${i}\n` }],
      filePaths: [],
    });
  }
  files.sort((a, b) => (a.path < b.path ? -1 : 1));
  return { type, purpose: 'reconcile', units, files, packages: [] };
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
 * written into one buffer, as a render writes them (the renderers encode base64 only while the
 * output is written); the rest of a render is the serialise stage.
 */
const ENCODERS: Record<Format, (files: readonly ResolvedFile[]) => Buffer> = {
  'cloud-config': (files) => {
    const out = new ByteBuilder();
    for (const f of files) contentField(f, 'reconcile', new Map(), out);
    return out.toBuffer();
  },
  ignition: (files) => {
    const out = new ByteBuilder();
    for (const f of files) {
      const url = dataUrl(f, 'reconcile', new Map());
      out.ascii(url.scheme);
      if (typeof url.data === 'string') out.ascii(url.data);
      else out.base64(url.data);
    }
    return out.toBuffer();
  },
  script: (files) => {
    const out = new ByteBuilder();
    for (const f of files) fileCommand(f, new Map(), out);
    return out.toBuffer();
  },
};

const TYPES: Record<Format, string> = {
  'cloud-config': 'ubuntu',
  ignition: 'flatcar',
  script: 'generic',
};

const registry = defaultRegistry();
const mbps = (bytes: number, ms: number): string => (bytes / 1e6 / (ms / 1000)).toFixed(0);
const col = (s: string, width: number): string => s.padStart(width);

console.log(
  `oscar render benchmark: 2.0 MiB of file content, ${UNITS} units (+ drop-ins); CPU ms, best of ${BLOCKS} blocks, ~${SECONDS} s per figure`,
);
for (const mix of MIXES.filter((m) => ONLY_MIX === undefined || m === ONLY_MIX)) {
  const base = makeConfig(mix, 'ubuntu');
  const all = Buffer.concat(base.files.map((f) => f.content));
  const [perFile] = await measure([
    () => {
      for (const f of base.files) f.content.toString('base64');
    },
  ]);
  const perFileMs = perFile?.ms ?? 0;
  console.log(
    `\n${mix}: ${base.files.length} files of ${base.files[0]?.content.length ?? 0} bytes; base64 of each file on its own: ${perFileMs.toFixed(2)} ms (${mbps(all.length, perFileMs)} MB/s)`,
  );
  console.log(
    '  format        renders/s  ms/render  output     out MB/s  in MB/s  base64 ms  vs base64  guard+profile  encode  serialise  faults: render  base64',
  );
  for (const format of ['cloud-config', 'ignition', 'script'] as const) {
    const config = { ...base, type: TYPES[format] };
    const options = { name: 'bench', namespace: 'bench', format };
    const size = (await renderOsc(registry, config, options)).userData.length;
    const [b64, render, guard, encode] = await measure([
      () => all.toString('base64'),
      () => renderOsc(registry, config, options),
      () => {
        checkResolved(config);
        return expand(config);
      },
      () => ENCODERS[format](config.files),
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
        `${col((((b64?.ms ?? NaN) / total) * 100).toFixed(0), 8)} %`,
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
    '(100 % = as fast as base64 alone; target >= 50 %). faults: minor page faults per call, i.e. pages of',
    'fresh memory touched for the first time; on this VM each costs several microseconds.',
  ].join('\n'),
);
