/**
 * Benchmark (issue: external renderers): renders per second of a typical OSC
 * (examples/ubuntu-kubeadm-reconcile.yaml, as cloud-config) in process vs. over HTTP through
 * `oscar renderer serve` running as its own process, with keep-alive, one at a time and 4 in
 * flight (the controller's default concurrency). Also a 1 MiB config, where the JSON and base64
 * of the protocol weigh most.
 * Run: node --import tsx hack/bench/webhook.ts [seconds per case, default 3]
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { loadDocuments } from '../../api/load.js';
import { NO_REFERENCES, resolve } from '../../api/resolve.js';
import type { ResolvedConfig } from '../../api/resolved.js';
import type { OperatingSystemConfig } from '../../api/schema.js';
import { defaultRegistry } from '../../renderers/registry.js';
import type { RenderContext, Renderer } from '../../renderers/types.js';
import { WebhookRenderer } from '../../renderers/webhook/client.js';

const root = join(import.meta.dirname, '..', '..');
const seconds = Number(process.argv[2] ?? 3);

function typicalConfig(): ResolvedConfig {
  const [doc] = loadDocuments(
    readFileSync(join(root, 'examples', 'ubuntu-kubeadm-reconcile.yaml'), 'utf8'),
  );
  const osc = doc?.value as OperatingSystemConfig;
  const r = resolve(osc.spec, NO_REFERENCES);
  if (!r.ok) throw new Error('example does not resolve');
  return r.config;
}

function largeConfig(): ResolvedConfig {
  const config = typicalConfig();
  for (let i = 0; i < 100; i++) {
    config.files.push({
      path: `/etc/bench/f-${String(i)}.bin`,
      mode: 0o644,
      user: 'root',
      group: 'root',
      content: randomBytes(10_486),
    });
  }
  return config;
}

async function startServe(): Promise<{ url: string; stop: () => Promise<void> }> {
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
    ],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const lines = createInterface({ input: child.stdout });
  const [line] = (await once(lines, 'line')) as [string];
  const { url } = JSON.parse(line) as { url: string };
  return {
    url,
    stop: async () => {
      child.kill('SIGTERM');
      await once(child, 'exit');
    },
  };
}

/** Renders for `seconds` with `inFlight` concurrent callers; returns renders per second. */
async function measure(
  renderer: Renderer,
  config: ResolvedConfig,
  context: RenderContext,
  inFlight: number,
): Promise<{ perSecond: number; p50: number; p99: number }> {
  for (let i = 0; i < 50; i++) await renderer.render(config, context); // warm up (JIT, connections)
  const latencies: number[] = [];
  const end = performance.now() + seconds * 1000;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (performance.now() < end) {
        const s = performance.now();
        await renderer.render(config, context);
        latencies.push(performance.now() - s);
      }
    }),
  );
  const elapsed = (performance.now() - t0) / 1000;
  latencies.sort((a, b) => a - b);
  const at = (q: number): number =>
    latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN;
  return { perSecond: latencies.length / elapsed, p50: at(0.5), p99: at(0.99) };
}

const serve = await startServe();
const local = defaultRegistry().get('ubuntu');
if (!local) throw new Error('no ubuntu renderer');
const remote = new WebhookRenderer({
  url: serve.url,
  types: ['ubuntu'],
  formats: ['cloud-config', 'script'],
});
const context: RenderContext = {
  name: 'bench',
  namespace: 'default',
  purpose: 'reconcile',
  format: 'cloud-config',
};

try {
  for (const [label, config] of [
    ['typical (examples/ubuntu-kubeadm-reconcile.yaml)', typicalConfig()],
    ['large (+100 files, 1 MiB)', largeConfig()],
  ] as const) {
    const out = await local.render(config, context);
    const bytes = config.files.reduce((n, f) => n + f.content.length, 0);
    console.log(
      `\n${label}: ${String(config.files.length)} files (${String(bytes)} bytes), ${String(config.units.length)} units → ${String(out.userData.length)} bytes of cloud-config`,
    );
    const rows: [string, Renderer, number][] = [
      ['in process', local, 1],
      ['HTTP, keep-alive, 1 in flight', remote, 1],
      ['HTTP, keep-alive, 4 in flight', remote, 4],
    ];
    for (const [name, renderer, inFlight] of rows) {
      const m = await measure(renderer, config, context, inFlight);
      console.log(
        `  ${name.padEnd(32)} ${m.perSecond.toFixed(0).padStart(7)} renders/s   p50 ${m.p50.toFixed(2)} ms   p99 ${m.p99.toFixed(2)} ms`,
      );
    }
  }
} finally {
  remote.close();
  await serve.stop();
}
