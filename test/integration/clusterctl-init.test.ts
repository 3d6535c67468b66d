// `clusterctl init --bootstrap oscar` for real (clusterctl v1.13.6, built from the Cluster API
// module the tests use), against a cluster of its own: init installs cert-manager, Cluster API's
// core provider and the kubeadm control plane besides oscar, webhooks included, which would get in
// the way of the other suites on the shared test cluster. Nothing is fetched from the network:
//   - the core provider and the kubeadm control plane come from a local provider repository built
//     from the Cluster API module (`kubectl kustomize config/default`, the module's metadata.yaml);
//   - oscar from `npm run build:clusterctl`'s repository;
//   - cert-manager (a release from GitHub, unreachable here, and no node could run it) is replaced
//     by an override holding only its Issuer/Certificate CRDs: enough for clusterctl's readiness
//     check (it creates a test Issuer and Certificate), nothing that issues a certificate.
// Then the oscar controller, as the identity the components file gives it (plus the two grants
// the docs apply apart), renders an OscarConfig into its bootstrap data Secret.
import { execFile, spawnSync } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildProviderRepository } from '../../hack/clusterctl/build.js';
import { startTestEnv, type TestEnv } from '../../hack/testenv/testenv.js';
import { runController } from '../../controller/main.js';
import { createLogger } from '../../log/logger.js';
import { missing, repoRoot } from '../support/tools.js';
import { waitFor } from '../support/wait.js';
import { adminClient, Api, demoSpec } from './controller-support.js';
import { clusterUnavailable } from './support/cluster.js';

const execFileP = promisify(execFile);
const CAPI_VERSION = 'v1.13.6';
const CERT_MANAGER = 'v1.21.1'; // the version clusterctl v1.13.6 installs

let clusterctl: string | undefined;
let capiModule: string | undefined;
let env: TestEnv | undefined;
let work = '';

beforeAll(async () => {
  if (clusterUnavailable !== null) return;
  const built = spawnSync('bash', [join(repoRoot, 'hack/capi/build-clusterctl.sh')], {
    encoding: 'utf8',
  });
  if (built.status !== 0) {
    missing('clusterctl', `hack/capi/build-clusterctl.sh failed: ${built.stderr.slice(-500)}`);
    return;
  }
  clusterctl = built.stdout.trim();
  const gomodcache = (await execFileP('go', ['env', 'GOMODCACHE'])).stdout.trim();
  capiModule = join(gomodcache, `sigs.k8s.io/cluster-api@${CAPI_VERSION}`);
  work = await mkdtemp(join(tmpdir(), 'oscar-clusterctl-init-'));
  env = await startTestEnv({ log: () => undefined });
}, 600_000);

