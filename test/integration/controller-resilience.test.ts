// The controller survives its watches breaking: the server ending watches every few seconds,
// and a full API server restart (SIGTERM and SIGKILL). It reconnects and converges changes
// without being restarted itself.
import { afterEach, describe, expect, it } from 'vitest';
import { Api, demoSpec, startController, waitFor } from './controller-support.js';
import { createTestNamespace, skipWithoutCluster, testEnv } from './support/cluster.js';

skipWithoutCluster();

const stops: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const stop of stops.splice(0)) await stop();
});

async function changeAndConverge(api: Api, ns: string, content: string): Promise<void> {
  const before = await api.getOsc(ns, 'w');
  await api.applyOsc(ns, 'w', demoSpec('reconcile', content));
  await waitFor(
    `the change to "${content.trim()}" converged`,
    async () => {
      const o = await api.getOsc(ns, 'w');
      return (
        o?.status?.observedGeneration === o?.metadata.generation &&
        o?.status?.checksum !== before?.status?.checksum &&
        o?.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True'
      );
    },
    90_000,
  );
}

describe('controller resilience (real API server)', () => {
  it('follows changes across server-side watch timeouts', async () => {
    const ns = await createTestNamespace('res');
    const api = new Api();
    const c = await startController([ns], { watchTimeoutSeconds: 2 });
    stops.push(c.stop);
    await api.applyOsc(ns, 'w', demoSpec('reconcile', 'a\n'));
    await api.waitReady(ns, 'w');
    await new Promise((r) => setTimeout(r, 5000)); // every watch has ended and restarted twice
    await changeAndConverge(api, ns, 'b\n');
  });

  for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
    it(`reconnects after the API server restarts (${signal}) and converges`, async () => {
      const ns = await createTestNamespace('res');
      const api = new Api();
      const c = await startController([ns]);
      stops.push(c.stop);
      await api.applyOsc(ns, 'w', demoSpec('reconcile', 'a\n'));
      await api.waitReady(ns, 'w');

      const env = await testEnv();
      await env.stopApiServer({ signal });
      // Right after a SIGKILL the port can still be taken for a moment: retry the start.
      for (let attempt = 1; ; attempt++) {
        try {
          await env.startApiServer();
          break;
        } catch (error) {
          if (attempt >= 3) throw error;
          await new Promise((r) => setTimeout(r, 1000));
        }
      }
      await changeAndConverge(api, ns, 'after-restart\n');
      const errors = await c.handle.metrics.watchErrors.get();
      expect(errors.values.reduce((n, v) => n + v.value, 0)).toBeGreaterThan(0);
      expect(c.logs.join('')).toContain('list/watch failed; retrying');
      // And it still follows changes afterwards (the new watches are live).
      await changeAndConverge(api, ns, 'later\n');
    });
  }
});
