// Secrets never reach the logs: a full run — the controller, the agent and an external renderer,
// each its own process logging at debug — against the real API server, with a token in a
// referenced Secret and a marker in inline file content. The OSC is rendered (through the
// webhook for one type, a built-in for the other), the agent applies it and reports, an apply
// fails (its error and the unit's journal are logged), the Secret changes and is applied again.
// Then every line any of them wrote is searched for the token, the marker, and their base64 at
// each alignment: none may appear.
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { OperatingSystemConfigNode, OperatingSystemConfigSpec } from '../../api/schema.js';
import { secretNameFor } from '../../api/secret.js';
import {
  Api,
  agentIdentity,
  grantAgent,
  spawnOscar,
  waitFor,
  type ControllerProcess,
} from './controller-support.js';
import {
  createTestNamespace,
  kubeconfigPathFor,
  skipWithoutCluster,
  testEnvInfo,
  uniqueName,
} from './support/cluster.js';
import { startOscarRendererServe, type RendererProcess } from './support/webhook.js';

skipWithoutCluster();

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** `secret` as it could appear base64-encoded inside a longer base64 text, at any alignment. */
function base64Forms(secret: string): string[] {
  return [0, 1, 2].map((pad) => {
    const b64 = Buffer.concat([Buffer.alloc(pad, 0x41), Buffer.from(secret)]).toString('base64');
    // drop the characters that mix in the padding or the next bytes
    return b64.slice(pad === 0 ? 0 : 4, -4);
  });
}

/** SIGTERM, then waits until the process has exited and its output is read to the end. */
function stopProcess(p: ControllerProcess): () => Promise<void> {
  return async () => {
    if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGTERM');
    await p.closed;
  };
}

describe('logs of a full run', () => {
  it('never carry Secret data or file content, in any component, at debug level', async () => {
    const token = `tok-${randomBytes(12).toString('hex')}`;
    const marker = `inline-${randomBytes(12).toString('hex')}`;
    const api = new Api();
    const ns = await createTestNamespace('nolog');
    const node = uniqueName('node');
    const reconcile = secretNameFor('web', 'reconcile');
    cleanups.push(await grantAgent(api, ns, node, 'web'));
    await api.putSecret(ns, 'join', { token });

    // an external renderer for `generic` (the controller sends it the resolved config, token
    // included), the built-in for `ubuntu`
    const renderer: RendererProcess = await startOscarRendererServe(
      ['generic'],
      ['--log-level', 'debug', '--log-format', 'json'],
      { quiet: false },
    );
    cleanups.push(() => renderer.stop());
    const dir = await mkdtemp(join(tmpdir(), 'oscar-nolog-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const renderers = join(dir, 'renderers.yaml');
    await writeFile(renderers, `generic:\n  url: ${renderer.url}\n  formats: [script]\n`);

    const controller = spawnOscar('controller', [
      '--kubeconfig',
      testEnvInfo().kubeconfigPath,
      '-n',
      ns,
      '--metrics-addr',
      '127.0.0.1:0',
      '--renderers-config',
      renderers,
      '--log-level',
      'debug',
      '--log-format',
      'json',
    ]);
    cleanups.push(stopProcess(controller));

    const spec = (version: string): OperatingSystemConfigSpec => ({
      type: 'generic',
      purpose: 'reconcile',
      files: [
        {
          path: '/etc/app/token',
          permissions: '0600',
          content: { secretRef: { name: 'join', key: 'token' } },
        },
        {
          path: '/etc/app/app.conf',
          permissions: '0644',
          content: { inline: { data: `${marker}\nversion=${version}\n` } },
        },
      ],
      units: [
        {
          name: 'app.service',
          filePaths: ['/etc/app/token', '/etc/app/app.conf'],
          content:
            '[Service]\nExecStart=/bin/sleep infinity\n\n[Install]\nWantedBy=multi-user.target\n',
        },
      ],
    });
    await api.applyOsc(ns, 'web', spec('1'));
    await api.applyOsc(ns, 'boot', { ...spec('1'), type: 'ubuntu', purpose: 'provision' });
    const v1 = (await api.waitReady(ns, 'web')).status?.checksum ?? '';
    await api.waitReady(ns, 'boot');

    const root = await mkdtemp(join(tmpdir(), 'oscar-nolog-root-'));
    cleanups.push(() => rm(root, { recursive: true, force: true }));
    const agent = spawnOscar('agent', [
      '--kubeconfig',
      await kubeconfigPathFor(agentIdentity(ns, node)),
      '--namespace',
      ns,
      '--secret',
      reconcile,
      '--node',
      node,
      '--root',
      root,
      '--poll-interval',
      '1',
      '--log-level',
      'debug',
      '--log-format',
      'json',
    ]);
    cleanups.push(stopProcess(agent));
    const nodeStatus = async (): Promise<OperatingSystemConfigNode['status']> =>
      (
        await api.http.request<OperatingSystemConfigNode>(
          'GET',
          `/apis/oscar.dev/v1alpha1/operatingsystemconfignodes/${node}`,
        )
      ).status;
    await waitFor('v1 applied', async () => (await nodeStatus())?.appliedChecksum === v1);
    expect(await readFile(join(root, 'etc/app/token'), 'utf8')).toBe(token); // it did carry it

    // an apply that fails: a directory where the new version's file must go
    await mkdir(join(root, 'etc/app/extra.conf/in-the-way'), { recursive: true });
    const v2spec = spec('2');
    v2spec.files?.push({
      path: '/etc/app/extra.conf',
      permissions: '0644',
      content: { inline: { data: `${marker}-extra\n` } },
    });
    await api.applyOsc(ns, 'web', v2spec);
    await waitFor('v2 failed on the node', async () => {
      const st = await nodeStatus();
      return st?.conditions?.some((c) => c.type === 'Degraded' && c.status === 'True') === true;
    });
    // the obstacle goes; the Secret's token changes too; everything converges again
    await rm(join(root, 'etc/app/extra.conf'), { recursive: true });
    const token2 = `tok-${randomBytes(12).toString('hex')}`;
    await api.putSecret(ns, 'join', { token: token2 });
    await waitFor('the new token applied', async () => {
      try {
        return (await readFile(join(root, 'etc/app/token'), 'utf8')) === token2;
      } catch {
        return false;
      }
    });

    await stopProcess(agent)();
    await stopProcess(controller)();
    await renderer.stop();
    const logs = {
      controller: controller.output(),
      agent: agent.output(),
      renderer: renderer.stderr(),
    };
    // they did log, at debug, about this run
    expect(logs.controller).toContain('"level":"debug"');
    expect(logs.controller).toContain(`"osc":"${ns}/web"`);
    expect(logs.agent).toContain('"msg":"apply failed; the last good state stays"');
    expect(logs.renderer).toContain('"msg":"render"');
    for (const [component, text] of Object.entries(logs)) {
      for (const secret of [token, token2, marker]) {
        expect(text, `${component} logged ${secret}`).not.toContain(secret);
        for (const form of base64Forms(secret)) {
          expect(text, `${component} logged ${secret} as base64 (${form})`).not.toContain(form);
        }
      }
    }
  });
});
