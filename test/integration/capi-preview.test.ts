// `oscar capi preview` against the real API server: two reconcile OSCs rendered by the real
// controller, read back from their Secrets as the Runtime Extension reads them, and decided by the
// extension's own function.
import { afterAll, describe, expect, it } from 'vitest';
import { secretNameFor } from '../../api/secret.js';
import { EXIT_IN_PLACE, EXIT_REPLACE, runCapiPreview } from '../../cli/commands/capi.js';
import { Api, demoSpec, startController, waitFor } from './controller-support.js';
import { createTestNamespace, skipWithoutCluster, testEnvInfo } from './support/cluster.js';

skipWithoutCluster();

const stops: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const stop of stops) await stop();
});

describe('oscar capi preview (real API server, real controller)', () => {
  it('says in place for a change on the same OS, replace for another OS, missing for an unrendered OSC', async () => {
    const ns = await createTestNamespace('preview');
    const api = new Api();
    await api.applyOsc(ns, 'v1', demoSpec('reconcile', 'one\n'));
    await api.applyOsc(ns, 'v2', demoSpec('reconcile', 'two\n'));
    await api.applyOsc(ns, 'fc', { ...demoSpec('reconcile'), type: 'flatcar' });
    const controller = await startController([ns]);
    stops.push(controller.stop);
    for (const osc of ['v1', 'v2', 'fc']) {
      await waitFor(`${osc} rendered`, () => api.getSecret(ns, secretNameFor(osc, 'reconcile')));
    }
    const flags = {
      namespace: ns,
      kubeconfig: testEnvInfo().kubeconfigPath,
      detailedExitcode: true,
      output: 'json',
    };
    const run = async (from: string, to: string) => {
      let out = '';
      const code = await runCapiPreview(from, to, flags, { stdout: (t) => (out += t) });
      return { code, result: JSON.parse(out) as { decision: string; reason: string } };
    };
    expect(await run('v1', 'v2')).toMatchObject({
      code: EXIT_IN_PLACE,
      result: { decision: 'in-place' },
    });
    const os = await run('v1', 'fc');
    expect(os).toMatchObject({ code: EXIT_REPLACE, result: { decision: 'replace' } });
    expect(os.result.reason).toContain('spec.type changed from "ubuntu" to "flatcar"');
    const missing = await run('v1', 'nope');
    expect(missing).toMatchObject({ code: EXIT_REPLACE, result: { decision: 'replace' } });
    expect(missing.result.reason).toContain(
      `has no reconcile Secret ${secretNameFor('nope', 'reconcile')}`,
    );
  });
});
