// Red-team round 3, "stalls across namespaces": one tenant's OSCs whose external renderer takes
// its whole timeout must not keep another namespace's OSC from rendering. A real controller
// process watches both namespaces against the real API server; the renderer for the slow type
// accepts each request and never answers. More slow OSCs than the controller has workers are
// created first, then the other namespace's OSC, which must become Ready while every slow one is
// still pending (not by waiting out the renderer's timeout: it is 300 s, longer than the wait).
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OperatingSystemConfigSpec } from '../../api/schema.js';
import { Api, spawnController, type ControllerProcess } from './controller-support.js';
import { createTestNamespace, skipWithoutCluster, testEnvInfo } from './support/cluster.js';

skipWithoutCluster();

/** More than the controller's 16 workers. */
const SLOW_OSCS = 24;

let hanging: Server;
let url: string;
const held: ServerResponse[] = [];
let requests = 0;
let dir: string;
beforeAll(async () => {
  hanging = createServer((req: IncomingMessage, res: ServerResponse) => {
    requests++;
    req.resume();
    held.push(res); // never answered while the test runs
  });
  await new Promise<void>((done) => hanging.listen(0, '127.0.0.1', done));
  url = `http://127.0.0.1:${String((hanging.address() as AddressInfo).port)}/render`;
  dir = await mkdtemp(join(tmpdir(), 'oscar-tenant-stall-'));
});
afterAll(async () => {
  for (const res of held) res.destroy();
  hanging.closeAllConnections();
  await new Promise<void>((done) => {
    hanging.close(() => {
      done();
    });
  });
  await rm(dir, { recursive: true, force: true });
});

const slowSpec: OperatingSystemConfigSpec = {
  type: 'slowos',
  purpose: 'provision',
  files: [{ path: '/etc/motd', content: { inline: { data: 'slow\n' } } }],
};
const otherSpec: OperatingSystemConfigSpec = {
  type: 'ubuntu',
  purpose: 'reconcile',
  files: [{ path: '/etc/motd', content: { inline: { data: 'another tenant\n' } } }],
};

describe("one namespace's slow renders never stall another namespace (red-team round 3)", () => {
  let controller: ControllerProcess | undefined;
  afterAll(async () => {
    if (controller && controller.child.exitCode === null) {
      controller.child.kill('SIGTERM');
      await controller.exited;
    }
  });

  it(`${String(SLOW_OSCS)} OSCs hanging in their renderer; the other namespace's OSC becomes Ready meanwhile`, async () => {
    const slowNs = await createTestNamespace('stall-slow');
    const otherNs = await createTestNamespace('stall-other');
    const config = join(dir, 'renderers.yaml');
    await writeFile(config, `slowos:\n  url: ${url}\n  formats: [script]\n  timeoutSeconds: 300\n`);
    const api = new Api();
    for (let i = 0; i < SLOW_OSCS; i++) await api.applyOsc(slowNs, `slow-${String(i)}`, slowSpec);
    controller = spawnController([
      '--kubeconfig',
      testEnvInfo().kubeconfigPath,
      '-n',
      `${slowNs},${otherNs}`,
      '--metrics-addr',
      '0',
      '--renderers-config',
      config,
    ]);
    // Every worker the slow namespace may hold is in its renderer before the other OSC exists.
    const deadline = Date.now() + 60_000;
    while (requests < 8 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(requests, controller.output()).toBeGreaterThanOrEqual(8);

    await api.applyOsc(otherNs, 'web', otherSpec);
    const ready = await api.waitReady(otherNs, 'web', 60_000).catch((error: unknown) => {
      throw new Error(
        `${(error as Error).message}\ncontroller output:\n${controller?.output() ?? ''}`,
      );
    });
    expect(ready.status?.format).toBe('cloud-config');
    // The slow ones are still in their renderer: nothing of theirs rendered or failed yet.
    expect(held.filter((res) => !res.writableEnded).length).toBeGreaterThanOrEqual(8);
    const slow = await api.getOsc(slowNs, 'slow-0');
    expect(slow?.status?.secretRef).toBeUndefined();
  });
});
