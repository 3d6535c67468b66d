// vitest globalSetup of the `integration` project: one real etcd + kube-apiserver
// per run (hack/testenv), CRDs applied, torn down when the run ends.
//
// Env:
//   OSCAR_TESTENV_STATE  attach to a cluster started by `hack/testenv/cli.ts start`
//                        (left running at the end) instead of starting one
//   OSCAR_TESTENV_BIN    use these binaries instead of running hack/testenv/build.sh
//   OSCAR_TESTENV_CRDS   apply the CRDs from this directory instead of deploy/crds
//   OSCAR_CACHE          cache root for the built binaries (default ~/.cache/oscar)
//   CI=true              any failure to start the cluster fails the run; outside CI a
//                        missing tool (Go, openssl) only skips the suites, with the reason
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TestProject } from 'vitest/node';
import {
  applyCrds,
  attachTestEnv,
  startTestEnv,
  ToolMissingError,
  type TestEnv,
  type TestEnvInfo,
} from '../../hack/testenv/testenv.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Everything about the running cluster; null when it is unavailable (see testenvUnavailable). */
    testenv: TestEnvInfo | null;
    /** Path of the admin kubeconfig (group system:masters); null when unavailable. */
    kubeconfig: string | null;
    /** Why there is no cluster (only outside CI, only for a missing tool); null when there is one. */
    testenvUnavailable: string | null;
  }
}

const crdDir =
  process.env.OSCAR_TESTENV_CRDS ??
  join(fileURLToPath(new URL('.', import.meta.url)), '..', '..', 'deploy', 'crds');
const log = (msg: string): void => {
  process.stderr.write(`[testenv] ${msg}\n`);
};

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const inCi = process.env.CI === 'true';
  const attachTo = process.env.OSCAR_TESTENV_STATE;
  let env: TestEnv;
  const t0 = Date.now();
  try {
    if (attachTo !== undefined && attachTo !== '') {
      env = await attachTestEnv(attachTo);
      await applyCrds(env.info, crdDir, log);
      log(`attached to ${env.server} (${attachTo}); it stays running after the tests`);
    } else {
      env = await startTestEnv({ crdDir, log });
      log(`cluster ready in ${String(Date.now() - t0)} ms`);
    }
  } catch (err) {
    if (err instanceof ToolMissingError && !inCi) {
      const reason = `no test cluster: ${err.message}`;
      log(`${reason} — integration suites are skipped (with CI=true this is a failure)`);
      project.provide('testenv', null);
      project.provide('kubeconfig', null);
      project.provide('testenvUnavailable', reason);
      return () => Promise.resolve();
    }
    throw err;
  }

  project.provide('testenv', env.info);
  project.provide('kubeconfig', env.kubeconfigPath);
  project.provide('testenvUnavailable', null);

  return async () => {
    if (attachTo !== undefined && attachTo !== '') return;
    const t1 = Date.now();
    await env.stop();
    log(`cluster stopped in ${String(Date.now() - t1)} ms`);
  };
}
