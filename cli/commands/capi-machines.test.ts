import { describe, expect, it } from 'vitest';
import type { ResolvedConfig } from '../../api/resolved.js';
import type {
  ReconcileLookup,
  ReconcileStates,
} from '../../controller/extension/reconcile-state.js';
import { encodePatch } from '../../controller/extension/hooks.js';
import {
  applyPatch,
  outOfDate,
  previewMachines,
  type CapiObject,
  type CapiReader,
  type MachineSpecView,
  type PreviewInput,
  type Ref,
} from './capi-machines.js';

const NS = 'pools';
const OSCAR = { apiGroup: 'bootstrap.oscar.dev', kind: 'OscarConfigTemplate' };
const INFRA = { apiGroup: 'infrastructure.example', kind: 'FooMachineTemplate' };

function config(type: string): ResolvedConfig {
  return { type, purpose: 'reconcile', units: [], files: [], packages: [] };
}

const STATES: ReconcileStates = {
  get: (_ns: string, osc: string): Promise<ReconcileLookup> => {
    const byName: Record<string, ResolvedConfig> = {
      v1: config('debian'),
      v2: config('debian'),
      fc: config('flatcar'),
    };
    const c = byName[osc];
    return Promise.resolve(
      c
        ? { osc, secretName: `oscar-${osc}-reconcile`, checksum: 'c'.repeat(64), config: c }
        : { missing: `no reconcile Secret for ${osc}` },
    );
  },
};

function obj(kind: string, name: string, spec: Record<string, unknown>, extra = {}): CapiObject {
  return {
    apiVersion: kind.endsWith('MachineTemplate')
      ? 'infrastructure.example/v1'
      : 'bootstrap.oscar.dev/v1alpha1',
    kind,
    metadata: { name, namespace: NS, ...extra },
    spec,
  };
}

function oscarTemplate(name: string, reconcile: string, provision = 'prov'): CapiObject {
  return obj('OscarConfigTemplate', name, {
    template: { spec: { provisionRef: { name: provision }, reconcileRef: { name: reconcile } } },
  });
}

function machineSpec(tpl: string, over: Partial<MachineSpecView> = {}): MachineSpecView {
  return {
    bootstrap: { configRef: { ...OSCAR, name: tpl } },
    infrastructureRef: { ...INFRA, name: 'infra-a' },
    version: 'v1.37.2',
    ...over,
  };
}

function machineSet(name: string, spec: MachineSpecView): CapiObject {
  return {
    kind: 'MachineSet',
    metadata: { name, namespace: NS },
    spec: { template: { spec } },
  };
}

function machine(name: string, ms: string, reconcile: string, extra = {}): CapiObject {
  return {
    kind: 'Machine',
    metadata: {
      name,
      namespace: NS,
      ownerReferences: [{ kind: 'MachineSet', name: ms, controller: true }],
      ...extra,
    },
    spec: { bootstrap: { configRef: { ...OSCAR, kind: 'OscarConfig', name } } },
    status: { nodeRef: { name } },
  };
}

function world(objects: CapiObject[], sets: CapiObject[], machines: CapiObject[]) {
  const reconcileOf = new Map(
    machines.map((m) => [m.metadata.name, m.metadata.labels?.reconcile ?? 'v1']),
  );
  const reader: CapiReader = {
    machineDeployment: () => Promise.reject(new Error('not used')),
    machineSets: () => Promise.resolve(sets),
    machines: () => Promise.resolve(machines),
    byRef: (_ns: string, ref: Ref) => {
      if (ref.kind === 'OscarConfig') {
        const r = reconcileOf.get(ref.name ?? '');
        return Promise.resolve(
          r ? obj('OscarConfig', ref.name ?? '', { reconcileRef: { name: r } }) : undefined,
        );
      }
      return Promise.resolve(
        objects.find((o) => o.kind === ref.kind && o.metadata.name === ref.name),
      );
    },
  };
  return reader;
}

const infraA = obj('FooMachineTemplate', 'infra-a', { template: { spec: { size: 'm' } } });
const infraB = obj('FooMachineTemplate', 'infra-b', { template: { spec: { size: 'l' } } });
const templates = [
  oscarTemplate('tpl-v1', 'v1'),
  oscarTemplate('tpl-v2', 'v2'),
  oscarTemplate('tpl-fc', 'fc'),
  oscarTemplate('tpl-prov2', 'v2', 'prov2'),
  infraA,
  infraB,
];

function md(tpl: string, over: Partial<MachineSpecView> = {}, rollout?: unknown): CapiObject {
  return {
    kind: 'MachineDeployment',
    metadata: { name: 'workers', namespace: NS },
    spec: { template: { spec: machineSpec(tpl, over) }, ...(rollout ? { rollout } : {}) },
  };
}

async function preview(
  target: string,
  sets: CapiObject[],
  machines: CapiObject[],
  over: Partial<PreviewInput> = {},
) {
  const template = templates.find((t) => t.metadata.name === target);
  if (!template) throw new Error(target);
  return previewMachines({
    namespace: NS,
    md: md('tpl-v1'),
    template,
    reader: world(templates, sets, machines),
    states: STATES,
    ...over,
  });
}

const SETS = [machineSet('ms-a', machineSpec('tpl-v1')), machineSet('ms-b', machineSpec('tpl-v2'))];
const MACHINES = [
  machine('m2', 'ms-a', 'v1'),
  machine('m1', 'ms-a', 'v1'),
  machine('m3', 'ms-b', 'v2', { labels: { reconcile: 'v2' } }),
];

