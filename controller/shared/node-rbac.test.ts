// What a machine's certificate may read, as a function of its config.
import { describe, expect, it } from 'vitest';
import {
  machineGrantFor,
  nodeReaderBinding,
  nodeReaderRole,
  nodeRole,
  nodeRoleBinding,
  nodeRoleCurrent,
} from './node-rbac.js';

const config = (osc: string) => ({
  metadata: { name: 'cfg', namespace: 'ns', uid: 'uid-cfg' },
  spec: { reconcileRef: { name: osc } },
});

describe('the per-machine Role', () => {
  it("names the reconcile OSC's Secret (get, list, watch) and its five revision slots (get), nothing else", () => {
    const role = nodeRole(machineGrantFor(config('rec'), 'm1'));
    expect(role.metadata).toMatchObject({
      name: 'oscar-node-m1',
      namespace: 'ns',
      labels: { 'app.kubernetes.io/managed-by': 'oscar-controller' },
      ownerReferences: [{ kind: 'OscarConfig', name: 'cfg', uid: 'uid-cfg' }],
    });
    expect(role.rules).toEqual([
      {
        apiGroups: [''],
        resources: ['secrets'],
        resourceNames: ['oscar-rec-reconcile'],
        verbs: ['get', 'list', 'watch'],
      },
      {
        apiGroups: [''],
        resources: ['secrets'],
        resourceNames: [0, 1, 2, 3, 4].map((i) => `oscar-rec-rev-${String(i)}`),
        verbs: ['get'],
      },
    ]);
  });

  it('follows spec.reconcileRef: another OSC, other rules; the same config, the same rules', () => {
    const before = nodeRole(machineGrantFor(config('rec'), 'm1'));
    const after = nodeRole(machineGrantFor(config('rec2'), 'm1'));
    expect(nodeRoleCurrent(before, after)).toBe(false);
    expect(JSON.stringify(after.rules)).not.toContain('oscar-rec-');
    expect(nodeRoleCurrent(before, nodeRole(machineGrantFor(config('rec'), 'm1')))).toBe(true);
    // as the API server stores it: each rule's keys in its own order, verbs first
    const stored = {
      rules: (before.rules as Record<string, unknown>[]).map(
        ({ verbs, apiGroups, resources, resourceNames }) => ({
          verbs,
          apiGroups,
          resources,
          resourceNames,
        }),
      ),
    };
    expect(nodeRoleCurrent(stored, before)).toBe(true);
    expect(nodeRoleCurrent(stored, after)).toBe(false);
    // the binding does not depend on the OSC
    expect(nodeRoleBinding(machineGrantFor(config('rec2'), 'm1'))).toEqual(
      nodeRoleBinding(machineGrantFor(config('rec'), 'm1')),
    );
  });
});

describe('the per-machine RoleBinding', () => {
  it("names the issuing config's UID group alone, never the machine's user (a reused name is another UID)", () => {
    const binding = nodeRoleBinding(machineGrantFor(config('rec'), 'm1'));
    expect(binding.subjects).toEqual([
      { apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'oscar:config:uid-cfg' },
    ]);
    expect(binding.roleRef).toMatchObject({ kind: 'Role', name: 'oscar-node-m1' });
  });
});

describe("the per-machine reader of its own node object (no other namespace's reports)", () => {
  it('names the one object, binds the config UID group alone, is owned by the node object', () => {
    const grant = machineGrantFor(config('rec'), 'm1');
    const node = { name: 'm1', uid: 'node-uid' };
    const role = nodeReaderRole(grant, node);
    expect(role.kind).toBe('ClusterRole');
    expect(role.rules).toEqual([
      {
        apiGroups: ['oscar.dev'],
        resources: ['operatingsystemconfignodes'],
        resourceNames: ['m1'],
        verbs: ['get', 'list', 'watch'],
      },
      { apiGroups: [''], resources: ['nodes'], resourceNames: ['m1'], verbs: ['get'] },
    ]);
    const binding = nodeReaderBinding(grant, node);
    expect(binding.subjects).toEqual([
      { apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'oscar:config:uid-cfg' },
    ]);
    expect(binding.roleRef).toEqual({
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'ClusterRole',
      name: 'oscar-node-m1',
    });
    for (const o of [role, binding]) {
      expect(o.metadata).toMatchObject({
        name: 'oscar-node-m1',
        ownerReferences: [
          {
            apiVersion: 'oscar.dev/v1alpha1',
            kind: 'OperatingSystemConfigNode',
            name: 'm1',
            uid: 'node-uid',
          },
        ],
      });
      expect(o.metadata).not.toHaveProperty('namespace');
    }
  });
});
