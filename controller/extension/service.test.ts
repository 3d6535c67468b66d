import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import type { ResolvedConfig } from '../../api/resolved.js';
import { ApiError, type KubeHttp, type RequestSpec } from '../../kube/client.js';
import { grantPatch, InPlaceExtension, NOT_IN_PLACE_TARGET } from './service.js';
import type { ReconcileStates } from './reconcile-state.js';

const SUM = 'a'.repeat(64);
const NODE = '/apis/oscar.dev/v1alpha1/operatingsystemconfignodes/m-1';

/** A scripted API: GETs answered from a map, writes recorded. */
function api(objects: Record<string, unknown>) {
  const writes: { method: string; path: string; spec?: RequestSpec }[] = [];
  const http: KubeHttp = {
    request: <T>(method: string, path: string, spec?: RequestSpec): Promise<T> => {
      if (method !== 'GET') {
        writes.push({ method, path, ...(spec ? { spec } : {}) });
        return Promise.resolve({} as T);
      }
      const key = spec?.query?.labelSelector ? `${path}?${String(spec.query.labelSelector)}` : path;
      if (!(key in objects)) return Promise.reject(new ApiError(404, 'NotFound', key));
      return Promise.resolve(objects[key] as T);
    },
    stream: () => Promise.reject(new Error('no watch')),
  };
  return { http, writes };
}

const states: ReconcileStates = {
  get: (_ns, osc) =>
    Promise.resolve({
      osc,
      secretName: `oscar-${osc}-reconcile`,
      checksum: SUM,
      config: { type: 'debian' } as ResolvedConfig,
    }),
};

const request = {
  desired: {
    machine: { metadata: { name: 'm-1', namespace: 'pools' } },
    bootstrapConfig: {
      apiVersion: 'bootstrap.oscar.dev/v1alpha1',
      kind: 'OscarConfig',
      metadata: { name: 'm-1', namespace: 'pools' },
      spec: { reconcileRef: { name: 'v2' } },
    },
  },
};

const STORED = {
  '/apis/cluster.x-k8s.io/v1beta2/namespaces/pools/machines/m-1': {
    metadata: {
      name: 'm-1',
      annotations: { 'in-place-updates.internal.cluster.x-k8s.io/update-in-progress': '' },
    },
    spec: {
      bootstrap: {
        configRef: { apiGroup: 'bootstrap.oscar.dev', kind: 'OscarConfig', name: 'm-1' },
      },
    },
  },
  '/apis/bootstrap.oscar.dev/v1alpha1/namespaces/pools/oscarconfigs/m-1': {
    spec: { reconcileRef: { name: 'v2' } },
  },
  // no pods: a node whose start is unknown (no grant here) is drained first, and is empty
  '/api/v1/pods': { items: [] },
};

const node = {
  metadata: { name: 'm-1', generation: 3 },
  status: { source: 'Grant', oscRef: { namespace: 'pools', name: 'v1' } },
};
const REVISIONS = '/api/v1/namespaces/pools/secrets?oscar.dev/osc=v2,oscar.dev/purpose=revision';

describe('InPlaceExtension: UpdateMachine against the API', () => {
  it("grants the kept revision of the target's checksum, as one merge patch of the node's spec", async () => {
    const { http, writes } = api({
      ...STORED,
      [NODE]: node,
      '/apis/oscar.dev/v1alpha1/namespaces/pools/operatingsystemconfigs/v2': {
        spec: { rollout: { soakSeconds: 2, progressDeadlineSeconds: 40 } },
      },
      [REVISIONS]: {
        items: [
          {
            metadata: {
              name: 'oscar-v2-rev-3',
              labels: { 'oscar.dev/revision': '7' },
              annotations: { 'oscar.dev/checksum': SUM },
            },
          },
        ],
      },
    });
    const ext = new InPlaceExtension(http, pino({ level: 'silent' }), states);
    const res = await ext.handle('UpdateMachine', request);
    expect(res).toMatchObject({ status: 'Success', retryAfterSeconds: 5 });
    expect(writes).toHaveLength(1);
    expect(writes[0]?.path).toBe(NODE);
    expect(writes[0]?.spec?.contentType).toBe('application/merge-patch+json');
    expect(writes[0]?.spec?.body).toMatchObject({
      spec: {
        revision: {
          namespace: 'pools',
          osc: 'v2',
          number: 7,
          secretName: 'oscar-v2-rev-3',
          checksum: SUM,
          canary: null,
          try: { soakSeconds: 2, deadlineSeconds: 40, healthChecks: null },
        },
      },
    });
    expect(ext.counts).toMatchObject({ grants: 1, calls: { UpdateMachine: 1 } });
  });

  it('no kept revision (an empty list comes back as items: null): the reconcile Secret under the next number', async () => {
    const { http, writes } = api({ ...STORED, [NODE]: node, [REVISIONS]: { items: null } });
    const ext = new InPlaceExtension(http, pino({ level: 'silent' }), states);
    await ext.handle('UpdateMachine', request);
    expect(writes[0]?.spec?.body).toMatchObject({
      spec: { revision: { number: 1, secretName: 'oscar-v2-reconcile' } },
    });
  });

  it('a request naming another reconcile OSC than the stored config, for a Machine Cluster API is not updating: refused, nothing written', async () => {
    const forged = structuredClone(request);
    forged.desired.bootstrapConfig.spec.reconcileRef.name = 'evil';
    const { http, writes } = api({
      ...STORED,
      '/apis/cluster.x-k8s.io/v1beta2/namespaces/pools/machines/m-1': {
        metadata: { name: 'm-1' },
        spec: STORED['/apis/cluster.x-k8s.io/v1beta2/namespaces/pools/machines/m-1'].spec,
      },
      [NODE]: node,
    });
    const ext = new InPlaceExtension(http, pino({ level: 'silent' }), states);
    const res = await ext.handle('UpdateMachine', forged);
    expect(res).toMatchObject({ status: 'Failure' });
    // the reply does not say which check failed (no oracle of what exists in the namespace)
    expect(res.message).toBe(NOT_IN_PLACE_TARGET);
    expect(writes).toEqual([]);
  });

  it("the stored config's reconcileRef decides, not the body's", async () => {
    const forged = structuredClone(request);
    forged.desired.bootstrapConfig.spec.reconcileRef.name = 'evil';
    const asked: string[] = [];
    const { http } = api({ ...STORED, [NODE]: node, [REVISIONS]: { items: null } });
    const ext = new InPlaceExtension(http, pino({ level: 'silent' }), {
      get: (ns, osc) => {
        asked.push(osc);
        return states.get(ns, osc);
      },
    });
    await ext.handle('UpdateMachine', forged);
    expect(asked).toEqual(['v2']);
  });

  it('a grant patch removes what the new grant lacks (merge patch semantics)', () => {
    expect(
      grantPatch({
        namespace: 'pools',
        osc: 'v2',
        number: 1,
        secretName: 'oscar-v2-reconcile',
        checksum: SUM,
        grantedTime: 't',
      }),
    ).toEqual({
      spec: {
        revision: {
          namespace: 'pools',
          osc: 'v2',
          number: 1,
          secretName: 'oscar-v2-reconcile',
          checksum: SUM,
          grantedTime: 't',
          canary: null,
          try: null,
        },
      },
    });
  });
});
