import { describe, expect, it } from 'vitest';
import type { ResolvedConfig } from '../../api/resolved.js';
import { replacementReason } from '../../api/in-place.js';
import { canUpdateMachine, canUpdateMachineSet } from './can-update.js';
import type { ReconcileLookup, ReconcileStates } from './reconcile-state.js';

function config(type: string, cgroupDriver?: 'systemd' | 'cgroupfs'): ResolvedConfig {
  return {
    type,
    purpose: 'reconcile',
    units: [],
    files: [],
    packages: [],
    ...(cgroupDriver ? { cri: { name: 'containerd', cgroupDriver } } : {}),
  };
}

/** Reconcile renderings by OSC name, as the extension would read them from their Secrets. */
function states(byName: Record<string, ResolvedConfig>): ReconcileStates & { asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    get: (namespace: string, osc: string): Promise<ReconcileLookup> => {
      asked.push(`${namespace}/${osc}`);
      const c = byName[osc];
      return Promise.resolve(
        c
          ? { osc, secretName: `oscar-${osc}-reconcile`, checksum: 'c'.repeat(64), config: c }
          : { missing: `OperatingSystemConfig ${namespace}/${osc} has no reconcile Secret` },
      );
    },
  };
}

const STATES = states({
  v1: config('ubuntu', 'systemd'),
  v2: config('ubuntu', 'systemd'),
  flatcar: config('flatcar', 'systemd'),
  cgroupfs: config('ubuntu', 'cgroupfs'),
});

function template(reconcile: string, extra: Record<string, unknown> = {}) {
  return {
    apiVersion: 'bootstrap.oscar.dev/v1alpha1',
    kind: 'OscarConfigTemplate',
    metadata: { name: `t-${reconcile}`, namespace: 'pools' },
    spec: {
      template: {
        spec: { provisionRef: { name: 'prov' }, reconcileRef: { name: reconcile }, ...extra },
      },
    },
  };
}

function decodePatch(p: { patchType: string; patch: string } | undefined): unknown {
  if (!p) return undefined;
  expect(p.patchType).toBe('JSONPatch');
  return JSON.parse(Buffer.from(p.patch, 'base64').toString('utf8'));
}

