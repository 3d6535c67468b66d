// oscar as a clusterctl bootstrap provider, with the real clusterctl (hack/capi/build-clusterctl.sh
// builds it from the Cluster API module the tests use): `npm run build:clusterctl`'s local
// provider repository is read by `clusterctl generate provider --bootstrap oscar`, which checks
// metadata.yaml's contract, substitutes the variables and labels the objects; the result is then
// applied to the real API server (server-side dry run: the test cluster is shared).
import { execFile, spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildProviderRepository, type ProviderRepository } from '../../hack/clusterctl/build.js';
import { missing, repoRoot } from '../support/tools.js';
import { kubectl, skipWithoutCluster, testEnvInfo } from './support/cluster.js';

const execFileP = promisify(execFile);
skipWithoutCluster();

let clusterctl: string | undefined;
let out: string;
let repository: ProviderRepository;
beforeAll(async () => {
  const built = spawnSync('bash', [join(repoRoot, 'hack/capi/build-clusterctl.sh')], {
    encoding: 'utf8',
  });
  if (built.status === 0) clusterctl = built.stdout.trim();
  else missing('clusterctl', `hack/capi/build-clusterctl.sh failed: ${built.stderr.slice(-500)}`);
  out = await mkdtemp(join(tmpdir(), 'oscar-clusterctl-'));
  repository = await buildProviderRepository({ outDir: out, kubectl: testEnvInfo().kubectlPath });
}, 600_000);
afterAll(async () => {
  await rm(out, { recursive: true, force: true });
});

interface Obj {
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
}

describe('clusterctl (real clusterctl, real API server)', () => {
  it('generate provider --bootstrap oscar reads the repository and substitutes the variables', async (ctx) => {
    if (!clusterctl) return ctx.skip();
    const { stdout } = await execFileP(
      clusterctl,
      [
        'generate',
        'provider',
        '--bootstrap',
        `oscar:${repository.version}`,
        '--config',
        repository.config,
      ],
      {
        env: {
          ...process.env,
          HOME: out, // no user clusterctl config or cache
          OSCAR_IMAGE: 'registry.example.com/oscar:v0.1.0',
          OSCAR_WATCH_NAMESPACE: 'team-a',
        },
        maxBuffer: 64 * 1024 * 1024,
      },
    );
    expect(stdout).not.toContain('${');
    const objects = parseAllDocuments(stdout)
      .map((d) => d.toJS() as Obj | null)
      .filter((o): o is Obj => o !== null);
    const deployment = objects.find((o) => o.kind === 'Deployment') as unknown as {
      spec: { template: { spec: { containers: { image: string; args: string[] }[] } } };
    };
    const container = deployment.spec.template.spec.containers[0];
    expect(container?.image).toBe('registry.example.com/oscar:v0.1.0');
    expect(container?.args).toContain('--namespace=team-a');
    for (const o of objects) {
      expect(o.metadata.labels?.['cluster.x-k8s.io/provider'], o.metadata.name).toBe(
        'bootstrap-oscar',
      );
    }
    expect(objects.filter((o) => o.kind === 'CustomResourceDefinition')).toHaveLength(4);
    // every namespaced object lands in the provider's namespace: the grants outside it are not here
    const namespaces = new Set(
      objects.filter((o) => o.metadata.namespace !== undefined).map((o) => o.metadata.namespace),
    );
    expect([...namespaces]).toEqual(['oscar-system']);

    // the API server takes every object as it is (server-side dry run)
    const ns = await kubectl(['create', 'namespace', 'oscar-system']);
    expect(ns.code === 0 || ns.stderr.includes('AlreadyExists'), ns.stderr).toBe(true);
    const applied = await kubectl(
      ['apply', '--server-side', '--force-conflicts', '--dry-run=server', '-f', '-'],
      { input: stdout },
    );
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stdout).toContain(
      'deployment.apps/oscar-controller serverside-applied (server dry run)',
    );
  });
});
