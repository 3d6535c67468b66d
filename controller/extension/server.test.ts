import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:https';
import { connect as tlsConnect } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { loopbackServingCert } from '../../test/support/serving-cert.js';
import { requireTool } from '../../test/support/tools.js';
import { ApiError, type KubeHttp } from '../../kube/client.js';
import { InPlaceExtension, NOT_IN_PLACE_TARGET } from './service.js';
import { startExtensionServer, type RunningExtensionServer } from './server.js';
import { Slots } from '../../api/slots.js';
import { waitFor } from '../../test/support/wait.js';
import { createExtensionMetrics, startMetricsServer } from './metrics.js';

let dir = '';
let ca: Buffer | undefined;
let running: RunningExtensionServer | undefined;
let skip: string | undefined;
let serving: { cert: Buffer; key: Buffer } | undefined;
const seen: string[] = [];
const metrics = createExtensionMetrics({ defaultMetrics: false, version: '0.0.0' });

/** An API that has nothing: every object is not found (a 404 as the real client throws it). */
const emptyApi: KubeHttp = {
  request: (method: string, path: string) => {
    seen.push(`${method} ${path}`);
    return Promise.reject(new ApiError(404, 'NotFound', 'not found'));
  },
  stream: () => Promise.reject(new Error('the extension never watches')),
};

beforeAll(async () => {
  if (!requireTool('openssl', 'apt-get install openssl (hack/deps.sh)')) {
    skip = 'openssl is missing';
    return;
  }
  dir = await mkdtemp(join(tmpdir(), 'oscar-ext-'));
  const pair = await loopbackServingCert(dir);
  ca = pair.ca;
  const log = pino({ level: 'silent' });
  serving = { cert: pair.cert, key: pair.key };
  running = await startExtensionServer({
    ...serving,
    host: '127.0.0.1',
    port: 0,
    extension: new InPlaceExtension(emptyApi, log),
    log,
    metrics,
  });
});

afterAll(async () => {
  await running?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

function post(
  path: string,
  body: string,
  opts: { method?: string; ca?: Buffer; port?: number } = {},
): Promise<{ code: number; json: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: opts.port ?? running?.port,
        path,
        method: opts.method ?? 'POST',
        ca: opts.ca ?? ca,
        headers: { 'content-type': 'application/json' },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          resolve({
            code: res.statusCode ?? 0,
            json: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>,
          });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const P = '/hooks.runtime.cluster.x-k8s.io/v1alpha1';

/** GET /healthz of the extension on `port`: its status and text. */
function fetchHealth(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/healthz', ca }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => {
        resolve(`${String(res.statusCode)} ${text}`);
      });
    });
    req.on('error', reject);
    req.end();
  });
}

describe('the extension over HTTPS', () => {
  it('discovery lists the three hooks with their handler names, a timeout and failurePolicy Fail', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const res = await post(`${P}/discovery`, '{}');
    expect(res.code).toBe(200);
    expect(res.json).toEqual({
      apiVersion: 'hooks.runtime.cluster.x-k8s.io/v1alpha1',
      kind: 'DiscoveryResponse',
      status: 'Success',
      handlers: ['CanUpdateMachineSet', 'CanUpdateMachine', 'UpdateMachine'].map((hook) => ({
        name: expect.any(String) as unknown,
        requestHook: { apiVersion: 'hooks.runtime.cluster.x-k8s.io/v1alpha1', hook },
        timeoutSeconds: 10,
        failurePolicy: 'Fail',
      })),
    });
  });

  it('routes <hook lowercase>/<handler name> to the handler', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const res = await post(`${P}/canupdatemachineset/can-update-machineset`, '{}');
    expect(res.code).toBe(200);
    expect(res.json).toMatchObject({ kind: 'CanUpdateMachineSetResponse', status: 'Success' });
    const upd = await post(
      `${P}/updatemachine/update-machine`,
      JSON.stringify({
        desired: {
          machine: { metadata: { name: 'm-1', namespace: 'pools' } },
          bootstrapConfig: {
            apiVersion: 'bootstrap.oscar.dev/v1alpha1',
            kind: 'OscarConfig',
            metadata: { name: 'm-1', namespace: 'pools' },
            spec: { reconcileRef: { name: 'v2' } },
          },
        },
      }),
    );
    // no such Machine in this empty API: refused, and only reads were made
    expect(upd.json).toMatchObject({
      kind: 'UpdateMachineResponse',
      status: 'Failure',
      message: NOT_IN_PLACE_TARGET,
    });
    expect(seen.every((s) => s.startsWith('GET '))).toBe(true);
  });

  it('refuses what is not a hook call: an unknown path (404), a GET (405), a body that is not JSON (400)', async (ctx) => {
    if (skip) return ctx.skip(skip);
    expect((await post(`${P}/updatemachine/other`, '{}')).code).toBe(404);
    expect((await post(`${P}/discovery`, '', { method: 'GET' })).code).toBe(405);
    const bad = await post(`${P}/updatemachine/update-machine`, '{not json');
    expect(bad.code).toBe(400);
    expect(bad.json).toMatchObject({ status: 'Failure' });
  });

  it('a client without the CA refuses the serving certificate', async (ctx) => {
    if (skip) return ctx.skip(skip);
    await expect(post(`${P}/discovery`, '{}', { ca: Buffer.from('') })).rejects.toThrow();
  });
});

