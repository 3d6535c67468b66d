/**
 * Benchmark (issue: the API): validation + resolve + canonicalisation + checksum of one
 * OperatingSystemConfig with 200 files (1 MiB of content in all) and 50 units.
 * Run: node --import tsx hack/bench/validate.ts   Target: ≤ 5 ms per OSC.
 */
import { randomBytes } from 'node:crypto';
import { canonicalWithChecksum } from '../../api/canonical.js';
import { resolve } from '../../api/resolve.js';
import type { OperatingSystemConfigSpec } from '../../api/schema.js';
import { validateOperatingSystemConfig } from '../../api/validate.js';

function buildOsc(): {
  apiVersion: string;
  kind: string;
  metadata: { name: string };
  spec: OperatingSystemConfigSpec;
} {
  const files = Array.from({ length: 200 }, (_, i) => {
    const bytes = randomBytes(5243); // 200 × 5243 ≈ 1 MiB
    return i % 2 === 0
      ? {
          path: `/etc/bench/file-${i}.conf`,
          permissions: '0644',
          content: { inline: { data: bytes.toString('hex').slice(0, 5243) } },
        }
      : {
          path: `/etc/bench/file-${i}.bin`,
          permissions: '0600',
          owner: 'root:root',
          content: { inline: { encoding: 'b64' as const, data: bytes.toString('base64') } },
        };
  });
  const units = Array.from({ length: 50 }, (_, i) => ({
    name: `bench-${i}.service`,
    filePaths: [`/etc/bench/file-${i * 2}.conf`],
    content: `[Unit]\nDescription=bench ${i}\nAfter=network-online.target\n\n[Service]\nExecStart=/usr/bin/sleep infinity\nRestart=always\nEnvironment=A=1 B=2\n\n[Install]\nWantedBy=multi-user.target\n`,
    dropIns: [{ name: '10-limits.conf', content: '[Service]\nLimitNOFILE=65536\n' }],
  }));
  return {
    apiVersion: 'oscar.dev/v1alpha1',
    kind: 'OperatingSystemConfig',
    metadata: { name: 'bench' },
    spec: { type: 'ubuntu', purpose: 'reconcile', files, units },
  };
}

function once(osc: ReturnType<typeof buildOsc>): string {
  const errors = validateOperatingSystemConfig(osc);
  if (errors.length > 0) throw new Error(JSON.stringify(errors.slice(0, 3)));
  const resolved = resolve(osc.spec);
  if (!resolved.ok) throw new Error('resolve failed');
  return canonicalWithChecksum(resolved.config).checksum;
}

/**
 * Wall time and this process's CPU time per OSC. On a shared, loaded machine the CPU time is the
 * fairer figure: it leaves out the time the scheduler gave to other processes.
 */
function time(label: string, runs: number, fn: () => unknown): number {
  for (let i = 0; i < 20; i++) fn(); // warm up
  const cpuStart = process.cpuUsage();
  const started = process.hrtime.bigint();
  for (let i = 0; i < runs; i++) fn();
  const wall = Number(process.hrtime.bigint() - started) / 1e6 / runs;
  const used = process.cpuUsage(cpuStart);
  const cpu = (used.user + used.system) / 1000 / runs;
  console.log(
    `${label.padEnd(48)} wall ${wall.toFixed(2).padStart(7)} ms  cpu ${cpu.toFixed(2).padStart(7)} ms/OSC  ${(1000 / cpu).toFixed(0).padStart(5)} OSC/s per core`,
  );
  return cpu;
}

const osc = buildOsc();
const bytes = JSON.stringify(osc).length;
console.log(
  `OSC: 200 files, 50 units, ${(bytes / 1024 / 1024).toFixed(2)} MiB as JSON; node ${process.version}`,
);
const runs = 200;
time('validate (schema + unknown fields + deep)', runs, () => validateOperatingSystemConfig(osc));
const resolved = resolve(osc.spec);
if (!resolved.ok) throw new Error('resolve failed');
time('resolve (decode contents, defaults, sort)', runs, () => resolve(osc.spec));
time('canonicalise + sha256', runs, () => canonicalWithChecksum(resolved.config));
const total = time('all: validate + resolve + canonical + checksum', runs, () => once(osc));
console.log(
  `\ntarget ≤ 5 ms per OSC (CPU): ${total <= 5 ? 'met' : 'NOT met'} (${total.toFixed(2)} ms)`,
);
