// The HTTP client against real local servers that misbehave on purpose: every failure mode ends
// in a RendererError with the right code, retried only when a retry can help.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ResolvedConfig } from '../../api/resolved.js';
import { TestPki } from '../../hack/testenv/certs.js';
import { requireTool } from '../../test/support/tools.js';
import { defaultRegistry } from '../registry.js';
import type { RenderContext } from '../types.js';
import { RendererError, WebhookRenderer, type WebhookRendererOptions } from './client.js';
import { encodeError, encodeResponse, PROTOCOL_VERSION } from './protocol.js';
import { createRendererApp, listen, RENDER_PATH } from './server.js';

const config: ResolvedConfig = {
  type: 'generic',
  purpose: 'provision',
  units: [
    {
      name: 'hello.service',
      enable: true,
      mask: false,
      command: 'start',
      onChange: 'restart',
      content: '[Service]\nExecStart=/bin/true\n',
      dropIns: [],
      filePaths: [],
    },
  ],
  files: [
    {
      path: '/etc/hello',
      mode: 0o640,
      user: 'root',
      group: 'root',
      content: Buffer.from([0, 1, 2, 255]),
    },
  ],
  packages: [],
};
const context: RenderContext = {
  name: 'hello',
  namespace: 'default',
  purpose: 'provision',
  format: 'script',
};

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** A local server whose every answer `handler` decides; counts the requests it saw. */
async function serve(
  handler: Handler,
  server: Server = createServer(),
): Promise<{ url: string; hits: () => number }> {
  let hits = 0;
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    hits++;
    req.resume();
    req.on('end', () => {
      handler(req, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
        server.closeAllConnections();
      }),
  );
  const { port } = server.address() as AddressInfo;
  const scheme = server instanceof (await import('node:https')).Server ? 'https' : 'http';
  return { url: `${scheme}://127.0.0.1:${String(port)}${RENDER_PATH}`, hits: () => hits };
}

function client(
  url: string,
  extra: Partial<WebhookRendererOptions> = {},
): WebhookRenderer & { waits: number[] } {
  const waits: number[] = [];
  const r = new WebhookRenderer({
    url,
    types: ['generic'],
    formats: ['script', 'cloud-config'],
    timeoutMs: 2000,
    sleep: (ms) => {
      waits.push(ms);
      return Promise.resolve();
    },
    ...extra,
  });
  cleanups.push(() => {
    r.close();
  });
  return Object.assign(r, { waits });
}

async function failure(p: Promise<unknown>): Promise<RendererError> {
  try {
    await p;
  } catch (error) {
    expect(error).toBeInstanceOf(RendererError);
    return error as RendererError;
  }
  throw new Error('expected the render to fail');
}

const json = (res: ServerResponse, status: number, body: unknown): void => {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
};

const good = (): unknown =>
  encodeResponse({
    userData: Buffer.from('#!/bin/sh\n'),
    format: 'script',
    extraUnits: [],
    extraFiles: [],
    warnings: ['w'],
  });

