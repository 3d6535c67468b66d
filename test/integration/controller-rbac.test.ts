// deploy/controller applied to the real API server: the controller's ServiceAccount can do
// exactly what the controller needs in the namespaces it is bound in, and nothing more —
// checked by the authorizer itself (kubectl auth can-i --as), then by running the controller
// under that identity.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { secretNameFor } from '../../api/secret.js';
import { writeKubeconfigFor } from '../../hack/testenv/testenv.js';
import { Api, startController, waitFor } from './controller-support.js';
import {
  createTestNamespace,
  kubectl,
  skipWithoutCluster,
  testEnvInfo,
} from './support/cluster.js';

skipWithoutCluster();

const deployDir = join(
  fileURLToPath(new URL('.', import.meta.url)),
  '..',
  '..',
  'deploy',
  'controller',
);
const SA = 'system:serviceaccount:oscar-system:oscar-controller';

const stops: (() => Promise<void>)[] = [];
const logs: string[][] = [];
afterEach(async (ctx) => {
  for (const stop of stops.splice(0)) await stop();
  if (ctx.task.result?.state === 'fail') process.stderr.write(logs.flat().join(''));
  logs.length = 0;
});

/** deploy/controller with the watched-namespace RoleBinding pointed at `watched`. */
async function manifests(watched: string): Promise<string> {
  const docs: string[] = [];
  for (const file of (await readdir(deployDir))
    .filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml')
    .sort()) {
    for (const doc of parseAllDocuments(await readFile(join(deployDir, file), 'utf8'))) {
      const obj = doc.toJS() as { kind: string; metadata: { namespace?: string } } | null;
      if (!obj) continue;
      if (file === 'rolebinding-watched-namespace.yaml') obj.metadata.namespace = watched;
      docs.push(JSON.stringify(obj));
    }
  }
  return docs.join('\n---\n');
}

/**
 * Whether the controller's ServiceAccount may do it: a SubjectAccessReview, which (unlike
 * `kubectl auth can-i`) needs no discovery, so rows for Cluster API's resources hold whether or
 * not its CRDs are installed in the test cluster. `resource` is `plural[.group][/name]`; `extra`
 * may hold `--subresource=X`.
 */
async function can(
  verb: string,
  resource: string,
  ns: string | undefined,
  extra: string[] = [],
): Promise<boolean> {
  const [kind = '', name] = resource.split('/');
  const dot = kind.indexOf('.');
  const subresource = extra.find((e) => e.startsWith('--subresource='))?.split('=')[1];
  const review = {
    apiVersion: 'authorization.k8s.io/v1',
    kind: 'SubjectAccessReview',
    spec: {
      user: SA,
      groups: [
        'system:serviceaccounts',
        'system:serviceaccounts:oscar-system',
        'system:authenticated',
      ],
      resourceAttributes: {
        verb,
        resource: dot < 0 ? kind : kind.slice(0, dot),
        group: dot < 0 ? '' : kind.slice(dot + 1),
        ...(name ? { name } : {}),
        ...(subresource ? { subresource } : {}),
        ...(ns ? { namespace: ns } : {}),
      },
    },
  };
  const r = await kubectl(['create', '-o', 'json', '-f', '-'], { input: JSON.stringify(review) });
  if (r.code !== 0) throw new Error(`SubjectAccessReview ${verb} ${resource}: ${r.stderr}`);
  return (JSON.parse(r.stdout) as { status?: { allowed?: boolean } }).status?.allowed === true;
}

