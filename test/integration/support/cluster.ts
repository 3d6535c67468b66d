// Helpers for integration tests: the cluster global-setup.ts started, kubeconfigs
// for the admin and for limited identities, a fresh namespace per test, kubectl.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { KubeConfig, KubernetesObjectApi } from '@kubernetes/client-node';
import { beforeEach, inject, onTestFinished } from 'vitest';
import {
  attachTestEnv,
  writeKubeconfigFor,
  writeTokenKubeconfigFor,
  type Identity,
  type TestEnv,
  type TestEnvInfo,
} from '../../../hack/testenv/testenv.js';
import { renderKubeconfig } from '../../../hack/testenv/kubeconfig.js';

const execFileP = promisify(execFile);

/** Why there is no cluster (a missing tool outside CI), or null. */
export const clusterUnavailable: string | null = inject('testenvUnavailable');

/**
 * Call at the top of a test file: outside CI, when a tool is missing, every test of
 * the file is skipped with the reason. (With CI=true global setup fails instead.)
 */
export function skipWithoutCluster(): void {
  beforeEach((ctx) => {
    if (clusterUnavailable !== null) ctx.skip(clusterUnavailable);
  });
}

export function testEnvInfo(): TestEnvInfo {
  const info = inject('testenv');
  if (info === null) {
    throw new Error(clusterUnavailable ?? 'the integration global setup provided no cluster');
  }
  return info;
}

/** Full handle (stop/start/restart the API server) from inside a test worker. */
export function testEnv(): Promise<TestEnv> {
  return attachTestEnv(testEnvInfo().stateFile);
}

function loadKubeConfig(path: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(path);
  return kc;
}

/** KubeConfig for the admin (group system:masters). */
export function adminKubeConfig(): KubeConfig {
  return loadKubeConfig(testEnvInfo().kubeconfigPath);
}

/** KubeConfig for any user/groups, authenticated by a fresh client certificate. */
export async function kubeConfigFor(identity: Identity, namespace?: string): Promise<KubeConfig> {
  return loadKubeConfig(await writeKubeconfigFor(testEnvInfo(), identity, namespace));
}

/** The path of a kubeconfig file for any user/groups (a fresh client certificate). */
export function kubeconfigPathFor(identity: Identity, namespace?: string): Promise<string> {
  return writeKubeconfigFor(testEnvInfo(), identity, namespace);
}

/** KubeConfig for a static-token user: "viewer", "nobody", "node-1" (see DEFAULT_TOKEN_USERS). */
export async function tokenKubeConfig(name: string, namespace?: string): Promise<KubeConfig> {
  return loadKubeConfig(await writeTokenKubeconfigFor(testEnvInfo(), name, namespace));
}

/** KubeConfig that authenticates with any bearer token (e.g. from TokenRequest). */
export async function bearerKubeConfig(token: string): Promise<KubeConfig> {
  const info = testEnvInfo();
  const kc = new KubeConfig();
  kc.loadFromString(
    renderKubeconfig({
      name: 'bearer',
      server: info.server,
      caPem: await readFile(info.caPath, 'utf8'),
      credentials: { kind: 'token', token },
    }),
  );
  return kc;
}

/** A DNS-label name that no other test uses. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString('hex')}`.toLowerCase().slice(0, 63);
}

/**
 * Creates a namespace for the current test and deletes it when the test ends
 * (the namespace controller then removes everything in it, in the background).
 */
export async function createTestNamespace(prefix = 'test'): Promise<string> {
  const name = uniqueName(prefix);
  const objects = KubernetesObjectApi.makeApiClient(adminKubeConfig());
  const ns = { apiVersion: 'v1', kind: 'Namespace', metadata: { name } };
  await objects.create(ns);
  onTestFinished(async () => {
    await objects.delete(ns);
  });
  return name;
}

export interface KubectlResult {
  stdout: string;
  stderr: string;
  code: number;
}

/** Runs the kubectl built with the API server (same release); never throws on a non-zero exit. */
export async function kubectl(
  args: readonly string[],
  opts: { kubeconfig?: string; input?: string } = {},
): Promise<KubectlResult> {
  const info = testEnvInfo();
  const full = ['--kubeconfig', opts.kubeconfig ?? info.kubeconfigPath, ...args];
  const child = execFileP(info.kubectlPath, full, { maxBuffer: 16 * 1024 * 1024 });
  child.child.stdin?.end(opts.input ?? '');
  try {
    const { stdout, stderr } = await child;
    return { stdout, stderr, code: 0 };
  } catch (err) {
    const e = err as Error & { stdout?: string; stderr?: string; code?: number | string };
    if (typeof e.code !== 'number') throw err;
    return { stdout: e.stdout ?? '', stderr: e.stderr ?? '', code: e.code };
  }
}

/**
 * Creates a namespace for a whole suite (beforeAll); `remove` in afterAll deletes it without
 * waiting. Throws with kubectl's message when the API server refuses.
 */
export async function createSuiteNamespace(
  prefix: string,
): Promise<{ name: string; remove: () => Promise<void> }> {
  const name = uniqueName(prefix);
  const created = await kubectl(['create', 'namespace', name]);
  if (created.code !== 0) throw new Error(created.stderr);
  return {
    name,
    remove: async () => {
      await kubectl(['delete', 'namespace', name, '--wait=false']);
    },
  };
}
