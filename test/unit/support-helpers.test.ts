// The shared test helpers' pure parts: an object's REST path, the node gate's skip reason.
import { describe, expect, it, vi } from 'vitest';
import { pathOf } from '../support/cluster.js';
import { nodeSuiteGate } from '../support/tools.js';

describe('pathOf', () => {
  it('maps core, grouped, namespaced and cluster-scoped objects to their REST path', () => {
    expect(pathOf({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'a' } })).toBe(
      '/api/v1/namespaces/a',
    );
    expect(
      pathOf({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 's', namespace: 'n' } }),
    ).toBe('/api/v1/namespaces/n/secrets/s');
    expect(
      pathOf({
        apiVersion: 'bootstrap.oscar.dev/v1alpha1',
        kind: 'OscarConfig',
        metadata: { name: 'm', namespace: 'n' },
      }),
    ).toBe('/apis/bootstrap.oscar.dev/v1alpha1/namespaces/n/oscarconfigs/m');
  });
});

describe('nodeSuiteGate', () => {
  it('outside CI names every missing tool in its skip reason', () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
    const ci = process.env.CI;
    delete process.env.CI;
    try {
      expect(nodeSuiteGate(['sh', 'oscar-no-such-a', 'oscar-no-such-b']).skip).toBe(
        'sh, oscar-no-such-a or oscar-no-such-b missing (run hack/deps.sh)',
      );
    } finally {
      if (ci !== undefined) process.env.CI = ci;
      warn.mockRestore();
    }
  });
});