describe('CanUpdateMachineSet', () => {
  it('covers a reconcileRef moving to an OSC of the same OS and cgroup driver with one JSON patch of exactly that field', async () => {
    const res = await canUpdateMachineSet(
      {
        current: { bootstrapConfigTemplate: template('v1') },
        desired: { bootstrapConfigTemplate: template('v2') },
      },
      STATES,
    );
    expect(res).toMatchObject({
      apiVersion: 'hooks.runtime.cluster.x-k8s.io/v1alpha1',
      kind: 'CanUpdateMachineSetResponse',
      status: 'Success',
    });
    expect(decodePatch(res.bootstrapConfigTemplatePatch)).toEqual([
      { op: 'add', path: '/spec/template/spec/reconcileRef', value: { name: 'v2' } },
    ]);
    expect(res.machineSetPatch).toBeUndefined();
    expect(res.infrastructureMachineTemplatePatch).toBeUndefined();
    expect(res.message).toMatch(/reconcileRef v1 → v2 in place/);
  });

  it.each([
    ['another spec.type', 'flatcar', /spec.type changed from "ubuntu" to "flatcar"/],
    ['another cgroup driver', 'cgroupfs', /cgroupDriver changed from systemd to cgroupfs/],
    ['an OSC that has not rendered', 'nope', /pools\/nope has no reconcile Secret/],
  ])('leaves %s to a rollout: no patch, the reason in the log only', async (_what, to, why) => {
    const logged: string[] = [];
    const res = await canUpdateMachineSet(
      {
        current: { bootstrapConfigTemplate: template('v1') },
        desired: { bootstrapConfigTemplate: template(to) },
      },
      STATES,
      (d) => logged.push(d),
    );
    expect(res.status).toBe('Success');
    expect(res.bootstrapConfigTemplatePatch).toBeUndefined();
    expect(res.message).toMatch(/^not in place/);
    expect(res.message).not.toMatch(why);
    expect(logged).toEqual([expect.stringMatching(why)]);
  });

  it('says the same of an OSC that does not exist and one that has not rendered (no existence oracle), and no checksum', async () => {
    const ask = async (to: string) =>
      (
        await canUpdateMachineSet(
          {
            current: { bootstrapConfigTemplate: template('v1') },
            desired: { bootstrapConfigTemplate: template(to) },
          },
          STATES,
        )
      ).message ?? '';
    const absent = await ask('nope');
    const corrupt: ReconcileStates = {
      get: (_ns, osc) =>
        Promise.resolve(
          osc === 'v1'
            ? STATES.get('pools', 'v1')
            : { missing: `Secret pools/x: checksum mismatch` },
        ),
    };
    const unrendered = await canUpdateMachineSet(
      {
        current: { bootstrapConfigTemplate: template('v1') },
        desired: { bootstrapConfigTemplate: template('nope') },
      },
      corrupt,
    );
    expect(unrendered.message).toBe(absent);
    const covered = await ask('v2');
    expect(covered).toMatch(/in place$/);
    expect(covered).not.toMatch(/checksum|sha256/);
  });

  it('answers from the same rule the agent refuses by (api/in-place.ts replacementReason)', async () => {
    const names = ['v1', 'v2', 'flatcar', 'cgroupfs'];
    const byName: Record<string, ResolvedConfig> = {
      v1: config('ubuntu', 'systemd'),
      v2: config('ubuntu', 'systemd'),
      flatcar: config('flatcar', 'systemd'),
      cgroupfs: config('ubuntu', 'cgroupfs'),
    };
    for (const from of names) {
      for (const to of names) {
        if (from === to) continue;
        const res = await canUpdateMachineSet(
          {
            current: { bootstrapConfigTemplate: template(from) },
            desired: { bootstrapConfigTemplate: template(to) },
          },
          STATES,
        );
        const agentRefuses =
          replacementReason(byName[from], byName[to] ?? config('x')) !== undefined;
        expect(res.bootstrapConfigTemplatePatch === undefined, `${from} → ${to}`).toBe(
          agentRefuses,
        );
      }
    }
  });

  it('covers nothing else: provision-side fields (values, provisionRef, format, agent) stay for Cluster API to roll out', async () => {
    const res = await canUpdateMachineSet(
      {
        current: { bootstrapConfigTemplate: template('v1', { values: { pool: 'a' } }) },
        desired: { bootstrapConfigTemplate: template('v1', { values: { pool: 'b' } }) },
      },
      STATES,
    );
    expect(res.bootstrapConfigTemplatePatch).toBeUndefined();
    expect(res.message).toMatch(/reconcileRef unchanged/);
  });

  it('another bootstrap provider, or none: no patch, and no lookup', async () => {
    const s = states({});
    const kubeadm = {
      apiVersion: 'bootstrap.cluster.x-k8s.io/v1beta2',
      kind: 'KubeadmConfigTemplate',
      metadata: { namespace: 'pools' },
      spec: { template: { spec: { reconcileRef: { name: 'v2' } } } },
    };
    const res = await canUpdateMachineSet(
      {
        current: { bootstrapConfigTemplate: template('v1') },
        desired: { bootstrapConfigTemplate: kubeadm },
      },
      s,
    );
    expect(res.bootstrapConfigTemplatePatch).toBeUndefined();
    expect((await canUpdateMachineSet({}, s)).status).toBe('Success');
    expect(s.asked).toEqual([]);
  });
});

describe('CanUpdateMachine', () => {
  it("patches the machine's OscarConfig at spec.reconcileRef, from the same decision", async () => {
    const cfg = (reconcile: string) => ({
      apiVersion: 'bootstrap.oscar.dev/v1alpha1',
      kind: 'OscarConfig',
      metadata: { name: 'm-1', namespace: 'pools' },
      spec: { provisionRef: { name: 'prov' }, reconcileRef: { name: reconcile } },
    });
    const ok = await canUpdateMachine(
      { current: { bootstrapConfig: cfg('v1') }, desired: { bootstrapConfig: cfg('v2') } },
      STATES,
    );
    expect(ok.kind).toBe('CanUpdateMachineResponse');
    expect(decodePatch(ok.bootstrapConfigPatch)).toEqual([
      { op: 'add', path: '/spec/reconcileRef', value: { name: 'v2' } },
    ]);
    const no = await canUpdateMachine(
      { current: { bootstrapConfig: cfg('v1') }, desired: { bootstrapConfig: cfg('flatcar') } },
      STATES,
    );
    expect(no.bootstrapConfigPatch).toBeUndefined();
    expect(no.machinePatch).toBeUndefined();
  });
});
