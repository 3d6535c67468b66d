// The render benchmarks' OperatingSystemConfig (hack/bench/render.ts and its --rounds mode): 2 MiB
// of file content in one of four mixes, 60 units with a drop-in each, as a plain document. Made
// once per mix, so every format, and another tree's renderers (--against), render the same bytes.
import { randomBytes } from 'node:crypto';
import { API_VERSION, OSC_KIND } from '../../api/constants.js';
import type { File, Unit } from '../../api/schema.js';

export const TOTAL = 2 * 1024 * 1024;
export const UNITS = 60;

export type Mix = 'text' | 'small text' | 'binary' | 'mixed';
export const MIXES: readonly Mix[] = ['text', 'small text', 'binary', 'mixed'];

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

/** The bench's document for a mix, by spec.type: the contents are made once and shared. */
export function benchDocuments(mix: Mix): (type: string) => Record<string, unknown> {
  const count = mix === 'small text' ? 600 : 300;
  const per = Math.floor(TOTAL / count);
  const files: File[] = [];
  for (let i = 0; i < count; i++) {
    const binary = mix === 'binary' || (mix === 'mixed' && i % 2 === 1);
    const content = binary ? randomBytes(per) : textContent(i, per);
    files.push({
      path: `/etc/bench/dir-${i % 17}/file-${String(i).padStart(3, '0')}.conf`,
      permissions: i % 3 === 0 ? '0600' : '0644',
      content: { inline: { encoding: 'b64' as const, data: content.toString('base64') } },
    });
  }
  const units: Unit[] = [];
  for (let i = 0; i < UNITS; i++) {
    units.push({
      name: `bench-${String(i).padStart(2, '0')}.service`,
      command: 'restart' as const,
      content: `[Unit]\nDescription=bench ${i}\nAfter=network-online.target\n\n[Service]\nExecStart=/usr/bin/bench --id ${i} --config /etc/bench/dir-${i % 17}/file-${String(i).padStart(3, '0')}.conf\nRestart=always\n\n[Install]\nWantedBy=multi-user.target\n`,
      dropIns: [{ name: '10-env.conf', content: `[Service]\nEnvironment=BENCH_ID=${i}\n` }],
    });
  }
  return (type) => ({
    apiVersion: API_VERSION,
    kind: OSC_KIND,
    metadata: { name: 'bench', namespace: 'bench' },
    spec: { type, purpose: 'reconcile', files, units },
  });
}
