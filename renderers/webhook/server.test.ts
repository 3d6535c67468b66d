import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Slots } from '../../api/slots.js';
import { waitFor } from '../../test/support/wait.js';
import { defaultRegistry } from '../registry.js';
import { encodeRequest, PROTOCOL_VERSION } from './protocol.js';
import {
  createRendererApp,
  listen,
  parseListen,
  RENDER_PATH,
  type RunningServer,
} from './server.js';

let running: RunningServer;
const log: { status: number; code?: string }[] = [];
beforeAll(async () => {
  const app = createRendererApp(defaultRegistry(), ['generic'], {
    maxRequestBytes: 64 * 1024,
    onRequest: (e) => log.push(e),
  });
  running = await listen(app, { host: '127.0.0.1', port: 0 });
});
afterAll(() => running.close());

async function post(body: string | object): Promise<{
  status: number;
  json: { error?: { code: string; message: string; field?: string } };
}> {
  const res = await fetch(`${running.url}${RENDER_PATH}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return {
    status: res.status,
    json: (await res.json()) as { error?: { code: string; message: string; field?: string } },
  };
}

const request = (type: string, path = '/etc/a') =>
  encodeRequest(
    {
      type,
      purpose: 'provision',
      units: [],
      files: [{ path, mode: 0o644, user: 'root', group: 'root', content: Buffer.from('a') }],
      packages: [],
    },
    { name: 'n', namespace: 'ns', purpose: 'provision', format: 'script' },
  );

describe('the renderer server', () => {
  it('answers every refusal with a RenderError: 400 protocol, 422 config, 413 size', async () => {
    const notJson = await post('{oops');
    expect(notJson.status).toBe(400);
    expect(notJson.json).toMatchObject({
      apiVersion: PROTOCOL_VERSION,
      kind: 'RenderError',
      error: { code: 'BadRequest' },
    });

    const schema = await post({ apiVersion: PROTOCOL_VERSION, kind: 'RenderRequest' });
    expect(schema.status).toBe(400);
    expect(schema.json.error?.message).toContain('must have required properties config, context');

    const otherType = await post(request('ubuntu'));
    expect(otherType.status).toBe(422);
    expect(otherType.json.error).toMatchObject({ code: 'UnknownType', field: 'spec.type' });
    expect(otherType.json.error?.message).toContain('serves "generic", not "ubuntu"');

    const invalid = await post(request('generic', '/etc/../passwd'));
    expect(invalid.status).toBe(422);
    expect(invalid.json.error).toMatchObject({ code: 'Invalid', field: 'spec.files[0].path' });

    const big = await post({ ...request('generic'), pad: 'x'.repeat(100 * 1024) });
    expect(big.status).toBe(413);
    expect(big.json.error?.code).toBe('RequestTooLarge');
    expect(log.map((e) => e.status)).toEqual([400, 400, 422, 422, 413]);
  });

  it('parses --listen addresses', () => {
    expect(parseListen(':8443')).toEqual({ host: '0.0.0.0', port: 8443 });
    expect(parseListen('127.0.0.1:0')).toEqual({ host: '127.0.0.1', port: 0 });
    expect(parseListen('[::1]:9000')).toEqual({ host: '::1', port: 9000 });
    expect(() => parseListen('localhost:http')).toThrow('expected host:port');
  });
});

describe('a gzip bomb as the request body', () => {
  it('is refused with 413 as it inflates (the limit counts inflated bytes); the server answers on', async () => {
    const { gzipSync } = await import('node:zlib');
    const bomb = gzipSync(Buffer.alloc(64 * 1024 * 1024, 0x20), { level: 1 });
    const res = await fetch(`${running.url}${RENDER_PATH}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      body: bomb,
    });
    expect(res.status).toBe(413);
    const before = process.memoryUsage().rss;
    expect(bomb.length).toBeLessThan((64 * 1024 * 1024) / 100);
    // positive control: the same server still renders a small gzip body
    const ok = await fetch(`${running.url}${RENDER_PATH}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      body: gzipSync(Buffer.from(JSON.stringify(request('generic')))),
    });
    expect(ok.status).toBe(200);
    expect(process.memoryUsage().rss - before).toBeLessThan(32 * 1024 * 1024);
  });
});

describe('the renderer server and a client that never finishes its request (slowloris)', () => {
  /** Sends `partial` on a raw connection and returns what the server answers before it closes. */
  async function hold(url: string, partial: string): Promise<string> {
    const { hostname, port } = new URL(url);
    const socket = connect(Number(port), hostname);
    socket.write(partial);
    let answer = '';
    socket.on('data', (d: Buffer) => (answer += d.toString()));
    await new Promise<void>((resolve) =>
      socket.on('close', () => {
        resolve();
      }),
    );
    return answer;
  }

  it('drops a request whose headers or body stall (408), and still renders a whole one', async () => {
    const app = createRendererApp(defaultRegistry(), ['generic']);
    const slow = await listen(app, {
      host: '127.0.0.1',
      port: 0,
      headersTimeoutMs: 200,
      requestTimeoutMs: 400,
    });
    try {
      // headers never end; then a body shorter than its content-length
      expect(await hold(slow.url, `POST ${RENDER_PATH} HTTP/1.1\r\nHost: x\r\nX-A: `)).toMatch(
        /^HTTP\/1\.1 408/,
      );
      expect(
        await hold(
          slow.url,
          `POST ${RENDER_PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"a":`,
        ),
      ).toMatch(/^HTTP\/1\.1 408/);
      const res = await fetch(`${slow.url}${RENDER_PATH}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(request('generic')),
      });
      expect(res.status).toBe(200);
    } finally {
      await slow.close();
    }
  });

  it('JSON nested a million deep is a 400, not a crash; the server renders on', async () => {
    const deep = `${'['.repeat(1_000_000)}${']'.repeat(1_000_000)}`;
    const app = createRendererApp(defaultRegistry(), ['generic']);
    const big = await listen(app, { host: '127.0.0.1', port: 0 });
    try {
      const res = await fetch(`${big.url}${RENDER_PATH}`, { method: 'POST', body: deep });
      expect(res.status).toBe(400);
      const ok = await fetch(`${big.url}${RENDER_PATH}`, {
        method: 'POST',
        body: JSON.stringify(request('generic')),
      });
      expect(ok.status).toBe(200);
    } finally {
      await big.close();
    }
  });
});

