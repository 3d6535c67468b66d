// Bounded shutdown, whatever the API server is doing: the controller (leader-elected, so it holds
// a Lease it wants to hand back), the agent (following its Secret, polling every second so a
// request is always in flight) and the renderer server, each as its own process as they ship,
// get SIGTERM after the test API server was killed — or frozen with SIGSTOP, so every request
// hangs instead of failing — and each must end, cleanly, within its --shutdown-timeout.
// (The agent ignored SIGTERM for as long as its API server was unreachable: its report retry
// loop kept the process alive.)
//
// "Within its --shutdown-timeout" is read from each process's own log — the time from its
// `stopping` record to its `stopped` one, and no watchdog record — not from this test's wall
// clock, which on a loaded machine also counts signal delivery, process teardown and this
// process's own turn to run (6 s was exceeded that way). Each output is read once the process
// has exited and its pipes are drained, so its last record is there.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { secretNameFor } from '../../api/secret.js';
import type { OperatingSystemConfigNode } from '../../api/schema.js';
import {
  Api,
  agentIdentity,
  demoSpec,
  grantAgent,
  spawnOscar,
  waitFor,
  type ControllerProcess,
} from './controller-support.js';
import {
  createTestNamespace,
  kubeconfigPathFor,
  skipWithoutCluster,
  testEnv,
  testEnvInfo,
  uniqueName,
} from './support/cluster.js';
import { startOscarRendererServe } from './support/webhook.js';

skipWithoutCluster();

const SHUTDOWN_TIMEOUT_MS = 4_000;

const cleanups: (() => Promise<void>)[] = [];
const outputs: (() => string)[] = [];
afterEach(async (ctx) => {
  for (const c of cleanups.splice(0).reverse()) await c();
  if (ctx.task.result?.state === 'fail') process.stderr.write(outputs.map((o) => o()).join('\n'));
  outputs.length = 0;
});

/** SIGTERM, then the exit code once the process ended and its output is read to the end. */
async function terminate(p: ControllerProcess): Promise<{ ms: number; code: number | null }> {
  const t0 = Date.now();
  p.child.kill('SIGTERM');
  const code = await p.closed;
  return { ms: Date.now() - t0, code };
}

