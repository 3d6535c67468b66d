// The test-only nspawn provider's decisions (test/e2e/nspawn-provider/decide.ts): what it does
// next for one NspawnMachine, from what it read and what it runs.
import { describe, expect, it } from 'vitest';
import {
  FINALIZER,
  kubeletDropIn,
  machineStep,
  providerIdOf,
  type MachineObject,
  type NspawnMachineObject,
} from '../e2e/nspawn-provider/decide.js';

const owned = (over: Partial<NspawnMachineObject['metadata']> = {}): NspawnMachineObject => ({
  metadata: {
    name: 'w-1',
    finalizers: [FINALIZER],
    ownerReferences: [{ kind: 'Machine', name: 'w-1', apiVersion: 'cluster.x-k8s.io/v1beta2' }],
    ...over,
  },
});

const machine = (dataSecretName?: string): MachineObject => ({
  metadata: { name: 'w-1' },
  spec: { bootstrap: dataSecretName ? { dataSecretName } : {} },
});

describe('machineStep', () => {
  it('claims an object before anything else, so a delete always reaches its machine', () => {
    expect(machineStep(owned({ finalizers: [] }), machine('w-1'), false)).toEqual({
      kind: 'claim',
    });
  });

  it('waits for an owner Machine, for the Machine itself, and for its bootstrap data', () => {
    expect(machineStep(owned({ ownerReferences: [] }), undefined, false)).toMatchObject({
      kind: 'wait',
      why: 'no owner Machine yet',
    });
    // an owner of another API group is not a Cluster API Machine
    expect(
      machineStep(
        owned({ ownerReferences: [{ kind: 'Machine', name: 'x', apiVersion: 'other.io/v1' }] }),
        machine('s'),
        false,
      ),
    ).toMatchObject({ kind: 'wait' });
    expect(machineStep(owned(), undefined, false)).toMatchObject({ kind: 'wait' });
    expect(machineStep(owned(), machine(), false)).toMatchObject({
      kind: 'wait',
      why: 'Machine w-1 has no bootstrap data yet',
    });
  });

  it('boots from the Machine’s bootstrap data Secret once it is named', () => {
    expect(machineStep(owned(), machine('w-1-data'), false)).toEqual({
      kind: 'boot',
      machine: 'w-1',
      secret: 'w-1-data',
    });
  });

  it('reports providerID, addresses and provisioned while running, and nothing once reported', () => {
    const step = machineStep(owned(), machine('d'), true);
    expect(step).toEqual({
      kind: 'report',
      providerID: 'nspawn:///w-1',
      addresses: [
        { type: 'Hostname', address: 'w-1' },
        { type: 'InternalIP', address: '127.0.0.1' },
      ],
    });
    if (step.kind !== 'report') throw new Error('unreachable');
    const done: NspawnMachineObject = {
      ...owned(),
      spec: { providerID: step.providerID },
      status: { initialization: { provisioned: true }, addresses: step.addresses },
    };
    expect(machineStep(done, machine('d'), true)).toEqual({ kind: 'none' });
    // as the API server gives it back: keys in its own order (seen: a write a second otherwise)
    const stored = JSON.parse(
      JSON.stringify({
        ...done,
        status: {
          addresses: step.addresses.map((a) => ({ address: a.address, type: a.type })),
          initialization: { provisioned: true },
        },
      }),
    ) as NspawnMachineObject;
    expect(machineStep(stored, machine('d'), true)).toEqual({ kind: 'none' });
    // a providerID someone changed is put back
    expect(machineStep({ ...done, spec: { providerID: 'x' } }, machine('d'), true).kind).toBe(
      'report',
    );
  });

  it('releases a deleted object it holds or runs a machine for, and leaves others alone', () => {
    const deleting = owned({ deletionTimestamp: '2026-12-03T00:00:00Z' });
    expect(machineStep(deleting, machine('d'), true)).toEqual({ kind: 'release' });
    expect(machineStep(deleting, undefined, false)).toEqual({ kind: 'release' });
    const foreign = owned({ deletionTimestamp: '2026-12-03T00:00:00Z', finalizers: ['x/y'] });
    expect(machineStep(foreign, undefined, false)).toEqual({ kind: 'none' });
    expect(machineStep(foreign, undefined, true)).toEqual({ kind: 'release' });
  });
});

describe('kubeletDropIn', () => {
  it('gives kubelet the providerID Cluster API matches, and its own ports', () => {
    const text = kubeletDropIn('w-1', 10300);
    expect(text).toContain(`providerID: ${providerIdOf('w-1')}\n`);
    expect(text).toContain('port: 10300\n');
    expect(text).toContain('healthzPort: 0\n');
    expect(text).toMatch(
      /^apiVersion: kubelet\.config\.k8s\.io\/v1beta1\nkind: KubeletConfiguration\n/,
    );
  });
});