describe('oscar capi preview --machine-deployment: per Machine, as Cluster API decides', () => {
  it('a new reconcileRef of the same OS: the old MachineSet in place, the new one unchanged', async () => {
    const out = await preview('tpl-v2', SETS, MACHINES);
    expect(out.map((m) => [m.machine, m.decision])).toEqual([
      ['m1', 'in-place'],
      ['m2', 'in-place'],
      ['m3', 'unchanged'],
    ]);
    expect(out[0]).toMatchObject({ machineSet: 'ms-a', reconcileRef: 'v1', node: 'm1' });
    expect(out[0]?.reason).toBe('reconcileRef v1 → v2 in place');
    expect(out[2]?.reason).toContain('already uses OscarConfigTemplate tpl-v2');
  });

  it('another OS: every machine replaced, with the rule’s reason', async () => {
    const out = await preview('tpl-fc', SETS, MACHINES);
    expect(out.every((m) => m.decision === 'replace')).toBe(true);
    expect(out[0]?.reason).toContain('spec.type changed from "debian" to "flatcar"');
  });

  it('a provisionRef change is not covered by the patch: replaced, naming the field', async () => {
    const out = await preview('tpl-prov2', SETS, MACHINES);
    expect(out.map((m) => m.decision)).toEqual(['replace', 'replace', 'replace']);
    expect(out[0]?.reason).toContain('reconcileRef v1 → v2 in place; not covered: ');
    expect(out[0]?.reason).toContain('spec.template.spec.provisionRef (written on the machine');
    expect(out[2]?.reason).toMatch(/^reconcileRef unchanged \(v2\); not covered: .*provisionRef/);
  });

  it('what is not oscar’s replaces: another version, another infrastructure spec, OnDelete', async () => {
    const version = await preview('tpl-v2', SETS, MACHINES, {
      md: md('tpl-v1', { version: 'v1.38.0' }),
    });
    expect(version[0]).toMatchObject({ decision: 'replace' });
    expect(version[0]?.reason).toContain('spec.version v1.37.2 → v1.38.0');
    const infra = await preview('tpl-v2', SETS, MACHINES, {
      md: md('tpl-v1', { infrastructureRef: { ...INFRA, name: 'infra-b' } }),
    });
    expect(infra[0]?.reason).toContain('FooMachineTemplate infra-a → FooMachineTemplate infra-b');
    // the same infrastructure spec under another name is no reason to replace
    const same = obj('FooMachineTemplate', 'infra-c', { template: { spec: { size: 'm' } } });
    templates.push(same);
    const renamed = await preview('tpl-v2', SETS, MACHINES, {
      md: md('tpl-v1', { infrastructureRef: { ...INFRA, name: 'infra-c' } }),
    });
    templates.pop();
    expect(renamed[0]?.decision).toBe('in-place');
    const onDelete = await preview('tpl-v2', SETS, MACHINES, {
      md: md('tpl-v1', {}, { strategy: { type: 'OnDelete' } }),
    });
    expect(onDelete[0]).toMatchObject({ decision: 'replace' });
    expect(onDelete[0]?.reason).toContain('OnDelete');
  });

  it('a machine being deleted, or with no MachineSet, is left alone; another bootstrap provider replaces', async () => {
    const kubeadm = machineSet('ms-k', {
      ...machineSpec('x'),
      bootstrap: {
        configRef: {
          apiGroup: 'bootstrap.cluster.x-k8s.io',
          kind: 'KubeadmConfigTemplate',
          name: 'k',
        },
      },
    });
    const out = await preview(
      'tpl-v2',
      [...SETS, kubeadm],
      [
        machine('d', 'ms-a', 'v1', { deletionTimestamp: '2026-12-03T00:00:00Z' }),
        { kind: 'Machine', metadata: { name: 'lone', namespace: NS } },
        machine('k1', 'ms-k', 'v1'),
      ],
    );
    expect(out.map((m) => [m.machine, m.decision])).toEqual([
      ['d', 'unchanged'],
      ['k1', 'replace'],
      ['lone', 'unchanged'],
    ]);
    expect(out[1]?.reason).toContain('KubeadmConfigTemplate k, not an OscarConfigTemplate');
  });
});

describe('the pieces of Cluster API’s comparison', () => {
  it('outOfDate names every rollout field that differs, and nothing when equal', () => {
    expect(outOfDate(machineSpec('a'), machineSpec('a'))).toEqual([]);
    expect(
      outOfDate(machineSpec('a'), machineSpec('b', { failureDomain: 'z1', version: 'v2' })),
    ).toEqual([
      'spec.version v1.37.2 → v2',
      'bootstrap OscarConfigTemplate a → OscarConfigTemplate b',
      'failureDomain unset → z1',
    ]);
  });

  it('applyPatch applies the reply’s JSON Patch to a copy', () => {
    const was = oscarTemplate('t', 'v1');
    const patched = applyPatch(
      was,
      encodePatch([{ op: 'add', path: '/spec/template/spec/reconcileRef', value: { name: 'v2' } }]),
    );
    expect(patched.spec?.template).toEqual({
      spec: { provisionRef: { name: 'prov' }, reconcileRef: { name: 'v2' } },
    });
    expect(was.spec?.template).toEqual({
      spec: { provisionRef: { name: 'prov' }, reconcileRef: { name: 'v1' } },
    });
    expect(applyPatch(was, undefined)).toEqual(was);
  });
});
