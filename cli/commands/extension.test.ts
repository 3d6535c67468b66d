// `oscar extension serve` as the process a Deployment runs: it reads its flags and files, prints
// where it listens, serves discovery over HTTPS with the given certificate, stops on SIGTERM.
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_HOOK_SLOTS } from '../../controller/extension/server.js';
import { holdRequest } from '../../test/support/held-request.js';
import { loopbackServingCert } from '../../test/support/serving-cert.js';
import { requireTool } from '../../test/support/tools.js';

const repoRoot = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
let dir = '';
let skip: string | undefined;

beforeAll(async () => {
  if (!requireTool('openssl', 'apt-get install openssl (hack/deps.sh)')) {
    skip = 'openssl is missing';
    return;
  }
  dir = await mkdtemp(join(tmpdir(), 'oscar-ext-cli-'));
  const serving = await loopbackServingCert(dir);
  await writeFile(join(dir, 'tls.crt'), serving.cert);
  await writeFile(join(dir, 'tls.key'), serving.key);
  // never contacted: discovery needs no API server
  await writeFile(
    join(dir, 'kubeconfig'),
    [
      'apiVersion: v1',
      'kind: Config',
      'clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]',
      'users: [{name: u, user: {token: t}}]',
      'contexts: [{name: x, context: {cluster: c, user: u}}]',
      'current-context: x',
      '',
    ].join('\n'),
  );
});

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

function oscar(args: string[]) {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', join(repoRoot, 'cli', 'oscar.ts'), 'extension', 'serve', ...args],
    { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  return { child, out: () => out, err: () => err, exited };
}

/** The hooks URL the process prints once it listens. */
async function listeningUrl(p: ReturnType<typeof oscar>): Promise<string> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const line = p
      .out()
      .split('\n')
      .find((l) => l.includes('"listening"'));
    if (line) return (JSON.parse(line) as { url: string }).url;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`oscar extension serve did not say where it listens: ${p.err()}`);
}

describe('oscar extension serve', () => {
  it('serves discovery over HTTPS on the address it prints; SIGTERM ends it with 0', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const p = oscar([
      '--kubeconfig',
      join(dir, 'kubeconfig'),
      '--listen',
      '127.0.0.1:0',
      '--tls-cert',
      join(dir, 'tls.crt'),
      '--tls-key',
      join(dir, 'tls.key'),
      '--metrics-addr',
      '127.0.0.1:0',
      '--log-format',
      'json',
    ]);
    const deadline = Date.now() + 30_000;
    let url = '';
    let metrics = '';
    while (!url && Date.now() < deadline) {
      const line = p
        .out()
        .split('\n')
        .find((l) => l.includes('"listening"'));
      if (line) ({ url, metrics } = JSON.parse(line) as { url: string; metrics: string });
      else await new Promise((r) => setTimeout(r, 100));
    }
    expect(url, p.err()).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const ca = await readFile(join(dir, 'ca.crt'));
    const body = await new Promise<string>((resolve, reject) => {
      const req = request(
        `${url}/hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery`,
        { method: 'POST', ca },
        (res) => {
          let b = '';
          res.on('data', (d: Buffer) => (b += d.toString()));
          res.on('end', () => {
            resolve(b);
          });
        },
      );
      req.on('error', reject);
      req.end('{}');
    });
    const discovery = JSON.parse(body) as { kind: string; handlers: { name: string }[] };
    expect(discovery.kind).toBe('DiscoveryResponse');
    expect(discovery.handlers.map((h) => h.name)).toEqual([
      'can-update-machineset',
      'can-update-machine',
      'update-machine',
    ]);
    // /metrics over plain HTTP on its own address: the discovery call is counted there
    expect(metrics).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    const scraped = await (await fetch(metrics)).text();
    expect(scraped).toContain(
      'oscar_extension_requests_total{hook="Discovery",status="Success"} 1',
    );
    expect(scraped).toContain('process_resident_memory_bytes');
    p.child.kill('SIGTERM');
    expect(await p.exited).toBe(0);
  });

  it('a bad --metrics-addr: exit 1, naming the flag', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const p = oscar([
      '--tls-cert',
      join(dir, 'tls.crt'),
      '--tls-key',
      join(dir, 'tls.key'),
      '--metrics-addr',
      'nope',
    ]);
    expect(await p.exited).toBe(1);
    expect(p.err()).toContain('--metrics-addr "nope": expected host:port');
  });

  it('a missing certificate file: exit 1, naming the flag', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const p = oscar(['--tls-cert', join(dir, 'nope.crt'), '--tls-key', join(dir, 'tls.key')]);
    expect(await p.exited).toBe(1);
    expect(p.err()).toMatch(/oscar extension serve: --tls-cert\/--tls-key: .*nope\.crt/);
  });

  it(`--concurrency sets the hook calls handled at once (here ${String(DEFAULT_HOOK_SLOTS + 1)}, one over the default)`, async (ctx) => {
    if (skip) return ctx.skip(skip);
    const limit = DEFAULT_HOOK_SLOTS + 1;
    const p = oscar([
      '--kubeconfig',
      join(dir, 'kubeconfig'),
      '--listen',
      '127.0.0.1:0',
      '--tls-cert',
      join(dir, 'tls.crt'),
      '--tls-key',
      join(dir, 'tls.key'),
      '--concurrency',
      String(limit),
    ]);
    try {
      const discovery = `${await listeningUrl(p)}/hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery`;
      const ca = await readFile(join(dir, 'ca.crt'));
      // all slots but one held by calls whose bodies have not finished
      const held = [];
      for (let i = 0; i < limit - 1; i++) held.push(await holdRequest(discovery, '{"a":1}', ca));
      // the last slot: with the default limit this call would wait behind the held ones
      const last = await holdRequest(discovery, '{"a":1}', ca);
      expect(await last.release()).toBe(200);
      for (const h of held) expect(await h.release()).toBe(200);
    } finally {
      p.child.kill('SIGTERM');
      await p.exited;
    }
  });

  it('a --concurrency that is not a positive integer: exit 1, naming the flag and the fix', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const p = oscar([
      '--tls-cert',
      join(dir, 'tls.crt'),
      '--tls-key',
      join(dir, 'tls.key'),
      '--concurrency',
      '0',
    ]);
    expect(await p.exited).toBe(1);
    expect(p.err()).toContain(
      'oscar extension serve: --concurrency: "0" is not a positive integer; give the number of hook calls at once, such as 2',
    );
  });
});