/** JSON log records of a process's output. */
function records(output: string): Record<string, unknown>[] {
  return output
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('shutdown while the API server is unavailable', () => {
  for (const how of ['killed', 'frozen'] as const) {
    it(`controller, agent and renderer server end within --shutdown-timeout on SIGTERM (API server ${how})`, async () => {
      const api = new Api();
      const ns = await createTestNamespace('stop');
      const node = uniqueName('node');
      const secret = secretNameFor('web', 'reconcile');
      cleanups.push(await grantAgent(api, ns, node, 'web'));
      await api.applyOsc(ns, 'web', demoSpec('reconcile', 'v1\n'));
      const common = [
        '--shutdown-timeout',
        `${String(SHUTDOWN_TIMEOUT_MS)}ms`,
        '--log-format',
        'json',
      ];

      const controller = spawnOscar('controller', [
        '--kubeconfig',
        testEnvInfo().kubeconfigPath,
        '-n',
        ns,
        '--metrics-addr',
        '127.0.0.1:0',
        '--leader-elect',
        '--lease-namespace',
        ns,
        ...common,
      ]);
      outputs.push(() => `controller:\n${controller.output()}`);
      cleanups.push(async () => {
        if (controller.child.exitCode === null) controller.child.kill('SIGKILL');
        await controller.exited;
      });
      const checksum = (await api.waitReady(ns, 'web')).status?.checksum ?? '';

      const root = await mkdtemp(join(tmpdir(), 'oscar-stop-'));
      cleanups.push(() => rm(root, { recursive: true, force: true }));
      const agent = spawnOscar('agent', [
        '--kubeconfig',
        await kubeconfigPathFor(agentIdentity(ns, node)),
        '--namespace',
        ns,
        '--secret',
        secret,
        '--node',
        node,
        '--root',
        root,
        '--poll-interval',
        '1',
        ...common,
      ]);
      outputs.push(() => `agent:\n${agent.output()}`);
      cleanups.push(async () => {
        if (agent.child.exitCode === null) agent.child.kill('SIGKILL');
        await agent.exited;
      });
      await waitFor(`oscnode ${node} applied`, async () => {
        const o = await api.http.request<OperatingSystemConfigNode>(
          'GET',
          `/apis/oscar.dev/v1alpha1/operatingsystemconfignodes/${node}`,
        );
        return o.status?.appliedChecksum === checksum;
      });

      const renderer = await startOscarRendererServe(['generic'], common);
      cleanups.push(() => renderer.stop());
      // 'close': exited, and stderr read to the end
      const rendererExited = new Promise<number | null>((resolve) =>
        renderer.child.once('close', (code) => {
          resolve(code);
        }),
      );

      const env = await testEnv();
      if (how === 'killed') {
        await env.stopApiServer({ signal: 'SIGKILL' });
        cleanups.push(async () => {
          // right after a SIGKILL the port can still be taken for a moment: retry the start
          for (let attempt = 1; ; attempt++) {
            try {
              await env.startApiServer();
              return;
            } catch (error) {
              if (attempt >= 3) throw error;
              await new Promise((r) => setTimeout(r, 1000));
            }
          }
        });
      } else {
        await env.pauseApiServer(true);
        cleanups.push(async () => {
          await env.pauseApiServer(false);
          await waitFor('the API server answers again', async () => {
            await api.getOsc(ns, 'web');
            return true;
          });
        });
      }
      if (how === 'killed') {
        // both are in their retry loops (what kept the agent alive): each has seen a request fail
        await waitFor('the agent and the controller to see the API server gone', () => {
          const agentMsgs = records(agent.output()).map((x) => x.msg);
          const controllerMsgs = records(controller.output()).map((x) => x.msg);
          return (
            agentMsgs.includes('watch failed; reconnecting') &&
            controllerMsgs.includes('lease request failed')
          );
        });
      } else {
        // a frozen API server answers nothing, so nothing tells when a request is in flight: the
        // agent polls every second and the controller renews its Lease every 3 s (a fifth of the
        // 15 s lease), so after 3.5 s both have one hanging (a floor: a slow machine only waits
        // longer, it cannot make this shorter)
        await new Promise((r) => setTimeout(r, 3_500));
      }

      const [c, a] = await Promise.all([terminate(controller), terminate(agent)]);
      const t0 = Date.now();
      renderer.child.kill('SIGTERM');
      const r = { code: await rendererExited, ms: Date.now() - t0 };
      console.log(
        `shutdown, API server ${how}: controller ${String(c.ms)} ms, agent ${String(a.ms)} ms, renderer ${String(r.ms)} ms (--shutdown-timeout ${String(SHUTDOWN_TIMEOUT_MS)} ms)`,
      );
      for (const [name, result] of [
        ['controller', c],
        ['agent', a],
        ['renderer', r],
      ] as const) {
        expect(result.code, `${name} exit code`).toBe(0);
      }
      // each said what it did, within its own budget; none needed the watchdog
      for (const [name, output] of [
        ['controller', controller.output()],
        ['agent', agent.output()],
        ['renderer', renderer.stderr()],
      ] as const) {
        const all = records(output);
        const msgs = all.map((x) => x.msg);
        expect(msgs, name).toContain('stopping');
        expect(msgs, name).toContain('stopped');
        expect(msgs, name).not.toContain('did not stop within the shutdown timeout; exiting');
        const at = (msg: string): number =>
          Date.parse(String(all.find((x) => x.msg === msg)?.time));
        const stopMs = at('stopped') - at('stopping');
        expect(stopMs, `${name}: stopping → stopped took ${String(stopMs)} ms`).toBeLessThan(
          SHUTDOWN_TIMEOUT_MS,
        );
      }
    });
  }
});
