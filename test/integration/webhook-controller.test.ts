// End to end: the example external renderer (a separate process) renders an OSC of its type
// (alpine, which oscar does not ship) through `oscar controller --renderers-config` (another
// separate process) against the real test API server; its output lands in the Secret. A refusal
// from the renderer shows in the OSC status as it is, and the last good Secret stays.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolve, NO_REFERENCES } from '../../api/resolve.js';
import type { OperatingSystemConfigSpec } from '../../api/schema.js';
import { ANNOTATION_CHECKSUM, decodeConfigData, secretNameFor } from '../../api/secret.js';
import { registryPipeline } from '../../controller/osc/pipeline.js';
import { defaultRegistry } from '../../renderers/registry.js';
import { WebhookRenderer } from '../../renderers/webhook/client.js';
import {
  Api,
  secretData,
  spawnController,
  startController,
  waitFor,
  type ControllerProcess,
} from './controller-support.js';
import { createTestNamespace, skipWithoutCluster, testEnvInfo } from './support/cluster.js';
import { startExampleRenderer, type RendererProcess } from './support/webhook.js';

skipWithoutCluster();

let example: RendererProcess;
let dir: string;
beforeAll(async () => {
  example = await startExampleRenderer();
  dir = await mkdtemp(join(tmpdir(), 'oscar-webhook-ctl-'));
});
afterAll(async () => {
  await example.stop();
  await rm(dir, { recursive: true, force: true });
});

const spec: OperatingSystemConfigSpec = {
  type: 'alpine',
  purpose: 'provision',
  packages: [{ name: 'chrony' }],
  files: [
    {
      path: '/etc/motd',
      permissions: '0644',
      content: { inline: { data: 'Alpine, rendered by a webhook\n' } },
    },
    {
      path: '/etc/chrony/chrony.conf',
      permissions: '0640',
      owner: 'root:chrony',
      content: { inline: { data: 'pool pool.ntp.org iburst\n' } },
    },
  ],
};

describe('an external renderer through the controller', () => {
  let controller: ControllerProcess | undefined;
  afterAll(async () => {
    if (controller && controller.child.exitCode === null) {
      controller.child.kill('SIGTERM');
      await controller.exited;
    }
  });

  it('renders an alpine OSC into its Secret; a refusal lands in the status and keeps the last good Secret', async () => {
    const ns = await createTestNamespace('webhook');
    const config = join(dir, 'renderers.yaml');
    await writeFile(
      config,
      `alpine:\n  url: ${example.url}\n  formats: [script]\n  timeoutSeconds: 5\n`,
    );
    controller = spawnController([
      '--kubeconfig',
      testEnvInfo().kubeconfigPath,
      '-n',
      ns,
      '--metrics-addr',
      '0',
      '--renderers-config',
      config,
    ]);
    const api = new Api();
    await api.applyOsc(ns, 'edge', spec);
    const ready = await api.waitReady(ns, 'edge', 60_000).catch((error: unknown) => {
      throw new Error(
        `${(error as Error).message}\ncontroller output:\n${controller?.output() ?? ''}\nrenderer:\n${example.stderr()}`,
      );
    });
    expect(ready.status?.format).toBe('script');

    // what the renderer answers for this OSC, asked directly, is what the Secret holds
    const resolved = resolve(spec, NO_REFERENCES);
    if (!resolved.ok) throw new Error('spec does not resolve');
    const direct = new WebhookRenderer({
      url: example.url,
      types: ['alpine'],
      formats: ['script'],
    });
    const expected = await direct.render(resolved.config, {
      name: 'edge',
      namespace: ns,
      purpose: 'provision',
      format: 'script',
    });
    direct.close();
    const secretName = secretNameFor('edge', 'provision');
    const data = secretData(await api.getSecret(ns, secretName));
    expect(data.value?.equals(expected.userData), 'Secret value is the renderer output').toBe(true);
    expect(data.format?.toString()).toBe('script');
    expect(data.value?.toString()).toContain("apk add --no-cache 'chrony'");
    expect(data.value?.toString()).toContain(`OperatingSystemConfig ${ns}/edge (provision)`);

    // the renderer refuses a systemd unit: Rendered=False with its message, Secret unchanged
    await api.applyOsc(ns, 'edge', {
      ...spec,
      units: [{ name: 'chronyd.service', content: '[Service]\nExecStart=/usr/sbin/chronyd -d\n' }],
    });
    const failed = await api.waitCondition(ns, 'edge', 'Rendered', 'False', 60_000);
    const rendered = failed.status?.conditions?.find((c) => c.type === 'Rendered');
    expect(rendered?.reason).toBe('RenderFailed');
    expect(rendered?.message).toContain(
      'refused (Unsupported): spec.units[0]: Alpine runs OpenRC, not systemd: cannot install chronyd.service',
    );
    expect(rendered?.message).toContain('keeps the last good rendering');
    const after = secretData(await api.getSecret(ns, secretName));
    expect(after.value?.equals(expected.userData)).toBe(true);

    // fixed again: rendered again
    await api.applyOsc(ns, 'edge', { ...spec, files: [...(spec.files ?? []).slice(0, 1)] });
    await api.waitReady(ns, 'edge', 60_000);
    await waitFor('the Secret without chrony.conf', async () => {
      const v = secretData(await api.getSecret(ns, secretName)).value?.toString();
      return v !== undefined && !v.includes('chrony.conf');
    });
  });
});

