// `oscar renderer serve` as its own process: --concurrency sets how many requests it reads and
// renders at once (api/slots.ts), and a value that is not a positive integer refuses the start.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { encodeRequest } from '../../renderers/webhook/protocol.js';
import { DEFAULT_RENDER_SLOTS, RENDER_PATH } from '../../renderers/webhook/server.js';
import { holdRequest } from '../../test/support/held-request.js';
import { waitFor } from '../../test/support/wait.js';

const repoRoot = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..');

function serve(args: string[]) {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', join(repoRoot, 'cli', 'oscar.ts'), 'renderer', 'serve', ...args],
    { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('close', resolve));
  return { child, out: () => out, err: () => err, exited };
}

const renderRequest = JSON.stringify(
  encodeRequest(
    {
      type: 'generic',
      purpose: 'provision',
      units: [],
      files: [
        { path: '/etc/a', mode: 0o644, user: 'root', group: 'root', content: Buffer.from('a') },
      ],
      packages: [],
    },
    { name: 'n', namespace: 'ns', purpose: 'provision', format: 'script' },
  ),
);

describe('oscar renderer serve --concurrency', () => {
  it(`renders as many requests at once as it is given (here ${String(DEFAULT_RENDER_SLOTS + 1)}, one over the default)`, async () => {
    const limit = DEFAULT_RENDER_SLOTS + 1;
    const p = serve([
      '--type',
      'generic',
      '--listen',
      '127.0.0.1:0',
      '--quiet',
      '--concurrency',
      String(limit),
    ]);
    try {
      const url = await waitFor(
        'the listening line',
        () => {
          const line = p
            .out()
            .split('\n')
            .find((l) => l.includes('"listening"'));
          return line === undefined ? undefined : (JSON.parse(line) as { url: string }).url;
        },
        { timeoutMs: 60_000, onTimeout: p.err },
      );
      expect(url.endsWith(RENDER_PATH)).toBe(true);
      // all slots but one held by requests whose bodies have not finished
      const held = [];
      for (let i = 0; i < limit - 1; i++) held.push(await holdRequest(url, renderRequest));
      // the last slot: with the default limit this request would wait behind the held ones
      const res = await fetch(url, { method: 'POST', body: renderRequest });
      expect(res.status).toBe(200);
      expect(await res.text()).toContain('"userData"');
      for (const h of held) expect(await h.release()).toBe(200);
    } finally {
      p.child.kill('SIGTERM');
      await p.exited;
    }
  });

  for (const bad of ['0', 'two']) {
    it(`refuses --concurrency ${bad} before it listens: exit 1, naming the flag and the fix`, async () => {
      const p = serve(['--type', 'generic', '--listen', '127.0.0.1:0', '--concurrency', bad]);
      expect(await p.exited).toBe(1);
      expect(p.err()).toContain(
        `oscar renderer serve: --concurrency: "${bad}" is not a positive integer; give the number of renders at once, such as 2`,
      );
      expect(p.out()).not.toContain('listening');
    });
  }
});
