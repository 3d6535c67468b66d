// Red-team round 3, "derived names that overflow", against the real API server: an OscarConfig
// whose name takes all 253 characters a name may have. Its machine's CSR (oscar-<machine>-<hash>)
// and Role (oscar-node-<machine>) could not be named, so it gets Ready=False, MachineNameTooLong
// before any token; the Warning Event about it — named <config>.<16 hex> by client-go's rule,
// 270 characters — must still be accepted by the API server (its name is shortened to fit).
import { afterAll, describe, expect, it } from 'vitest';
import type { KubeObject } from '../../controller/kube/types.js';
import type { ConfigObject } from '../../controller/bootstrap/types.js';
import { kubeOps } from '../support/cluster.js';
import { Api, demoSpec, startController, waitFor } from './controller-support.js';
import { createTestNamespace, skipWithoutCluster } from './support/cluster.js';

skipWithoutCluster();

let stop: (() => Promise<void>) | undefined;
afterAll(async () => {
  await stop?.();
});

const config = (ns: string, name: string) => ({
  apiVersion: 'bootstrap.oscar.dev/v1alpha1',
  kind: 'OscarConfig',
  metadata: { name, namespace: ns },
  spec: { provisionRef: { name: 'prov' }, reconcileRef: { name: 'rec' } },
});

interface EventObject extends KubeObject {
  reason?: string;
  involvedObject?: { name?: string };
}

describe('an OscarConfig named with all 253 characters (red-team round 3)', () => {
  it('is MachineNameTooLong with no token, and its Warning Event is stored; 236 characters are bootstrapped', async () => {
    const ns = await createTestNamespace('longname');
    const api = new Api();
    await api.applyOsc(ns, 'prov', demoSpec('provision'));
    await api.applyOsc(ns, 'rec', demoSpec('reconcile'));
    const started = await startController([ns], {
      bootstrap: {
        enabled: true,
        agentUrl: 'http://127.0.0.1:9/oscar-agent',
        agentSha256: 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        clusterName: 'demo',
        tokenTtlMs: 20 * 60_000,
      },
    });
    stop = started.stop;
    const ops = kubeOps(api.http, 'test');
    const long = `m${'a'.repeat(252)}`;
    const fits = 'b'.repeat(236);
    await ops.applyObject(config(ns, long));
    await ops.applyObject(config(ns, fits));
    const path = (name: string) =>
      `/apis/bootstrap.oscar.dev/v1alpha1/namespaces/${ns}/oscarconfigs/${name}`;
    const refused = await waitFor(
      'MachineNameTooLong on the long config',
      async () => {
        const c = await ops.get<ConfigObject>(path(long));
        const ready = c?.status?.conditions?.find((x) => x.type === 'Ready');
        return ready?.reason === 'MachineNameTooLong' ? ready : undefined;
      },
      60_000,
    );
    expect(refused.message).toContain('at most 236');
    const event = await waitFor(
      'its Warning Event',
      async () => {
        const list = await api.http.request<{ items: EventObject[] }>(
          'GET',
          `/api/v1/namespaces/${ns}/events`,
        );
        return list.items.find(
          (e) => e.reason === 'MachineNameTooLong' && e.involvedObject?.name === long,
        );
      },
      60_000,
    );
    expect(event.metadata.name.length).toBeLessThanOrEqual(253);
    expect((await ops.get<ConfigObject>(path(long)))?.status?.dataSecretName).toBeUndefined();
    // Positive control: the longest name that fits gets its user data.
    const ok = await waitFor(
      'user data of the 236-character config',
      async () => {
        const c = await ops.get<ConfigObject>(path(fits));
        return c?.status?.dataSecretName;
      },
      60_000,
    ).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}\ncontroller log:\n${started.logs.join('')}`);
    });
    expect(ok).toBe(fits);
  });
});