// A provider's renderer that adds to the config for its OS: a masked auto-update unit and a
// release file. What it adds reaches the reconcile Secret's config, which the agent applies — as
// a built-in's OS profile does; an addition oscar cannot apply is refused like a render failure.
describe("a webhook renderer's additions", () => {
  const additions = {
    extraUnits: [
      {
        name: 'acme-update.service',
        enable: false,
        mask: true,
        command: 'stop',
        onChange: 'none',
        dropIns: [],
        filePaths: [],
      },
    ],
    extraFiles: [
      {
        path: '/etc/acme-release',
        mode: 0o644,
        user: 'root',
        group: 'root',
        content: Buffer.from('ACME 1\n').toString('base64'),
      },
    ],
  };
  let server: Server | undefined;
  let stopController: (() => Promise<void>) | undefined;
  afterAll(async () => {
    await stopController?.();
    await new Promise((r) => server?.close(r));
  });

  it('reach the reconcile Secret; an addition that cannot be applied keeps the last good Secret', async () => {
    let badPath = false;
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const extraFiles = badPath
          ? [{ ...additions.extraFiles[0], path: 'etc/relative' }]
          : additions.extraFiles;
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            apiVersion: 'oscar.dev/render/v1',
            kind: 'RenderResponse',
            userData: Buffer.from('#!/bin/sh\ntrue\n').toString('base64'),
            format: 'script',
            extraUnits: additions.extraUnits,
            extraFiles,
            warnings: [],
          }),
        );
      });
    });
    await new Promise<void>((r) => server?.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    const ns = await createTestNamespace('additions');
    const registry = defaultRegistry().register(
      new WebhookRenderer({
        url: `http://127.0.0.1:${String(port)}/render`,
        types: ['acme'],
        formats: ['script'],
      }),
    );
    const controller = await startController([ns], { pipeline: registryPipeline(registry) });
    stopController = controller.stop;
    const api = new Api();
    const acme: OperatingSystemConfigSpec = {
      type: 'acme',
      purpose: 'reconcile',
      files: [{ path: '/etc/motd', content: { inline: { data: 'hello\n' } } }],
    };
    await api.applyOsc(ns, 'acme', acme);
    const ready = await api.waitReady(ns, 'acme', 60_000);
    const secretName = secretNameFor('acme', 'reconcile');
    const secret = await api.getSecret(ns, secretName);
    const { config } = decodeConfigData(
      secretData(secret),
      secret?.metadata.annotations?.[ANNOTATION_CHECKSUM],
    );
    expect(ready.status?.checksum).toBe(secret?.metadata.annotations?.[ANNOTATION_CHECKSUM]);
    expect(config.files.map((f) => `${f.path}=${f.content.toString()}`)).toEqual([
      '/etc/acme-release=ACME 1\n',
      '/etc/motd=hello\n',
    ]);
    expect(config.units.map((u) => `${u.name} mask=${String(u.mask)}`)).toEqual([
      'acme-update.service mask=true',
    ]);

    // the renderer now adds a file with a relative path: refused, named, the Secret stays
    badPath = true;
    await api.applyOsc(ns, 'acme', {
      ...acme,
      files: [{ path: '/etc/motd', content: { inline: { data: 'hello again\n' } } }],
    });
    const failed = await api.waitCondition(ns, 'acme', 'Rendered', 'False', 60_000);
    const rendered = failed.status?.conditions?.find((c) => c.type === 'Rendered');
    expect(rendered?.message).toContain(
      'the renderer for type "acme" added what oscar cannot apply: file "etc/relative": path:',
    );
    const after = await api.getSecret(ns, secretName);
    expect(after?.metadata.resourceVersion).toBe(secret?.metadata.resourceVersion);
  });
});
