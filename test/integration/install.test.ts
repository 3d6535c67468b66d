// The install path an operator takes, for real: `npm run image` builds the image, `kubectl apply -k
// deploy/` installs CRDs, RBAC and the Deployment into the test cluster, and the image runs (with
// podman) as that Deployment's pod would: as its own user with a read-only root file system, no
// capabilities, the Deployment's own arguments and the ServiceAccount's token mounted where
// Kubernetes mounts it. An OperatingSystemConfig then becomes Ready.
//
// The test cluster has no kubelet, so podman plays the kubelet's part. Two deviations from the
// pod, both forced by running on the host: the container shares the host's network (the API
// server listens on the host's loopback), so --metrics-addr moves to a free loopback port.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot, requireTools } from '../support/tools.js';
import { kubectl, skipWithoutCluster, testEnvInfo, uniqueName } from './support/cluster.js';
import { Api, waitFor } from './controller-support.js';
import type { OperatingSystemConfigSpec } from '../../api/schema.js';

const execFileP = promisify(execFile);
skipWithoutCluster();

const haveTools = requireTools(['buildah', 'podman', 'runc', 'strip']);

// crun 1.8 (Debian 12) refuses cgroups in hybrid mode, which this kind of machine has; runc
// works. Podman's default ulimits exceed what this sandbox may raise, so they are set to the
// values a kubelet gives a container by default.
const PODMAN_RUN = [
  '--runtime',
  'runc',
  'run',
  '--ulimit',
  'nofile=1024:4096',
  '--ulimit',
  'nproc=1024:1024',
];

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => {
        if (addr && typeof addr === 'object') resolve(addr.port);
        else reject(new Error('no port'));
      });
    });
  });
}

async function run(cmd: string, args: string[]): Promise<string> {
  const { stdout } = await execFileP(cmd, args, { maxBuffer: 64 * 1024 * 1024, cwd: repoRoot });
  return stdout;
}

interface Container {
  name: string;
  args?: string[];
  env?: { name: string; value?: string }[];
  image: string;
}