describe('controller RBAC (deploy/controller on the real API server)', () => {
  it('grants what the controller needs in its namespaces and nothing more', async () => {
    const watched = await createTestNamespace('rbac');
    const other = await createTestNamespace('rbac-other');
    const applied = await kubectl(['apply', '--server-side', '--field-manager=test', '-f', '-'], {
      input: await manifests(watched),
    });
    expect(applied.stderr).toBe('');
    expect(applied.code).toBe(0);

    const allowed: [string, string, string | undefined, string[]?][] = [
      ['list', 'operatingsystemconfigs.oscar.dev', watched],
      ['watch', 'operatingsystemconfigs.oscar.dev', watched],
      ['patch', 'operatingsystemconfigs.oscar.dev', watched],
      ['patch', 'operatingsystemconfigs.oscar.dev', watched, ['--subresource=status']],
      ['update', 'operatingsystemconfigs.oscar.dev', watched, ['--subresource=finalizers']],
      ['list', 'secrets', watched],
      ['watch', 'secrets', watched],
      ['get', 'secrets', watched], // copies a rendering into a revision Secret
      ['create', 'secrets', watched],
      ['patch', 'secrets', watched],
      ['delete', 'secrets', watched],
      ['list', 'configmaps', watched],
      ['create', 'events', watched],
      ['create', 'leases.coordination.k8s.io', 'oscar-system'],
      ['get', 'leases.coordination.k8s.io/oscar-controller', 'oscar-system'],
      ['update', 'leases.coordination.k8s.io/oscar-controller', 'oscar-system'],
      // The nodes' reports for the OSCs' status.nodes (cluster-scoped objects); patch: grants.
      ['list', 'operatingsystemconfignodes.oscar.dev', undefined],
      ['watch', 'operatingsystemconfignodes.oscar.dev', undefined],
      // Per-machine bootstrap: OscarConfigs and their status; Cluster API objects read-only;
      // bootstrap tokens written and deleted by name in kube-system.
      ['list', 'oscarconfigs.bootstrap.oscar.dev', watched],
      ['watch', 'oscarconfigs.bootstrap.oscar.dev', watched],
      ['patch', 'oscarconfigs.bootstrap.oscar.dev', watched, ['--subresource=status']],
      ['list', 'machines.cluster.x-k8s.io', watched],
      ['watch', 'clusters.cluster.x-k8s.io', watched],
      ['create', 'secrets', 'kube-system'],
      ['patch', 'secrets', 'kube-system'],
      ['delete', 'secrets', 'kube-system'],
      ['patch', 'operatingsystemconfignodes.oscar.dev', undefined],
      // The identity approver labels a node's object with its config's UID before it approves
      // the node's identity, creating it when the node has not reported yet (docs/identity.md).
      ['create', 'operatingsystemconfignodes.oscar.dev', undefined],
      // …reading it by name first, and clearing an earlier identity's object (its status, spec
      // and labels) when the machine name is reused; the bootstrap controller deletes a deleted
      // config's machine's object.
      ['get', 'operatingsystemconfignodes.oscar.dev', undefined],
      ['patch', 'operatingsystemconfignodes.oscar.dev', undefined, ['--subresource=status']],
      ['delete', 'operatingsystemconfignodes.oscar.dev', undefined],
      // The machines' Roles: written on approval, watched and rewritten when a config's
      // reconcileRef changes.
      ['patch', 'roles.rbac.authorization.k8s.io', watched],
      ['list', 'roles.rbac.authorization.k8s.io', watched],
      ['watch', 'roles.rbac.authorization.k8s.io', watched],
      // Each machine's right to read its own node object (a ClusterRole by name and its binding
      // to the config's UID group; docs/identity.md, tenancy). RBAC's escalation check bounds
      // what they can grant: below, as the ServiceAccount.
      ['create', 'clusterroles.rbac.authorization.k8s.io', undefined],
      ['patch', 'clusterroles.rbac.authorization.k8s.io', undefined],
      ['create', 'clusterrolebindings.rbac.authorization.k8s.io', undefined],
      ['patch', 'clusterrolebindings.rbac.authorization.k8s.io', undefined],
      // Drains (docs/rollouts.md#drain): cordon, evict through the Eviction API, name the PDB.
      ['patch', 'nodes', undefined],
      ['create', 'pods', other, ['--subresource=eviction']],
      ['list', 'pods', undefined],
      ['list', 'poddisruptionbudgets.policy', undefined],
    ];
    const denied: [string, string, string | undefined, string[]?][] = [
      // Secrets nowhere but in the watched namespace; never cluster-wide.
      ['list', 'secrets', other],
      ['get', 'secrets', 'kube-system'],
      ['list', 'secrets', undefined],
      ['watch', 'secrets', undefined],
      ['list', 'operatingsystemconfigs.oscar.dev', undefined],
      // Nothing it does not use, even in the watched namespace.
      ['update', 'secrets', watched],
      ['create', 'secrets', other],
      ['delete', 'operatingsystemconfigs.oscar.dev', watched],
      ['create', 'operatingsystemconfigs.oscar.dev', watched],
      ['update', 'operatingsystemconfigs.oscar.dev', watched],
      ['patch', 'configmaps', watched],
      ['create', 'pods', watched],
      // an eviction is the only way it removes a pod: no budget is ever bypassed
      ['delete', 'pods', other],
      ['delete', 'nodes', undefined],
      ['list', 'events', watched],
      ['update', 'leases.coordination.k8s.io/someone-else', 'oscar-system'],
      ['get', 'leases.coordination.k8s.io/oscar-controller', watched],
      // …and nothing that lifts that check, nor removing or replacing others' RBAC objects
      ['escalate', 'clusterroles.rbac.authorization.k8s.io', undefined],
      ['bind', 'clusterroles.rbac.authorization.k8s.io', undefined],
      ['delete', 'clusterroles.rbac.authorization.k8s.io', undefined],
      ['update', 'clusterrolebindings.rbac.authorization.k8s.io', undefined],
      ['list', 'clusterroles.rbac.authorization.k8s.io', undefined],
      // Never replaces a node's object or report wholesale (patches with preconditions only).
      ['update', 'operatingsystemconfignodes.oscar.dev', undefined],
      ['update', 'operatingsystemconfignodes.oscar.dev', undefined, ['--subresource=status']],
      // It never reads kube-system (the tokens are written by name), nor changes configs' specs
      // or Cluster API objects.
      ['list', 'secrets', 'kube-system'],
      ['watch', 'secrets', 'kube-system'],
      ['update', 'secrets', 'kube-system'],
      ['patch', 'oscarconfigs.bootstrap.oscar.dev', watched],
      ['create', 'oscarconfigs.bootstrap.oscar.dev', watched],
      ['list', 'oscarconfigs.bootstrap.oscar.dev', other],
      ['patch', 'machines.cluster.x-k8s.io', watched],
      ['update', 'clusters.cluster.x-k8s.io', watched],
      ['list', 'roles.rbac.authorization.k8s.io', other],
      ['delete', 'roles.rbac.authorization.k8s.io', watched],
      ['list', 'rolebindings.rbac.authorization.k8s.io', watched],
    ];
    const wrong: string[] = [];
    for (const [verb, res, ns, extra] of allowed) {
      if (!(await can(verb, res, ns, extra)))
        wrong.push(`cannot ${verb} ${res} in ${ns ?? 'all namespaces'} ${extra?.join(' ') ?? ''}`);
    }
    for (const [verb, res, ns, extra] of denied) {
      if (await can(verb, res, ns, extra))
        wrong.push(`CAN ${verb} ${res} in ${ns ?? 'all namespaces'} ${extra?.join(' ') ?? ''}`);
    }
    expect(wrong).toEqual([]);

    // And it is enough: the controller, as that ServiceAccount, renders, re-renders and cleans up.
    const kubeconfig = await writeKubeconfigFor(testEnvInfo(), {
      user: SA,
      groups: ['system:serviceaccounts', 'system:serviceaccounts:oscar-system'],
    });
    const c = await startController([watched], {
      kubeconfig,
      leaderElect: true,
      leaseNamespace: 'oscar-system',
      leaseDurationMs: 3000,
    });
    stops.push(c.stop);
    logs.push(c.logs);
    const api = new Api();
    await api.putSecret(watched, 'creds', { token: 'x' });
    await api.applyOsc(watched, 'w', {
      type: 'ubuntu',
      purpose: 'provision',
      files: [{ path: '/etc/token', content: { secretRef: { name: 'creds', key: 'token' } } }],
    });
    await api.waitReady(watched, 'w', 60_000);
    expect(await api.getSecret(watched, secretNameFor('w', 'provision'))).toBeDefined();
    await api.deleteOsc(watched, 'w');
    await waitFor(
      'cleanup as the ServiceAccount',
      async () => (await api.getSecret(watched, secretNameFor('w', 'provision'))) === undefined,
    );
    expect(c.logs.join('')).not.toContain('forbidden');
  });

  it('its ClusterRole rights grant only what it holds cluster-wide: a node reader yes, cluster-admin or Secrets no', async () => {
    const watched = await createTestNamespace('rbac-esc');
    const applied = await kubectl(['apply', '--server-side', '--field-manager=test', '-f', '-'], {
      input: await manifests(watched),
    });
    expect(applied.code, applied.stderr).toBe(0);
    const kubeconfig = await writeKubeconfigFor(testEnvInfo(), {
      user: SA,
      groups: ['system:serviceaccounts', 'system:serviceaccounts:oscar-system'],
    });
    const name = `${watched}-esc`;
    const role = (rules: unknown[]) =>
      JSON.stringify({
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRole',
        metadata: { name },
        rules,
      });
    const binding = (roleName: string) =>
      JSON.stringify({
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRoleBinding',
        metadata: { name },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: roleName },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'attacker' }],
      });
    const asController = (input: string) =>
      kubectl(['create', '-f', '-', '-o', 'name'], { kubeconfig, input });
    try {
      // refused: Secrets of every namespace, and cluster-admin bound to anyone
      const secrets = await asController(
        role([{ apiGroups: [''], resources: ['secrets'], verbs: ['get', 'list'] }]),
      );
      expect(secrets.code).not.toBe(0);
      expect(secrets.stderr).toMatch(/forbidden.*escalat|attempting to grant RBAC permissions/i);
      const admin = await asController(binding('cluster-admin'));
      expect(admin.code).not.toBe(0);
      expect(admin.stderr).toMatch(/forbidden/i);
      // allowed: a node reader by name, as the approver writes it, and its binding
      const reader = await asController(
        role([
          {
            apiGroups: ['oscar.dev'],
            resources: ['operatingsystemconfignodes'],
            resourceNames: [name],
            verbs: ['get', 'list', 'watch'],
          },
        ]),
      );
      expect(reader.stderr).toBe('');
      expect(reader.code).toBe(0);
      const bound = await asController(binding(name));
      expect(bound.stderr).toBe('');
      expect(bound.code).toBe(0);
    } finally {
      await kubectl(['delete', 'clusterrole,clusterrolebinding', name, '--ignore-not-found']);
    }
  });
});
