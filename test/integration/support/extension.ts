/**
 * oscar's Cluster API Runtime Extension as the suites run it: as its deploy/extension RBAC identity
 * (the service account oscar-system/oscar-extension), so a test sees exactly what it may touch.
 */
import { readFile } from 'node:fs/promises';
import { expect } from 'vitest';
import { kubeconfigPathFor, kubectl } from './cluster.js';

/** Applies deploy/extension/rbac.yaml; returns a kubeconfig of the extension's identity. */
export async function extensionKubeconfig(): Promise<string> {
  const rbac = await readFile(
    new URL('../../../deploy/extension/rbac.yaml', import.meta.url),
    'utf8',
  );
  const applied = await kubectl(['apply', '-f', '-'], { input: rbac });
  expect(applied.code, applied.stderr).toBe(0);
  return kubeconfigPathFor({
    user: 'system:serviceaccount:oscar-system:oscar-extension',
    groups: ['system:serviceaccounts', 'system:serviceaccounts:oscar-system'],
  });
}