describe.runIf(haveTools)('install: the image and `kubectl apply -k deploy/`', () => {
  let image = '';
  let work = '';
  const container = uniqueName('oscar-controller');

  beforeAll(async () => {
    image = (await run('bash', ['hack/image/build.sh'])).trim();
    work = await mkdtemp(join(tmpdir(), 'oscar-install-'));
  }, 300_000);

  afterAll(async () => {
    await execFileP('podman', ['rm', '--force', '--time', '5', container]).catch(() => undefined);
    await kubectl(['delete', 'namespace', 'oscar-system', '--wait=false']);
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('builds a non-root image that runs with nothing but its own files', async () => {
    const config = JSON.parse(
      await run('podman', ['image', 'inspect', '--format', '{{json .Config}}', image]),
    ) as { User?: string; Entrypoint?: string[] };
    expect(config.User).toBe('65532:65532');
    expect(config.Entrypoint).toEqual(['/usr/local/bin/node', '/app/oscar.mjs']);
    const out = await run('podman', [
      ...PODMAN_RUN,
      '--rm',
      '--read-only',
      '--network',
      'none',
      image,
      'version',
    ]);
    expect(out).toContain('0.1.0');
  });

  it('installs with kubectl apply -k, and the Deployment runs the image to a Ready OSC', async () => {
    const applied = await kubectl(['apply', '-k', join(repoRoot, 'deploy')]);
    // The suite's global setup installed the CRDs already (server-side apply), which client-side
    // apply notes once per CRD; an empty cluster prints nothing here.
    const warnings = applied.stderr
      .split('\n')
      .filter((l) => l !== '' && !l.includes('missing the kubectl.kubernetes.io/last-applied'));
    expect(warnings).toEqual([]);
    expect(applied.code).toBe(0);
    expect(applied.stdout).toContain('deployment.apps/oscar-controller');

    const deployment = JSON.parse(
      (await kubectl(['get', 'deployment', 'oscar-controller', '-n', 'oscar-system', '-o', 'json']))
        .stdout,
    ) as { spec: { template: { spec: { serviceAccountName: string; containers: Container[] } } } };
    const pod = deployment.spec.template.spec;
    const [ctr] = pod.containers;
    expect(ctr?.image).toBe(image); // kustomize's images: maps `oscar` to what npm run image built

    // What the kubelet would mount: a token of the pod's ServiceAccount, the cluster CA, the
    // namespace, at the path every in-cluster client reads.
    const token = await kubectl([
      'create',
      'token',
      pod.serviceAccountName,
      '-n',
      'oscar-system',
      '--duration=1h',
    ]);
    expect(token.code).toBe(0);
    const sa = join(work, 'serviceaccount');
    await execFileP('mkdir', ['-p', sa]);
    await writeFile(join(sa, 'token'), token.stdout.trim());
    await writeFile(join(sa, 'ca.crt'), await readFile(testEnvInfo().caPath));
    await writeFile(join(sa, 'namespace'), 'oscar-system');
    await execFileP('chmod', ['-R', 'a+rX', work]);

    const port = await freePort();
    const args = (ctr?.args ?? []).map((a) =>
      a.startsWith('--metrics-addr=') ? `--metrics-addr=127.0.0.1:${String(port)}` : a,
    );
    const server = new URL(testEnvInfo().server);
    const env = ['POD_NAMESPACE=oscar-system'];
    for (const e of ctr?.env ?? []) if (e.value !== undefined) env.push(`${e.name}=${e.value}`);
    await run('podman', [
      ...PODMAN_RUN,
      '--detach',
      '--name',
      container,
      '--read-only',
      '--cap-drop=all',
      '--security-opt=no-new-privileges',
      '--network',
      'host',
      '-v',
      `${sa}:/var/run/secrets/kubernetes.io/serviceaccount:ro`,
      '-e',
      `KUBERNETES_SERVICE_HOST=${server.hostname}`,
      '-e',
      `KUBERNETES_SERVICE_PORT=${server.port}`,
      ...env.flatMap((e) => ['-e', e]),
      image,
      ...args,
    ]);

    const logs = async (): Promise<string> => {
      const r = (await execFileP('podman', ['logs', container]).catch((e: unknown) => e)) as {
        stdout?: string;
        stderr?: string;
      };
      return `${r.stdout ?? ''}${r.stderr ?? ''}`;
    };
    try {
      await waitFor(
        'the controller in the image to become ready',
        async () => (await fetch(`http://127.0.0.1:${String(port)}/readyz`)).ok,
        60_000,
      );

      const name = uniqueName('installed');
      const spec = (
        parse(await readFile(join(repoRoot, 'examples/generic.yaml'), 'utf8')) as {
          spec: OperatingSystemConfigSpec;
        }
      ).spec;
      const api = new Api();
      await api.applyOsc('default', name, spec);
      const osc = await waitFor(
        'the OSC to be Ready',
        async () => {
          const o = await api.getOsc('default', name);
          const ready = o?.status?.conditions?.find((c) => c.type === 'Ready');
          return ready?.status === 'True' ? o : undefined;
        },
        60_000,
      );
      expect(osc.status?.secretRef?.name).toBeTruthy();
      const secret = await api.getSecret('default', osc.status?.secretRef?.name ?? '');
      expect(secret?.metadata.annotations?.['oscar.dev/checksum']).toBe(osc.status?.checksum);
      await api.deleteOsc('default', name);

      // Kubernetes stops a pod with SIGTERM, then SIGKILL after terminationGracePeriodSeconds
      // (30 s in deploy/): exit status 0 means it stopped by itself, not killed (137).
      await run('podman', ['stop', '--time', '30', container]);
      const state = JSON.parse(
        await run('podman', ['inspect', '--format', '{{json .State}}', container]),
      ) as { ExitCode: number };
      expect(state.ExitCode, await logs()).toBe(0);
    } catch (error) {
      process.stderr.write(`--- controller container logs ---\n${await logs()}\n`);
      throw error;
    }
  }, 240_000);
});