describe('the extension’s metrics', () => {
  it('count every answer by hook and status (an error is a non-200), and are served over plain HTTP', async (ctx) => {
    if (skip) return ctx.skip(skip);
    metrics.requests.reset();
    metrics.requestDuration.reset();
    await post(`${P}/discovery`, '{}');
    await post(`${P}/canupdatemachineset/can-update-machineset`, '{}');
    // a Machine this empty API does not have: Failure
    await post(
      `${P}/updatemachine/update-machine`,
      JSON.stringify({
        desired: {
          machine: { metadata: { name: 'm-1', namespace: 'pools' } },
          bootstrapConfig: {
            apiVersion: 'bootstrap.oscar.dev/v1alpha1',
            kind: 'OscarConfig',
            metadata: { name: 'm-1', namespace: 'pools' },
            spec: { reconcileRef: { name: 'v2' } },
          },
        },
      }),
    );
    await post(`${P}/updatemachine/update-machine`, '{not json');
    await post(`${P}/nothing`, '{}');
    const values = (await metrics.requests.get()).values.map(
      (v) => `${String(v.labels.hook)} ${String(v.labels.status)} ${String(v.value)}`,
    );
    expect(values.sort()).toEqual([
      'CanUpdateMachineSet Success 1',
      'Discovery Success 1',
      'UpdateMachine Failure 1',
      'UpdateMachine error 1',
      'other error 1',
    ]);
    const served = await startMetricsServer(metrics.registry, '127.0.0.1', 0);
    try {
      const res = await fetch(`http://${served.address}/metrics`);
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(text).toContain('oscar_extension_requests_total{hook="Discovery",status="Success"} 1');
      expect(text).toContain(
        'oscar_extension_request_duration_seconds_count{hook="UpdateMachine"} 2',
      );
      expect(text).toContain('oscar_extension_build_info{version="0.0.0"');
      expect((await fetch(`http://${served.address}/healthz`)).status).toBe(200);
      expect((await fetch(`http://${served.address}/hooks`)).status).toBe(404);
    } finally {
      await served.close();
    }
  });
});

describe('the extension and many hook requests at once, each under the limit', () => {
  it('reads and handles at most its slots at once; the next waits unread, /healthz never waits', async (ctx) => {
    if (skip || !serving) return ctx.skip(skip ?? 'no serving certificate');
    const log = pino({ level: 'silent' });
    const slots = new Slots(1);
    const server = await startExtensionServer({
      ...serving,
      host: '127.0.0.1',
      port: 0,
      extension: new InPlaceExtension(emptyApi, log),
      log,
      slots,
    });
    // a hook request whose body never ends holds the one slot (8 MiB allowed per body)
    const held = tlsConnect({ host: '127.0.0.1', port: server.port, ca });
    held.on('error', () => undefined);
    held.write(
      `POST ${P}/discovery HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 8000000\r\n\r\n{"a":`,
    );
    try {
      await waitFor('the unfinished body to hold the slot', () => slots.inUse === 1, 30_000);
      const waiting = post(`${P}/discovery`, '{}', { port: server.port });
      await waitFor('the next hook call to wait for the slot', () => slots.queued === 1, 30_000);
      const health = await fetchHealth(server.port);
      expect(health).toBe('200 ok');
      held.destroy(); // its client leaves: the slot is the next call's
      expect((await waiting).code).toBe(200);
    } finally {
      held.destroy();
      await server.close();
    }
  });
});