describe('the renderer server and many requests at once, each under the limit', () => {
  /** A request whose headers are whole and whose body never ends: it holds what it took. */
  function openBody(url: string): ReturnType<typeof connect> {
    const { hostname, port } = new URL(url);
    const socket = connect(Number(port), hostname);
    socket.on('error', () => undefined);
    socket.write(
      `POST ${RENDER_PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"a":`,
    );
    return socket;
  }

  it('reads and renders at most its slots at once; the next waits unread, and gets the slot a client gives up', async () => {
    // each body is bounded; without slots their sum is not (N small gzip bombs at once)
    const slots = new Slots(2);
    const app = createRendererApp(defaultRegistry(), ['generic'], { slots });
    const server = await listen(app, { host: '127.0.0.1', port: 0 });
    const held = [openBody(server.url), openBody(server.url)];
    try {
      await waitFor('two unfinished bodies to hold both slots', () => slots.inUse === 2, 30_000);
      let answered = false;
      const third = fetch(`${server.url}${RENDER_PATH}`, {
        method: 'POST',
        body: JSON.stringify(request('generic')),
      }).then((res) => {
        answered = true;
        return res;
      });
      await waitFor('the third request to wait for a slot', () => slots.queued === 1, 30_000);
      expect(answered).toBe(false);
      held[0]?.destroy(); // its client leaves: the slot is the third's
      expect((await third).status).toBe(200);
      held[1]?.destroy();
      await waitFor('every slot back', () => slots.inUse === 0 && slots.queued === 0, 30_000);
    } finally {
      for (const socket of held) socket.destroy();
      await server.close();
    }
  });
});