describe('WebhookRenderer', () => {
  it('renders through oscar’s own server exactly as in process', async () => {
    const running = await listen(createRendererApp(defaultRegistry()), {
      host: '127.0.0.1',
      port: 0,
    });
    cleanups.push(() => running.close());
    const remote = await client(`${running.url}${RENDER_PATH}`).render(config, context);
    const local = await defaultRegistry().get('generic')?.render(config, context);
    expect(remote).toEqual(local);
    expect(remote.userData.equals(local?.userData ?? Buffer.alloc(0))).toBe(true);
  });

  it('timeout: a renderer that never answers fails after the deadline, without retries', async () => {
    const s = await serve(() => undefined);
    const e = await failure(client(s.url, { timeoutMs: 300 }).render(config, context));
    expect(e.code).toBe('Timeout');
    expect(e.source).toBe('transport');
    expect(e.message).toContain('no complete answer within 300 ms');
    expect(s.hits()).toBe(1);
  });

  it('timeout: also when the body trickles in slower than the deadline', async () => {
    const s = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"apiVersion":');
    });
    expect((await failure(client(s.url, { timeoutMs: 300 }).render(config, context))).code).toBe(
      'Timeout',
    );
  });

  it('connection refused: retried with growing backoff, then Unreachable', async () => {
    const s = await serve(() => undefined);
    const url = s.url;
    await cleanups.pop()?.(); // close the server: nothing listens on the port any more
    const r = client(url, { retries: 3, backoffMs: 100 });
    const e = await failure(r.render(config, context));
    expect(e.code).toBe('Unreachable');
    expect(e.message).toContain('ECONNREFUSED');
    expect(e.attempts).toBe(4);
    expect(r.waits).toHaveLength(3);
    // jittered exponential: [base/2, base] with base 100, 200, 400
    expect(r.waits[0]).toBeGreaterThanOrEqual(50);
    expect(r.waits[0]).toBeLessThanOrEqual(100);
    expect(r.waits[2]).toBeGreaterThanOrEqual(200);
    expect(r.waits[2]).toBeLessThanOrEqual(400);
  });

  it('500 without a RenderError: retried, and a later success is used', async () => {
    let n = 0;
    const s = await serve((_req, res) => {
      n++;
      if (n < 3) res.writeHead(500).end('boom');
      else json(res, 200, good());
    });
    const result = await client(s.url).render(config, context);
    expect(result.userData.toString()).toBe('#!/bin/sh\n');
    expect(s.hits()).toBe(3);
  });

  it('500 every time: ServerError after the bounded retries', async () => {
    const s = await serve((_req, res) => {
      res.writeHead(503).end();
    });
    const e = await failure(client(s.url, { retries: 2 }).render(config, context));
    expect(e.code).toBe('ServerError');
    expect(e.message).toContain('HTTP 503');
    expect(e.attempts).toBe(3);
    expect(s.hits()).toBe(3);
  });

  it.each([301, 302, 307, 308])(
    'a %i redirect (to loopback or a metadata address) is never followed: final, nothing sent there (red-team round 2)',
    async (status) => {
      const target = await serve((_req, res) => {
        json(res, 200, good()); // what a follower would have taken as the rendering
      });
      const s = await serve((_req, res) => {
        res.writeHead(status, { location: target.url }).end();
      });
      const e = await failure(client(s.url).render(config, context));
      expect(e.code).toBe('HttpError');
      expect(e.message).toContain(`HTTP ${String(status)}`);
      expect([s.hits(), target.hits()]).toEqual([1, 0]);
    },
  );

  it('4xx without a RenderError: final at once', async () => {
    const s = await serve((_req, res) => {
      res.writeHead(404).end('<html>not found</html>');
    });
    const e = await failure(client(s.url).render(config, context));
    expect(e.code).toBe('HttpError');
    expect(e.message).toContain('HTTP 404');
    expect(s.hits()).toBe(1);
  });

  it('invalid JSON: InvalidResponse, not retried, body not echoed', async () => {
    const s = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('secret-token-123 is not json');
    });
    const e = await failure(client(s.url).render(config, context));
    expect(e.code).toBe('InvalidResponse');
    expect(e.message).toContain('not JSON');
    expect(e.message).not.toContain('secret-token');
    expect(s.hits()).toBe(1);
  });

  it('schema-invalid response: InvalidResponse naming the fields', async () => {
    const s = await serve((_req, res) => {
      json(res, 200, {
        apiVersion: PROTOCOL_VERSION,
        kind: 'RenderResponse',
        userData: 42,
        format: 'script',
        extraUnits: [],
        warnings: [],
      });
    });
    const e = await failure(client(s.url).render(config, context));
    expect(e.code).toBe('InvalidResponse');
    expect(e.message).toContain('response.userData');
    expect(e.message).toContain('extraFiles');
  });

  it('refuses bad base64, another apiVersion and another format than asked', async () => {
    const bodies = [
      { ...(good() as object), userData: 'not base64!' },
      { ...(good() as object), apiVersion: 'oscar.dev/render/v2' },
      { ...(good() as object), format: 'cloud-config' },
    ];
    const messages: string[] = [];
    for (const body of bodies) {
      const s = await serve((_req, res) => {
        json(res, 200, body);
      });
      const e = await failure(client(s.url).render(config, context));
      expect(e.code).toBe('InvalidResponse');
      messages.push(e.message);
    }
    expect(messages[0]).toContain('response.userData: is not standard padded base64');
    expect(messages[1]).toContain('speaks apiVersion "oscar.dev/render/v2"');
    expect(messages[2]).toContain('asked for format "script", got "cloud-config"');
  });

  it('oversized response: cut off while streaming, past the limit', async () => {
    let serverSawClose = false;
    let written = 0;
    const s = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }); // chunked: no length up front
      const chunk = Buffer.alloc(64 * 1024, 0x41);
      res.on('close', () => {
        serverSawClose = true;
      });
      const pump = (): void => {
        while (!res.destroyed && written < 64 * 1024 * 1024) {
          written += chunk.length;
          if (!res.write(chunk)) {
            res.once('drain', pump);
            return;
          }
        }
        res.end();
      };
      pump();
    });
    const e = await failure(
      client(s.url, { maxResponseBytes: 256 * 1024 }).render(config, context),
    );
    expect(e.code).toBe('ResponseTooLarge');
    expect(e.message).toContain('256.0 KiB');
    await expect.poll(() => serverSawClose).toBe(true);
    expect(written).toBeLessThan(64 * 1024 * 1024); // the renderer was stopped, not read to the end
  });

  it('oversized response: refused from its Content-Length before reading it', async () => {
    const s = await serve((_req, res) => {
      res.writeHead(200, {
        'content-type': 'application/json',
        'content-length': String(50 * 1024 * 1024),
      });
      res.write('{');
    });
    const e = await failure(
      client(s.url, { maxResponseBytes: 1024 * 1024 }).render(config, context),
    );
    expect(e.code).toBe('ResponseTooLarge');
  });

  it('structured error: surfaced as it is (code, message, field), never retried, even on 503', async () => {
    for (const status of [422, 503]) {
      const s = await serve((_req, res) => {
        json(
          res,
          status,
          encodeError({
            code: 'Unsupported',
            message: 'alpine has no systemd; drop the unit',
            field: 'spec.units[0]',
          }),
        );
      });
      const e = await failure(client(s.url).render(config, context));
      expect(e.source).toBe('renderer');
      expect(e.code).toBe('Unsupported');
      expect(e.field).toBe('spec.units[0]');
      expect(e.detail).toBe('alpine has no systemd; drop the unit');
      expect(e.message).toContain('spec.units[0]: alpine has no systemd; drop the unit');
      expect(e.message).toContain('(Unsupported)');
      expect(s.hits()).toBe(1);
    }
  });

  it('keeps credentials in the URL out of messages', async () => {
    const s = await serve((_req, res) => {
      res.writeHead(400).end();
    });
    const url = new URL(s.url);
    url.username = 'user';
    url.password = 'hunter2';
    url.search = '?token=abc';
    const e = await failure(client(url.toString()).render(config, context));
    expect(e.message).not.toContain('hunter2');
    expect(e.message).not.toContain('token=abc');
    expect(e.endpoint).toBe(s.url);
  });

  it('sends the protocol request: apiVersion, kind, base64 content, context', async () => {
    let seen: unknown;
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        seen = JSON.parse(Buffer.concat(chunks).toString());
        json(res, 200, good());
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanups.push(
      () =>
        new Promise<void>((r) =>
          server.close(() => {
            r();
          }),
        ),
    );
    const { port } = server.address() as AddressInfo;
    await client(`http://127.0.0.1:${String(port)}/x`).render(config, { ...context, gzip: false });
    expect(seen).toMatchObject({
      apiVersion: PROTOCOL_VERSION,
      kind: 'RenderRequest',
      config: {
        type: 'generic',
        files: [{ path: '/etc/hello', mode: 0o640, content: 'AAEC/w==' }],
      },
      context: {
        name: 'hello',
        namespace: 'default',
        purpose: 'provision',
        format: 'script',
        gzip: false,
      },
    });
  });
});

describe('WebhookRenderer over TLS', () => {
  it('verifies the renderer’s certificate: refused without its CA, accepted with caBundle', async (ctx) => {
    if (!requireTool('openssl', 'apt-get install openssl (hack/deps.sh)')) {
      ctx.skip('openssl is missing');
      return;
    }
    const dir = await mkdtemp(join(tmpdir(), 'oscar-webhook-tls-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const pki = new TestPki(dir);
    await pki.init();
    const pair = await pki.issueServing(['127.0.0.1'], ['localhost']);
    const server = createHttpsServer({
      cert: await readFile(pair.certPath),
      key: await readFile(pair.keyPath),
    });
    const s = await serve((_req, res) => {
      json(res, 200, good());
    }, server);
    expect(s.url.startsWith('https://')).toBe(true);

    const e = await failure(client(s.url).render(config, context));
    expect(e.code).toBe('TLSError');
    expect(e.message).toContain('caBundle');
    expect(s.hits()).toBe(0);

    const ok = await client(s.url, { ca: await readFile(pki.caPath, 'utf8') }).render(
      config,
      context,
    );
    expect(ok.warnings).toEqual(['w']);
  });
});
