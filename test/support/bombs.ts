/**
 * What the decompression-bomb suites share: the bomb (a gzip stream of zeros, never held inflated)
 * and the measure (a process's peak resident memory).
 */
import { readFileSync } from 'node:fs';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';

export const MiB = 1024 * 1024;

/** gzip of `mib` MiB of zeros, made in a stream (the test never holds the inflated bytes). */
export async function bomb(mib: number): Promise<Buffer> {
  const zero = Buffer.alloc(MiB);
  const out: Buffer[] = [];
  await pipeline(
    Readable.from(
      (function* () {
        for (let i = 0; i < mib; i++) yield zero;
      })(),
    ),
    createGzip({ level: 9 }),
    async (zipped: AsyncIterable<Buffer>) => {
      for await (const c of zipped) out.push(c);
    },
  );
  return Buffer.concat(out);
}

/** Peak resident memory of a process (Linux /proc VmHWM), in bytes. */
export function peakRss(pid: number): number {
  const line = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${String(pid)}/status`, 'utf8'));
  return Number(line?.[1] ?? 'NaN') * 1024;
}
