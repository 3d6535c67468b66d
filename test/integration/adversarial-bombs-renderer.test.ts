// A decompression bomb fed to `oscar renderer serve` as its own process: one unauthenticated
// request whose gzip body inflates to 700 MiB. The server ships no Deployment of its own, so it
// runs here under the limit docs/renderer-protocol.md tells operators to give it (256Mi), as the
// kernel enforces it (a memory cgroup of its own, test/support/memory-cgroup.ts). It refuses the
// body with 413 as it inflates (the request limit counts inflated bytes), is not OOM-killed, and
// renders the next request (positive control).
import { gzipSync } from 'node:zlib';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeRequest } from '../../renderers/webhook/protocol.js';
import { bomb, MiB, peakRss } from '../support/bombs.js';
import { memoryCgroup, type MemoryCgroup } from '../support/memory-cgroup.js';
import { repoRoot } from '../support/tools.js';
import { uniqueName } from './support/cluster.js';
import { startRendererProcess, type RendererProcess } from './support/webhook.js';

/** The memory limit docs/renderer-protocol.md gives `oscar renderer serve`. */
const RENDERER_LIMIT = 256 * MiB;

let cgroup: MemoryCgroup | undefined;
let server: RendererProcess | undefined;

beforeAll(async () => {
  cgroup = memoryCgroup(uniqueName('oscar-bomb-renderer'), RENDERER_LIMIT);
  const argv = [
    process.execPath,
    '--import',
    'tsx',
    join(repoRoot, 'cli', 'oscar.ts'),
    'renderer',
    'serve',
    '--type',
    'ubuntu',
    '--listen',
    '127.0.0.1:0',
    '--quiet',
  ];
  const [command = '', ...args] = cgroup ? cgroup.wrap(argv) : argv;
  server = await startRendererProcess(command, args);
});

afterAll(async () => {
  await server?.stop();
  await cgroup?.remove();
});

const smallRequest = () =>
  encodeRequest(
    {
      type: 'ubuntu',
      purpose: 'provision',
      units: [],
      files: [
        { path: '/etc/a', mode: 0o644, user: 'root', group: 'root', content: Buffer.from('a') },
      ],
      packages: [],
    },
    { name: 'n', namespace: 'ns', purpose: 'provision', format: 'cloud-config' },
  );

async function post(body: Buffer): Promise<Response> {
  // the URL the server prints is the render endpoint itself
  return fetch(server?.url ?? '', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
    body,
  });
}

describe('a decompression bomb as a render request’s body', () => {
  it('is refused with 413; the renderer lives on under its memory limit and renders the next request', async () => {
    const zipped = await bomb(700);
    expect(zipped.length).toBeLessThan(MiB);
    const refused = await post(zipped);
    expect(refused.status).toBe(413);
    expect(server?.child.exitCode).toBeNull();
    const peak = peakRss(server?.child.pid ?? 0);
    console.info(`renderer peak RSS after the bomb: ${(peak / MiB).toFixed(0)} MiB`);
    expect(peak).toBeLessThan(RENDERER_LIMIT);
    if (cgroup) {
      console.info(
        `renderer cgroup (${cgroup.path}): peak ${(cgroup.peak() / MiB).toFixed(0)} MiB, OOM kills ${String(cgroup.oomKills())}`,
      );
      expect(cgroup.oomKills()).toBe(0);
    }
    // positive control: the same process renders an ordinary request
    const ok = await post(gzipSync(Buffer.from(JSON.stringify(smallRequest()))));
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { kind?: string }).kind).toBe('RenderResponse');
  }, 120_000);
});