afterAll(async () => {
  await env?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

function crd(plural: string, kind: string, scope: 'Namespaced' | 'Cluster'): string {
  return JSON.stringify({
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.cert-manager.io` },
    spec: {
      group: 'cert-manager.io',
      names: { kind, listKind: `${kind}List`, plural, singular: kind.toLowerCase() },
      scope,
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          schema: {
            openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
          },
        },
      ],
    },
  });
}

/** The local repository: Cluster API's two providers from the module, oscar's, and the config. */
async function repository(kubectl: string, module: string): Promise<string> {
  const repo = join(work, 'repo');
  const providers: [string, string, string, string][] = [
    ['cluster-api', 'CoreProvider', 'config/default', 'core-components.yaml'],
    [
      'control-plane-kubeadm',
      'ControlPlaneProvider',
      'controlplane/kubeadm/config/default',
      'control-plane-components.yaml',
    ],
  ];
  const entries: string[] = [];
  for (const [name, type, source, file] of providers) {
    const dir = join(repo, name, CAPI_VERSION);
    await mkdir(dir, { recursive: true });
    const { stdout } = await execFileP(kubectl, ['kustomize', join(module, source)], {
      maxBuffer: 64 * 1024 * 1024,
    });
    await writeFile(join(dir, file), stdout);
    await copyFile(join(module, 'metadata.yaml'), join(dir, 'metadata.yaml'));
    const short = name === 'cluster-api' ? name : 'kubeadm';
    entries.push(`  - name: ${short}\n    url: file://${join(dir, file)}\n    type: ${type}\n`);
  }
  const oscar = await buildProviderRepository({ outDir: join(work, 'oscar'), kubectl });
  entries.push(
    `  - name: oscar\n    url: file://${oscar.components}\n    type: BootstrapProvider\n`,
  );
  const overrides = join(work, 'home/.config/cluster-api/overrides/cert-manager', CERT_MANAGER);
  await mkdir(overrides, { recursive: true });
  await writeFile(
    join(overrides, 'cert-manager.yaml'),
    [
      crd('issuers', 'Issuer', 'Namespaced'),
      crd('certificates', 'Certificate', 'Namespaced'),
      crd('clusterissuers', 'ClusterIssuer', 'Cluster'),
    ].join('\n---\n'),
  );
  const config = join(work, 'clusterctl.yaml');
  await writeFile(config, `providers:\n${entries.join('')}`);
  return config;
}

async function kubectlOn(e: TestEnv, args: string[], input?: string): Promise<string> {
  const child = execFileP(e.kubectlPath, ['--kubeconfig', e.kubeconfigPath, ...args], {
    maxBuffer: 16 * 1024 * 1024,
  });
  child.child.stdin?.end(input ?? '');
  return (await child).stdout;
}

describe('clusterctl init --bootstrap oscar (real clusterctl, a cluster of its own)', () => {
  it('installs the providers from local repositories; the oscar controller then renders an OscarConfig', async (ctx) => {
    if (clusterUnavailable !== null) return ctx.skip(clusterUnavailable);
    if (!clusterctl || !capiModule || !env) return ctx.skip('no clusterctl');
    const e = env;
    const config = await repository(e.kubectlPath, capiModule);
    const init = await execFileP(clusterctl, ['init', '--bootstrap', 'oscar', '--config', config], {
      env: {
        ...process.env,
        HOME: join(work, 'home'), // the overrides, and no user config or cache
        KUBECONFIG: e.kubeconfigPath,
        OSCAR_WATCH_NAMESPACE: 'machines',
      },
      timeout: 300_000,
      maxBuffer: 16 * 1024 * 1024,
    });
    const said = `${init.stdout}${init.stderr}`;
    expect(said).toContain('Using override="cert-manager.yaml" provider="cert-manager"');
    expect(said).toContain('Installing provider="bootstrap-oscar" version="v0.1.0"');
    expect(said).toContain('Your management cluster has been initialized successfully!');
    const inventory = await kubectlOn(e, [
      'get',
      'providers.clusterctl.cluster.x-k8s.io',
      '-A',
      '-o',
      'jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {.type} {.version}{"\\n"}{end}',
    ]);
    expect(inventory.trim().split('\n').sort()).toEqual([
      'capi-kubeadm-control-plane-system/control-plane-kubeadm ControlPlaneProvider v1.13.6',
      `capi-system/cluster-api CoreProvider ${CAPI_VERSION}`,
      'oscar-system/bootstrap-oscar BootstrapProvider v0.1.0',
    ]);

    // the two grants outside oscar-system, as docs/cluster-api.md applies them
    await kubectlOn(e, ['create', 'namespace', 'machines']);
    const binding = await readFile(
      join(repoRoot, 'deploy/controller/rolebinding-watched-namespace.yaml'),
      'utf8',
    );
    await kubectlOn(
      e,
      ['apply', '-f', '-'],
      binding.replace(/namespace: default/g, 'namespace: machines'),
    );
    await kubectlOn(e, ['apply', '-f', join(repoRoot, 'deploy/controller/bootstrap-tokens.yaml')]);

    // the controller out of the cluster (no node runs its Deployment), as its ServiceAccount
    const kubeconfig = await e.writeKubeconfig({
      user: 'system:serviceaccount:oscar-system:oscar-controller',
      groups: ['system:serviceaccounts', 'system:serviceaccounts:oscar-system'],
    });
    const api = new Api(adminClient(e.kubeconfigPath));
    await api.applyOsc('machines', 'worker-provision', {
      ...demoSpec('provision'),
      type: 'ubuntu',
    });
    await api.applyOsc('machines', 'worker-reconcile', demoSpec('reconcile'));
    await kubectlOn(
      e,
      ['apply', '-f', '-'],
      JSON.stringify({
        apiVersion: 'bootstrap.oscar.dev/v1alpha1',
        kind: 'OscarConfig',
        metadata: { name: 'worker-1', namespace: 'machines' },
        spec: {
          provisionRef: { name: 'worker-provision' },
          reconcileRef: { name: 'worker-reconcile' },
        },
      }),
    );
    const handle = await runController({
      kubeconfig,
      namespaces: ['machines'],
      metricsAddr: '',
      leaderElect: false,
      leaseDurationMs: 15_000,
      bootstrap: {
        enabled: true,
        agentUrl: 'http://127.0.0.1:9/oscar-agent',
        agentSha256: 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
      },
      log: createLogger({ component: 'controller', level: 'silent' }),
    });
    try {
      const name = await waitFor('OscarConfig worker-1 rendered', async () => {
        const out = await kubectlOn(e, [
          'get',
          'oscarconfig',
          'worker-1',
          '-n',
          'machines',
          '-o',
          'jsonpath={.status.dataSecretName}',
        ]);
        return out.trim() || undefined;
      });
      expect(name).toBe('worker-1');
      const value = await kubectlOn(e, [
        'get',
        'secret',
        'worker-1',
        '-n',
        'machines',
        '-o',
        'jsonpath={.data.value}',
      ]);
      expect(Buffer.from(value, 'base64').toString('utf8')).toMatch(/^#cloud-config/);
    } finally {
      await handle.stop();
    }
  }, 600_000);
});
