// End to end: the example external renderer (a separate process) renders an OSC of its type
// (alpine, which oscar does not ship) through `oscar controller --renderers-config` (another
// separate process) against the real test API server; its output lands in the Secret. A refusal
// from the renderer shows in the OSC status as it is, and the last good Secret stays.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolve, NO_REFERENCES } from '../../api/resolve.js';
import type { OperatingSystemConfigSpec } from '../../api/schema.js';
import { secretNameFor } from '../../api/secret.js';
import { WebhookRenderer } from '../../renderers/webhook/client.js';
import {
  Api,
  secretData,
  spawnController,
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
