import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Check } from './grant.js';
import { judgeUnit, NodeHealthProbe, type UnitState } from './health.js';

const exec = (command: string[], timeoutMs = 2000): Check => ({
  name: 'c',
  kind: 'exec',
  command,
  timeoutMs,
  periodMs: 1000,
  failureThreshold: 3,
});

describe('NodeHealthProbe: exec', () => {
  const probe = new NodeHealthProbe('/');

  it('exit 0 is healthy; another exit status is not, with its output', async () => {
    expect(await probe.run(exec(['/bin/true']))).toMatchObject({ ok: true });
    const r = await probe.run(exec(['/bin/sh', '-c', 'echo broken >&2; exit 3']));
    expect(r).toEqual({ name: 'c', ok: false, message: 'exit 3: broken' });
  });

  it('is killed at its timeout', async () => {
    const t0 = Date.now();
    const r = await probe.run(exec(['/bin/sleep', '10'], 300));
    expect(r.ok).toBe(false);
    expect(r.message).toMatch(/timed out after 0.3 s/);
    expect(Date.now() - t0).toBeLessThan(3000);
  });

  it('runs without a shell and without the agent environment, in the root directory', async () => {
    process.env.OSCAR_TEST_SECRET = 'do-not-leak';
    try {
      const r = await new NodeHealthProbe('/tmp').run(
        exec(['/bin/sh', '-c', 'echo "$PWD $OSCAR_TEST_SECRET;$(echo $PATH)"']),
      );
      expect(r.message).toBe('/tmp ;/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin');
      const glob = await probe.run(exec(['/bin/echo', '$(id)', '*']));
      expect(glob.message).toBe('$(id) *'); // arguments are not interpreted
    } finally {
      delete process.env.OSCAR_TEST_SECRET;
    }
  });

  it('a missing program is unhealthy, not an exception', async () => {
    expect((await probe.run(exec(['/nonexistent/x']))).message).toMatch(/ENOENT/);
  });
});

describe('NodeHealthProbe: httpGet', () => {
  let server: Server;
  let port: number;
  beforeAll(async () => {
    server = createServer((req, res) => {
      res.statusCode = req.url === '/healthz' ? 200 : req.url === '/moved' ? 302 : 500;
      res.setHeader('location', 'http://192.0.2.1/');
      res.end('x');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(
    () =>
      new Promise<void>((r) => {
        server.close(() => {
          r();
        });
      }),
  );

  const get = (path: string, p = port): Check => ({
    name: 'h',
    kind: 'httpGet',
    port: p,
    path,
    scheme: 'HTTP',
    timeoutMs: 2000,
    periodMs: 1000,
    failureThreshold: 3,
  });

  it('2xx and 3xx are healthy (a redirect is not followed); 5xx and a refused connection are not', async () => {
    const probe = new NodeHealthProbe('/');
    expect(await probe.run(get('/healthz'))).toMatchObject({
      ok: true,
      message: `GET http://127.0.0.1:${String(port)}/healthz: HTTP 200`,
    });
    expect((await probe.run(get('/moved'))).ok).toBe(true);
    expect((await probe.run(get('/broken'))).ok).toBe(false);
    const closed = await probe.run(get('/', 1));
    expect(closed.ok).toBe(false);
    expect(closed.message).toMatch(/ECONNREFUSED/);
  });
});

describe('judgeUnit', () => {
  const s = (over: Partial<UnitState>): UnitState => ({
    active: 'active',
    sub: 'running',
    result: 'success',
    type: 'simple',
    restarts: 0,
    ...over,
  });
  it.each([
    ['active', s({}), 0, true, false],
    ['failed: fatal', s({ active: 'failed', sub: 'failed', result: 'exit-code' }), 0, false, true],
    ['restarted by systemd since the apply', s({ restarts: 2 }), 1, false, false],
    [
      'activating (auto-restart)',
      s({ active: 'activating', sub: 'auto-restart' }),
      0,
      false,
      false,
    ],
    ['a oneshot that ran', s({ active: 'inactive', sub: 'dead', type: 'oneshot' }), 0, true, false],
    ['a service that stopped', s({ active: 'inactive', sub: 'dead' }), 0, false, false],
  ])('%s', (_what, state, baseline, ok, fatal) => {
    const v = judgeUnit('a.service', state, baseline);
    expect([v.ok, v.fatal]).toEqual([ok, fatal]);
  });
});
