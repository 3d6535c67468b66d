/**
 * Benchmark: what `--concurrency` costs and buys in `oscar renderer serve` — handled bodies per
 * second and the server's peak RSS (VmHWM) while 16 clients keep a body in flight each, at limits
 * 1, 2, 4 and 8 (the default is 2). One server process per limit (a fresh one: VmHWM only grows),
 * two bodies:
 *   - 1 MiB OSC: the typical example plus 100 files of 10 KiB random bytes (1.4 MB of JSON);
 *   - 10.5 MiB text, gzip: 12 files of 900 KiB text (each under the 1 MiB a file may have), 14 MB
 *     of JSON sent gzip-compressed (~0.1 MB on the wire): near the 16 MiB body limit, what a
 *     client that wants the server's memory would send.
 * The limit bounds how many bodies are read, parsed and rendered at once; the others wait unread.
 * Run: node --import tsx hack/bench/server-concurrency.ts [seconds per case, default 5]
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { gzipSync } from 'node:zlib';
import { loadDocuments } from '../../api/load.js';
import { NO_REFERENCES, resolve } from '../../api/resolve.js';
import type { ResolvedConfig } from '../../api/resolved.js';
import type { OperatingSystemConfig } from '../../api/schema.js';
import { encodeRequest } from '../../renderers/webhook/protocol.js';

const root = join(import.meta.dirname, '..', '..');
const seconds = Number(process.argv[2] ?? 5);
const CLIENTS = 16;
const LIMITS = [1, 2, 4, 8];

function typicalConfig(): ResolvedConfig {
  const [doc] = loadDocuments(
    readFileSync(join(root, 'examples', 'ubuntu-kubeadm-reconcile.yaml'), 'utf8'),
  );
  const osc = doc?.value as OperatingSystemConfig;
  const r = resolve(osc.spec, NO_REFERENCES);
  if (!r.ok) throw new Error('example does not resolve');
  return r.config;
}

interface Body {
  label: string;
  bytes: Buffer;
  headers: Record<string, string>;
}

function bodies(): Body[] {
  const context = {
    name: 'bench',
    namespace: 'default',
    purpose: 'reconcile' as const,
    format: 'cloud-config' as const,
  };
  const many = typicalConfig();
  for (let i = 0; i < 100; i++) {
    many.files.push({
      path: `/etc/bench/f-${String(i)}.bin`,
      mode: 0o644,
      user: 'root',
      group: 'root',
      content: randomBytes(10_486),
    });
  }
  const big = typicalConfig();
  for (let i = 0; i < 12; i++) {
    big.files.push({
      path: `/etc/bench/big-${String(i)}.txt`,
      mode: 0o644,
      user: 'root',
      group: 'root',
      content: Buffer.from(
        `bench text, file ${String(i).padStart(2, '0')}\n`.repeat((900 * 1024) / 20),
      ),
    });
  }
  const json = (c: ResolvedConfig): Buffer =>
    Buffer.from(JSON.stringify(encodeRequest(c, context)));
  return [
    {
      label: '1 MiB OSC',
      bytes: json(many),
      headers: { 'content-type': 'application/json' },
    },
    {
      label: '10.5 MiB text, gzip',
      bytes: gzipSync(json(big)),
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
    },
  ];
}

interface Server {
  url: string;
  pid: number;
  stop: () => Promise<void>;
}

async function startServe(limit: number): Promise<Server> {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      join(root, 'cli', 'oscar.ts'),
      'renderer',
      'serve',
      '--type',
      'ubuntu',
      '--listen',
      '127.0.0.1:0',
      '--quiet',
      '--log-level',
      'warn',
      '--concurrency',
      String(limit),
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const lines = createInterface({ input: child.stdout });
  const [line] = (await once(lines, 'line')) as [string];
  const { url } = JSON.parse(line) as { url: string };
  return {
    url,
    pid: child.pid ?? 0,
    stop: async () => {
      child.kill('SIGTERM');
      await once(child, 'exit');
    },
  };
}

/** A field of /proc/PID/status in MiB. */
async function statusMiB(pid: number, field: string): Promise<number> {
  const status = await readFile(`/proc/${String(pid)}/status`, 'utf8');
  const kb = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1];
  return Number(kb) / 1024;
}

/** `CLIENTS` clients, each posting `body` again as soon as it is answered, for `seconds`. */
async function load(url: string, body: Body): Promise<{ perSecond: number; failed: number }> {
  let handled = 0;
  let failed = 0;
  const post = async (): Promise<void> => {
    const res = await fetch(url, { method: 'POST', headers: body.headers, body: body.bytes });
    await res.arrayBuffer();
    if (res.status === 200) handled++;
    else failed++;
  };
  await post(); // warm up: the renderer's code and the connection
  handled = 0;
  const t0 = performance.now();
  const end = t0 + seconds * 1000;
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (performance.now() < end) await post();
    }),
  );
  return { perSecond: handled / ((performance.now() - t0) / 1000), failed };
}

console.log(
  `oscar renderer serve --concurrency N: ${String(CLIENTS)} clients with a body in flight each, ${String(seconds)} s per case, a fresh server per case`,
);
for (const body of bodies()) {
  console.log(`\n${body.label} (${String(body.bytes.length)} bytes on the wire)`);
  for (const limit of LIMITS) {
    const server = await startServe(limit);
    try {
      const idle = await statusMiB(server.pid, 'VmRSS');
      const m = await load(server.url, body);
      const peak = await statusMiB(server.pid, 'VmHWM');
      console.log(
        `  --concurrency ${String(limit)}: ${m.perSecond.toFixed(1).padStart(7)} bodies/s   peak RSS ${peak.toFixed(0).padStart(4)} MiB (idle ${idle.toFixed(0)} MiB)${m.failed > 0 ? `   ${String(m.failed)} not 200` : ''}`,
      );
    } finally {
      await server.stop();
    }
  }
}
