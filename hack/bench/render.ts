// Benchmark of the built-in renderers on a large OperatingSystemConfig: 300 files holding 2 MiB
// in all, 60 units with drop-ins. For each content mix (config-like text, random bytes, half and
// half) and each format it prints renders/s, MB/s of output and of content, and the cost of each
// stage: guard + OS profile, encoding the file contents, serialising the rest. Node's raw
// Buffer base64 speed on the same bytes is the yardstick (target: at least half of it).
//
//   node --import tsx hack/bench/render.ts [--seconds 1]
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

const secondsArg = process.argv.indexOf('--seconds');
const SECONDS = secondsArg > 0 ? Number(process.argv[secondsArg + 1]) : 1;
const FILES = 300;
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
  return Buffer.from(lines.join('\n').slice(0, size - 1) + '\n');
}

type Mix = 'text' | 'binary' | 'mixed';

function makeConfig(mix: Mix, type: string): ResolvedConfig {
  const per = Math.floor(TOTAL / FILES);
  const files: ResolvedFile[] = [];
  for (let i = 0; i < FILES; i++) {
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

/** Runs fn repeatedly for about SECONDS; returns milliseconds per call. */
async function time(fn: () => unknown): Promise<number> {
  await fn(); // warm-up
  const deadline = performance.now() + SECONDS * 1000;
  let n = 0;
  const start = performance.now();
  while (performance.now() < deadline || n < 3) {
    await fn();
    n++;
  }
  return (performance.now() - start) / n;
}

const ENCODERS: Record<Format, (f: ResolvedFile) => unknown> = {
  'cloud-config': (f) => {
    contentField(f, 'reconcile', new Map(), new ByteBuilder());
  },
  ignition: (f) => dataUrl(f, 'reconcile', new Map()),
  script: (f) => {
    fileCommand(f, new Map(), new ByteBuilder());
  },
};

const TYPES: Record<Format, string> = {
  'cloud-config': 'ubuntu',
  ignition: 'flatcar',
  script: 'generic',
};

const registry = defaultRegistry();
const mb = (bytes: number, ms: number): string =>
  (bytes / 1e6 / (ms / 1000)).toFixed(0).padStart(5);

console.log(
  `oscar render benchmark: ${FILES} files, ${(TOTAL / 1048576).toFixed(1)} MiB content, ${UNITS} units (+ drop-ins); ~${SECONDS}s per figure\n`,
);
for (const mix of ['text', 'binary', 'mixed'] as const) {
  const base = makeConfig(mix, 'ubuntu');
  const all = Buffer.concat(base.files.map((f) => f.content));
  const b64 = await time(() => all.toString('base64'));
  console.log(
    `${mix} content: raw Buffer base64 of the same ${(all.length / 1048576).toFixed(2)} MiB: ${b64.toFixed(2)} ms = ${mb(all.length, b64).trim()} MB/s of input`,
  );
  console.log(
    '  format        renders/s  ms/render  output    out MB/s  in MB/s  vs base64   guard+profile  encode   serialise',
  );
  for (const format of ['cloud-config', 'ignition', 'script'] as const) {
    const config = { ...base, type: TYPES[format] };
    const options = { name: 'bench', namespace: 'bench', format };
    const size = (await renderOsc(registry, config, options)).userData.length;
    const total = await time(() => renderOsc(registry, config, options));
    const guard = await time(() => {
      checkResolved(config);
      return expand(config);
    });
    const encode = await time(() => {
      for (const f of config.files) ENCODERS[format](f);
    });
    const serialise = Math.max(0, total - guard - encode);
    console.log(
      `  ${format.padEnd(12)} ${(1000 / total).toFixed(1).padStart(9)} ${total.toFixed(2).padStart(10)}  ${(size / 1048576).toFixed(2).padStart(5)} MiB ${mb(size, total)}  ${mb(all.length, total)}     ${((b64 / total) * 100).toFixed(0).padStart(4)} %   ${guard.toFixed(2).padStart(8)} ms  ${encode.toFixed(2).padStart(6)} ms ${serialise.toFixed(2).padStart(7)} ms`,
    );
  }
  console.log('');
}
console.log(
  'vs base64: time of a raw base64 pass over the content / time of a full render (100 % = as fast as base64 alone).',
);
