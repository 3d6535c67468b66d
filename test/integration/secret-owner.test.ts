// A Secret of the OSC output's name that is not oscar's (issue 28): on the real API server the
// controller leaves it byte-identical and says SecretNameTaken (condition and Event); once it is
// deleted, the controller's retry writes oscar's own Secret (the positive control).
import { afterEach, describe, expect, it } from 'vitest';
import { LABEL_OSC, secretNameFor } from '../../api/secret.js';
import { Api, demoSpec, secretData, startController, waitFor } from './controller-support.js';
import { createTestNamespace, skipWithoutCluster } from './support/cluster.js';

skipWithoutCluster();

const stops: (() => Promise<void>)[] = [];
const logs: string[][] = [];
afterEach(async (ctx) => {
  for (const stop of stops.splice(0)) await stop();
  if (ctx.task.result?.state === 'fail') process.stderr.write(logs.flat().join(''));
  logs.length = 0;
});

describe('the OSC controller and a Secret of its output name it did not make (real API server)', () => {
  it('leaves it untouched with Ready=False SecretNameTaken, and writes its own once it is gone', async () => {
    const ns = await createTestNamespace('owner');
    const api = new Api();
    const name = secretNameFor('worker', 'reconcile');
    const foreign = await api.putSecret(ns, name, { password: 'an app credential' });

    const c = await startController([ns]);
    stops.push(c.stop);
    logs.push(c.logs);
    await api.applyOsc(ns, 'worker', demoSpec('reconcile', 'v1\n'));

    const osc = await api.waitCondition(ns, 'worker', 'Ready', 'False', 90_000);
    const ready = osc.status?.conditions?.find((x) => x.type === 'Ready');
    expect(ready?.reason).toBe('SecretNameTaken');
    expect(ready?.message).toContain(name);
    expect(ready?.message).toContain('Rename the OperatingSystemConfig, or delete or rename');
    const event = await waitFor('the SecretNameTaken Event', async () =>
      (await api.listEvents(ns)).find(
        (e) => e.reason === 'SecretNameTaken' && e.involvedObject.name === 'worker',
      ),
    );
    expect(event.type).toBe('Warning');

    const after = await api.getSecret(ns, name);
    expect(after?.metadata.resourceVersion).toBe(foreign.metadata.resourceVersion);
    expect(after?.data).toEqual(foreign.data);
    expect(after?.metadata.labels).toEqual(foreign.metadata.labels);
    expect(after?.metadata.ownerReferences).toBeUndefined();

    // Positive control: the foreign Secret deleted, the controller's retry writes oscar's own.
    await api.http.request('DELETE', `/api/v1/namespaces/${ns}/secrets/${name}`);
    await api.waitReady(ns, 'worker', 120_000);
    const own = await waitFor('oscar Secret', async () => {
      const s = await api.getSecret(ns, name);
      return s?.metadata.labels?.[LABEL_OSC] === 'worker' ? s : undefined;
    });
    expect(secretData(own).password).toBeUndefined();
    expect(own.metadata.ownerReferences?.[0]).toMatchObject({
      kind: 'OperatingSystemConfig',
      name: 'worker',
      uid: osc.metadata.uid,
      controller: true,
    });
  });
});
