// The real Cluster API core manager (built by hack/capi/build.sh) against the test cluster: its
// CRDs applied, a throw-away self-signed webhook serving pair (no cert-manager; the webhooks are
// served but not registered, so tests set what the defaulting webhooks would), no leader election.
// Plus a test-only infrastructure provider: CRDs for TestMachine / TestMachineTemplate that only
// exist so Machines and MachineDeployments can name an infrastructure object.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '../../hack/testenv/proc.js';
import type { TestEnvInfo } from '../../hack/testenv/testenv.js';
import { loopbackServingCert } from './serving-cert.js';
import { isCI, repoRoot } from './tools.js';
import { waitFor } from './wait.js';

const execFileP = promisify(execFile);

export const INFRA_GROUP = 'infrastructure.test.oscar.dev';

/** Runs hack/capi/build.sh (instant when cached); its output directory, or why not. */
export async function buildCapi(): Promise<{ dir: string } | { missing: string }> {
  try {
    const { stdout } = await execFileP('bash', [join(repoRoot, 'hack', 'capi', 'build.sh')], {
      maxBuffer: 16 * 1024 * 1024,
    });
    return { dir: stdout.trim().split('\n').pop() ?? '' };
  } catch (error) {
    const e = error as Error & { code?: number; stderr?: string };
    if (e.code === 3 && !isCI()) return { missing: e.stderr ?? 'go is missing' };
    throw new Error(`hack/capi/build.sh failed: ${e.stderr ?? e.message}`, { cause: error });
  }
}

function infraCrd(kind: string): Record<string, unknown> {
  const plural = `${kind.toLowerCase()}s`;
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name: `${plural}.${INFRA_GROUP}`,
      labels: { 'cluster.x-k8s.io/v1beta2': 'v1alpha1' },
    },
    spec: {
      group: INFRA_GROUP,
      names: { kind, listKind: `${kind}List`, plural, singular: kind.toLowerCase() },
      scope: 'Namespaced',
      versions: [
        {
          name: 'v1alpha1',
          served: true,
          storage: true,
          subresources: { status: {} },
          schema: {
            openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
          },
        },
      ],
    },
  };
}

export interface CapiManager {
  logs(): string;
  stop(): Promise<void>;
}

async function kubectl(info: TestEnvInfo, args: string[], input?: string): Promise<string> {
  const child = execFileP(info.kubectlPath, ['--kubeconfig', info.kubeconfigPath, ...args], {
    maxBuffer: 64 * 1024 * 1024,
  });
  child.child.stdin?.end(input ?? '');
  return (await child).stdout;
}

/**
 * Cluster API's and the test infrastructure's CRDs, Established: enough for tests that drive the
 * extension themselves (Machines as objects, no manager).
 */
export async function applyCapiCrds(info: TestEnvInfo, capiDir: string): Promise<void> {
  const crds = (await readdir(join(capiDir, 'crds'))).filter((f) => f.endsWith('.yaml'));
  await kubectl(info, [
    'apply',
    '--server-side',
    '--force-conflicts',
    ...crds.flatMap((f) => ['-f', join(capiDir, 'crds', f)]),
  ]);
  await kubectl(
    info,
    ['apply', '--server-side', '--force-conflicts', '-f', '-'],
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'List',
      items: [infraCrd('TestMachine'), infraCrd('TestMachineTemplate')],
    }),
  );
  await kubectl(info, [
    'wait',
    '--for=condition=Established',
    '--timeout=60s',
    'crd',
    '-l',
    'cluster.x-k8s.io/v1beta2',
  ]);
}

/** Applies Cluster API's and the test infrastructure's CRDs, then starts the manager. */
export async function startCapi(info: TestEnvInfo, capiDir: string): Promise<CapiManager> {
  await applyCapiCrds(info, capiDir);
  const dir = await mkdtemp(join(tmpdir(), 'oscar-capi-'));
  // the manager serves its webhooks with tls.crt/tls.key from --webhook-cert-dir (the CA beside)
  await mkdir(join(dir, 'pki'));
  const serving = await loopbackServingCert(join(dir, 'pki'));
  await writeFile(join(dir, 'tls.crt'), serving.cert);
  await writeFile(join(dir, 'tls.key'), serving.key, { mode: 0o600 });
  await writeFile(join(dir, 'manager.log'), '');
  const [webhookPort, healthPort, diagnosticsPort] = [
    await freePort('127.0.0.1'),
    await freePort('127.0.0.1'),
    await freePort('127.0.0.1'),
  ];
  let output = '';
  const child: ChildProcess = spawn(
    join(capiDir, 'bin', 'manager'),
    [
      `--kubeconfig=${info.kubeconfigPath}`,
      '--leader-elect=false',
      `--webhook-cert-dir=${dir}`,
      `--webhook-port=${String(webhookPort)}`,
      `--health-addr=127.0.0.1:${String(healthPort)}`,
      `--diagnostics-address=127.0.0.1:${String(diagnosticsPort)}`,
      '--insecure-diagnostics=true',
      '--feature-gates=RuntimeSDK=true,InPlaceUpdates=true,ClusterTopology=false,MachinePool=false',
      '--sync-period=10m',
      '--v=2',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const collect = (d: Buffer): void => {
    output += d.toString();
    if (output.length > 4_000_000) output = output.slice(-2_000_000);
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => {
      resolve();
    });
  });
  // an exited manager ends the wait at once (its log says why); otherwise poll /readyz
  const readyOrExited = async (): Promise<'ready' | 'exited' | false> => {
    if (child.exitCode !== null) return 'exited';
    return (await fetch(`http://127.0.0.1:${String(healthPort)}/readyz`)).ok && 'ready';
  };
  let state: 'ready' | 'exited';
  try {
    state = await waitFor('the Cluster API manager to be ready', readyOrExited, {
      timeoutMs: 120_000,
      intervalMs: 250,
      onTimeout: () => output.slice(-4000),
    });
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  }
  if (state === 'exited') {
    throw new Error(
      `the Cluster API manager exited (${String(child.exitCode)}):\n${output.slice(-4000)}`,
    );
  }
  return {
    logs: () => output,
    stop: async () => {
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(killer);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The Cluster API manager for a suite: built (cached) and started against `info`'s cluster, or
 * the reason to skip (Go missing outside CI; with CI=true buildCapi fails instead).
 */
export async function startCapiManager(
  info: TestEnvInfo,
): Promise<{ manager: CapiManager } | { skip: string }> {
  const built = await buildCapi();
  if ('missing' in built) return { skip: `no Cluster API manager: ${built.missing}` };
  return { manager: await startCapi(info, built.dir) };
}
