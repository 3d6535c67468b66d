// The on-disk record of one running test cluster. It is the single source of
// truth for which processes belong to the cluster, so any process (vitest's main
// process, a test worker, the CLI) can attach to it, restart the API server or
// tear everything down. Written atomically (temp file + rename).
import { readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findProcesses, isRunning, stopProcess, type ProcRef } from './proc.js';

/** A named static-token identity (from --token-auth-file). */
export interface TokenUser {
  token: string;
  user: string;
  groups: string[];
}

/** Everything a test needs to talk to the cluster; plain JSON (crosses vitest's provide/inject). */
export interface TestEnvInfo {
  /** https://127.0.0.1:<port> */
  server: string;
  /** Admin kubeconfig (client certificate in group system:masters). */
  kubeconfigPath: string;
  caPath: string;
  /** CA key: lets tests mint client certificates for any user/groups. */
  caKeyPath: string;
  pkiDir: string;
  /** Static-token identities by short name (see DEFAULT_TOKEN_USERS). */
  tokenUsers: Record<string, TokenUser>;
  serviceAccountIssuer: string;
  kubectlPath: string;
  binDir: string;
  runDir: string;
  stateFile: string;
  etcdEndpoint: string;
  versions: { kubernetes: string; etcd: string };
}

export interface ServiceState {
  /** null while stopped. */
  ref: ProcRef | null;
  command: string;
  args: string[];
  logPath: string;
}

export interface TestEnvState {
  formatVersion: 1;
  /** Process whose exit means the cluster is abandoned; null = managed by the CLI. */
  owner: ProcRef | null;
  info: TestEnvInfo;
  etcd: ServiceState;
  apiserver: ServiceState;
  /** Garbage collector, namespace and service-account controllers; null when disabled. */
  controllerManager: ServiceState | null;
  /** kube-scheduler, for clusters that run workloads (StartOptions.workloads); else null. */
  scheduler: ServiceState | null;
}

/** All runs live under one root so a later run can find and reap abandoned ones. */
export function runsRoot(): string {
  return join(process.env.OSCAR_TESTENV_RUNS ?? join(tmpdir(), 'oscar-testenv'));
}

export async function readState(stateFile: string): Promise<TestEnvState> {
  const text = await readFile(stateFile, 'utf8');
  const state = JSON.parse(text) as { formatVersion?: unknown };
  if (state.formatVersion !== 1) {
    throw new Error(`${stateFile}: unknown formatVersion ${String(state.formatVersion)}`);
  }
  // Runs recorded before the controller manager (or the scheduler) existed have no entry for it.
  const full = state as Omit<TestEnvState, 'controllerManager' | 'scheduler'> & {
    controllerManager?: ServiceState | null;
    scheduler?: ServiceState | null;
  };
  return {
    ...full,
    controllerManager: full.controllerManager ?? null,
    scheduler: full.scheduler ?? null,
  };
}

export async function writeState(stateFile: string, state: TestEnvState): Promise<void> {
  const tmp = `${stateFile}.${String(process.pid)}.tmp`;
  await writeFile(tmp, JSON.stringify(state, null, 2), { mode: 0o600 });
  await rename(tmp, stateFile);
}

/**
 * Read-modify-write of the state file. Every change after the first write goes
 * through here, never through a copy held in memory: the API server's entry is
 * also changed by other processes (a test worker restarting it).
 */
export async function updateState(
  stateFile: string,
  change: (state: TestEnvState) => void,
): Promise<TestEnvState> {
  const state = await readState(stateFile);
  change(state);
  await writeState(stateFile, state);
  return state;
}

/** Stops every process of a run (controllers, API server, then etcd) and deletes its directory. */
export async function teardownRun(stateFile: string, runDir: string): Promise<void> {
  try {
    const state = await readState(stateFile);
    for (const controller of [state.scheduler, state.controllerManager]) {
      if (controller !== null && controller.ref !== null) await stopProcess(controller.ref);
    }
    // The API server lingers after SIGTERM (see API_SERVER_GRACE_MS in testenv.ts).
    if (state.apiserver.ref !== null) await stopProcess(state.apiserver.ref, 'SIGTERM', 5_000);
    if (state.etcd.ref !== null) await stopProcess(state.etcd.ref);
    // Anything of this run the state file lost track of (a crash between spawn and write).
    for (const ref of await findProcesses(state.info.binDir, `${runDir}/`)) {
      await stopProcess(ref, 'SIGKILL', 5_000);
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  await rm(runDir, { recursive: true, force: true });
}

/**
 * Tears down runs whose owner process has exited (a killed vitest, a crashed
 * run) so their processes and ports never pile up. CLI-managed runs are left alone.
 */
export async function reapAbandonedRuns(log: (msg: string) => void): Promise<void> {
  const root = runsRoot();
  let entries: string[];
  try {
    entries = await readdir(root);
  } catch {
    return;
  }
  for (const name of entries) {
    const runDir = join(root, name);
    const stateFile = join(runDir, 'state.json');
    let state: TestEnvState;
    try {
      state = await readState(stateFile);
    } catch {
      continue; // being created right now, or not ours
    }
    if (state.owner === null || (await isRunning(state.owner))) continue;
    log(
      `reaping abandoned test cluster in ${runDir} (owner pid ${String(state.owner.pid)} is gone)`,
    );
    await teardownRun(stateFile, runDir);
  }
}
