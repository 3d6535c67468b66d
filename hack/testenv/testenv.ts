// A real, throw-away Kubernetes control plane for the integration suites: etcd,
// kube-apiserver and kube-controller-manager (garbage collector, namespace and
// service-account controllers), built from pinned Go modules by build.sh; secure serving
// with a generated CA, Node+RBAC authorization, service-account token signing,
// an admin kubeconfig, a few static-token users, and the project's CRDs applied.
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { TestPki, type Identity } from './certs.js';
import { renderKubeconfig } from './kubeconfig.js';
import { freePort, procStartTime, startDetached, stopProcess, tail } from './proc.js';
import {
  reapAbandonedRuns,
  readState,
  runsRoot,
  teardownRun,
  updateState,
  writeState,
  type ServiceState,
  type TestEnvInfo,
  type TestEnvState,
  type TokenUser,
} from './state.js';

export type { Identity } from './certs.js';
export type { TestEnvInfo, TokenUser } from './state.js';

const execFileP = promisify(execFile);

/** A required tool (Go, openssl) is not installed: the only case a local run may skip. */
export class ToolMissingError extends Error {
  override name = 'ToolMissingError';
}

/** Static-token identities every cluster gets; none has any RBAC binding of its own. */
export const DEFAULT_TOKEN_USERS: Record<string, Omit<TokenUser, 'token'>> = {
  viewer: { user: 'oscar-viewer', groups: ['oscar:viewers'] },
  nobody: { user: 'oscar-nobody', groups: [] },
  'node-1': { user: 'system:node:node-1', groups: ['system:nodes'] },
};

export interface StartOptions {
  /** Directory whose *.yaml CRDs are applied and awaited; null = none. Default: <repo>/deploy/crds. */
  crdDir?: string | null;
  /** Process whose exit abandons the cluster (reaped by the next start); null = CLI-managed. Default: this process. */
  ownerPid?: number | null;
  /** Address everything listens on. Default 127.0.0.1. */
  host?: string;
  /** Extra subjectAltNames (IPs or DNS names) for the serving certificate. */
  extraSans?: string[];
  /**
   * Run kube-controller-manager with the garbage-collector, namespace and
   * service-account controllers (owner-reference cleanup, namespace deletion,
   * "default" ServiceAccounts) — what a real cluster does. Default true.
   */
  controllers?: boolean;
  /**
   * Also run what turns a Deployment into running pods: kube-scheduler (built by
   * `build.sh --node`, with the node binaries) and the deployment, replicaset,
   * root-ca-certificate-publisher and node-lifecycle controllers. Default false: the suites without nodes need none of it.
   */
  workloads?: boolean;
  /** Additional static-token users by short name. */
  tokenUsers?: Record<string, Omit<TokenUser, 'token'>>;
  /** Use binaries from here instead of running build.sh. Default: $OSCAR_TESTENV_BIN or build.sh. */
  binDir?: string;
  /** How long to wait for etcd / the API server to become ready. Default 120 s. */
  readyTimeoutMs?: number;
  log?: (msg: string) => void;
}

export interface TestEnv extends TestEnvInfo {
  readonly info: TestEnvInfo;
  /** Stops the API server and etcd and deletes all data. Safe to call twice. */
  stop(): Promise<void>;
  /** Stops only the API server (etcd keeps its data); SIGKILL simulates a crash. */
  stopApiServer(opts?: { signal?: NodeJS.Signals }): Promise<void>;
  /** Starts the API server again on the same port and waits for /readyz. */
  startApiServer(): Promise<void>;
  restartApiServer(opts?: { signal?: NodeJS.Signals }): Promise<void>;
  /**
   * Freezes the API server (SIGSTOP) or thaws it (SIGCONT): its port stays open and connections
   * are accepted by the kernel, but nothing answers — an API server that hangs, not one that is
   * gone. Always thaw it again.
   */
  pauseApiServer(paused: boolean): Promise<void>;
  /** Writes a kubeconfig for any user/groups (a fresh client certificate); returns its path. */
  writeKubeconfig(identity: Identity, namespace?: string): Promise<string>;
  /** Writes a kubeconfig for a named static-token user; returns its path. */
  writeTokenKubeconfig(name: string, namespace?: string): Promise<string>;
}

// kube-apiserver stops listening as soon as it gets SIGTERM, but its process then
// lingers on open connections for up to a minute; nothing is lost by SIGKILL after this.
export const API_SERVER_GRACE_MS = 5_000;

const here = fileURLToPath(new URL('.', import.meta.url));
const repoRoot = join(here, '..', '..');
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Runs build.sh (instant when cached) and returns the bin directory it prints; `node` builds the
 * node binaries too (kubelet, kubeadm, kube-scheduler: `build.sh --node`).
 */
export async function buildBinaries(log: (msg: string) => void, node = false): Promise<string> {
  const fromEnv = process.env.OSCAR_TESTENV_BIN;
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
  const args = [join(here, 'build.sh'), ...(node ? ['--node'] : [])];
  return new Promise((resolve, reject) => {
    const child = spawn('bash', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => {
      err += d.toString();
      for (const line of d.toString().trimEnd().split('\n')) log(line);
    });
    child.once('error', reject);
    child.once('close', (code) => {
      if (code === 0) {
        resolve(out.trim().split('\n').pop() ?? '');
      } else if (code === 3) {
        reject(new ToolMissingError(err.trim()));
      } else {
        reject(new Error(`hack/testenv/build.sh failed (exit ${String(code)}):\n${err.trim()}`));
      }
    });
  });
}

async function readVersions(): Promise<{ kubernetes: string; etcd: string }> {
  const mod = await readFile(join(here, 'go.mod'), 'utf8');
  const pick = (path: string): string => {
    const m = new RegExp(`^\\s*${path.replace(/\./g, '\\.')}\\s+(v\\S+)`, 'm').exec(mod);
    if (m?.[1] === undefined) throw new Error(`hack/testenv/go.mod does not pin ${path}`);
    return m[1];
  };
  return { kubernetes: pick('k8s.io/kubernetes'), etcd: pick('go.etcd.io/etcd/server/v3') };
}

interface TlsClient {
  ca: string;
  cert: string;
  key: string;
}

/** Status code of a GET, or undefined when the connection fails (not up yet). */
function getStatus(url: string, tls?: TlsClient): Promise<number | undefined> {
  return new Promise((resolve) => {
    const req = (tls === undefined ? httpRequest : httpsRequest)(
      url,
      { method: 'GET', timeout: 5_000, ...(tls ?? {}) },
      (res) => {
        res.resume();
        resolve(res.statusCode);
      },
    );
    req.once('error', () => {
      resolve(undefined);
    });
    req.once('timeout', () => {
      req.destroy();
    });
    req.end();
  });
}

async function waitReady(
  what: string,
  url: string,
  tls: TlsClient | undefined,
  ref: { pid: number; startTime: string },
  logPath: string,
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if ((await getStatus(url, tls)) === 200) return;
    if ((await procStartTime(ref.pid)) !== ref.startTime) {
      throw new Error(
        `${what} exited before it became ready. Last log lines (${logPath}):\n${await tail(logPath)}`,
      );
    }
    if (Date.now() > deadline) {
      throw new Error(
        `${what} was not ready at ${url} after ${String(timeoutMs / 1000)} s. Last log lines (${logPath}):\n${await tail(logPath)}`,
      );
    }
    await sleep(100);
  }
}

async function adminTls(info: TestEnvInfo): Promise<TlsClient> {
  const [ca, cert, key] = await Promise.all([
    readFile(info.caPath, 'utf8'),
    readFile(join(info.pkiDir, 'admin.crt'), 'utf8'),
    readFile(join(info.pkiDir, 'admin.key'), 'utf8'),
  ]);
  return { ca, cert, key };
}

/** Writes a kubeconfig with a fresh client certificate for `identity`; returns its path. */
export async function writeKubeconfigFor(
  info: TestEnvInfo,
  identity: Identity,
  namespace?: string,
): Promise<string> {
  const pki = new TestPki(info.pkiDir);
  const id = `client-${randomBytes(6).toString('hex')}`;
  const pair = await pki.issueClient(id, identity);
  const [caPem, certPem, keyPem] = await Promise.all([
    readFile(info.caPath, 'utf8'),
    readFile(pair.certPath, 'utf8'),
    readFile(pair.keyPath, 'utf8'),
  ]);
  const path = join(info.runDir, 'kubeconfigs', `${id}.yaml`);
  await writeFile(
    path,
    renderKubeconfig({
      name: identity.user,
      server: info.server,
      caPem,
      credentials: { kind: 'clientCert', certPem, keyPem },
      ...(namespace === undefined ? {} : { namespace }),
    }),
    { mode: 0o600 },
  );
  return path;
}

/** Writes a kubeconfig for one of the cluster's static-token users; returns its path. */
export async function writeTokenKubeconfigFor(
  info: TestEnvInfo,
  name: string,
  namespace?: string,
): Promise<string> {
  const tu = info.tokenUsers[name];
  if (tu === undefined) {
    throw new Error(
      `no static-token user ${JSON.stringify(name)}; known: ${Object.keys(info.tokenUsers).join(', ')}`,
    );
  }
  const caPem = await readFile(info.caPath, 'utf8');
  const path = join(
    info.runDir,
    'kubeconfigs',
    `token-${name}-${randomBytes(4).toString('hex')}.yaml`,
  );
  await writeFile(
    path,
    renderKubeconfig({
      name: tu.user,
      server: info.server,
      caPem,
      credentials: { kind: 'token', token: tu.token },
      ...(namespace === undefined ? {} : { namespace }),
    }),
    { mode: 0o600 },
  );
  return path;
}

/**
 * Waits until every CRD's resources can be listed. Established (and /readyz after a restart) is not
 * yet servable: a custom resource's storage may still answer 429 "storage is (re)initializing".
 */
async function waitCrdsServed(info: TestEnvInfo, timeoutMs = 60_000): Promise<void> {
  const run = (args: string[]) =>
    execFileP(info.kubectlPath, ['--kubeconfig', info.kubeconfigPath, ...args]);
  const deadline = Date.now() + timeoutMs;
  const names = (await run(['get', 'crd', '-o', 'jsonpath={.items[*].metadata.name}'])).stdout
    .split(/\s+/)
    .filter(Boolean);
  for (const name of names) {
    for (;;) {
      try {
        await run(['get', name, '--all-namespaces', '--request-timeout=5s']);
        break;
      } catch (err) {
        if (Date.now() > deadline) throw new Error(`${name} is not served`, { cause: err });
        await new Promise((r) => setTimeout(r, 250));
      }
    }
  }
}

/**
 * Applies every *.yaml in crdDir (but its kustomization.yaml, which only lists them) and waits
 * until each CRD is Established and served.
 */
export async function applyCrds(
  info: TestEnvInfo,
  crdDir: string,
  log: (m: string) => void,
): Promise<void> {
  let files: string[];
  try {
    files = (await readdir(crdDir)).filter(
      (f) => (f.endsWith('.yaml') || f.endsWith('.yml')) && f !== 'kustomization.yaml',
    );
  } catch {
    files = [];
  }
  if (files.length === 0) {
    log(`no CRDs in ${crdDir}; none applied`);
    return;
  }
  const kubectl = async (args: string[]): Promise<void> => {
    try {
      await execFileP(info.kubectlPath, ['--kubeconfig', info.kubeconfigPath, ...args]);
    } catch (err) {
      const e = err as Error & { stderr?: string };
      throw new Error(`kubectl ${args.join(' ')} failed: ${e.stderr ?? e.message}`, { cause: err });
    }
  };
  const paths = files.sort().flatMap((f) => ['-f', join(crdDir, f)]);
  await kubectl([
    'apply',
    '--server-side',
    '--force-conflicts',
    '--field-manager=oscar-testenv',
    ...paths,
  ]);
  await kubectl(['wait', '--for=condition=Established', '--timeout=60s', ...paths]);
  await waitCrdsServed(info);
  log(`applied, Established and served: ${files.join(', ')}`);
}

function apiServerArgs(
  host: string,
  port: number,
  etcdEndpoint: string,
  runDir: string,
  issuer: string,
): string[] {
  const pki = join(runDir, 'pki');
  return [
    `--etcd-servers=${etcdEndpoint}`,
    `--bind-address=${host}`,
    `--advertise-address=${host}`,
    // The endpoint reconciler refuses loopback addresses; nothing here needs the
    // in-cluster "kubernetes" Service endpoints, so leave them unmanaged.
    '--endpoint-reconciler-type=none',
    `--secure-port=${String(port)}`,
    `--tls-cert-file=${join(pki, 'apiserver.crt')}`,
    `--tls-private-key-file=${join(pki, 'apiserver.key')}`,
    // Client certificates signed by the test CA authenticate users (CN) and groups (O).
    `--client-ca-file=${join(pki, 'ca.crt')}`,
    `--token-auth-file=${join(runDir, 'tokens.csv')}`,
    // Bootstrap tokens (Secrets of type bootstrap.kubernetes.io/token in kube-system) authenticate
    // as system:bootstrap:<id>: the per-machine credential OscarConfigs issue.
    '--enable-bootstrap-token-auth',
    '--authorization-mode=Node,RBAC',
    '--enable-admission-plugins=NodeRestriction',
    `--service-account-issuer=${issuer}`,
    `--service-account-key-file=${join(pki, 'sa.pub')}`,
    `--service-account-signing-key-file=${join(pki, 'sa.key')}`,
    '--service-cluster-ip-range=10.0.0.0/24',
    // OSCAR_TESTENV_PROFILING=1 serves /debug/pprof, to show where the API server's own time
    // goes when a benchmark finds it is the limit.
    `--profiling=${process.env.OSCAR_TESTENV_PROFILING === '1' ? 'true' : 'false'}`,
    '--v=1',
  ];
}

/** Controllers a cluster with workloads adds (StartOptions.workloads). */
const WORKLOAD_CONTROLLERS = [
  'deployment-controller',
  'replicaset-controller',
  // kube-root-ca.crt in every namespace: each pod's service-account volume projects it
  'root-ca-certificate-publisher-controller',
  // lifts the node.kubernetes.io/not-ready taint a new Node gets at admission once it is Ready
  // (the scheduler binds no pod to a tainted Node); no taint-eviction-controller: a Node that
  // reboots keeps its pods, as drains are oscar's to do
  'node-lifecycle-controller',
];

function controllerManagerArgs(runDir: string, workloads: boolean): string[] {
  const controllers = [
    'garbage-collector-controller',
    'namespace-controller',
    'serviceaccount-controller',
    'token-cleaner-controller',
    'bootstrap-signer-controller',
    'certificatesigningrequest-signing-controller',
    'clusterrole-aggregation-controller',
    'disruption-controller',
    ...(workloads ? WORKLOAD_CONTROLLERS : []),
  ];
  return [
    `--kubeconfig=${join(runDir, 'kube-controller-manager.kubeconfig')}`,
    // token-cleaner deletes expired bootstrap tokens; certificatesigningrequest-signing signs
    // approved CSRs with the test CA (which the API server trusts for client certificates), so a
    // node's agent can trade its bootstrap token for a client certificate; clusterrole-aggregation
    // fills aggregated ClusterRoles (Cluster API's manager role gathers providers' rules so);
    // disruption keeps PodDisruptionBudgets' status, which the Eviction API enforces (drains);
    // bootstrap-signer signs kube-public/cluster-info for tokens with usage-bootstrap-signing, the
    // discovery `kubeadm join` verifies (a no-op until kubeadm's cluster-info exists). The CSR
    // approver (csrapproving) stays off: kubelet certificates are oscar's approver's alone.
    `--controllers=${controllers.join(',')}`,
    `--cluster-signing-cert-file=${join(runDir, 'pki', 'ca.crt')}`,
    `--cluster-signing-key-file=${join(runDir, 'pki', 'ca.key')}`,
    // Each controller gets its own ServiceAccount token (TokenRequest), as in kubeadm
    // clusters, so it acts with its bootstrap role rather than one broad identity.
    '--use-service-account-credentials=true',
    `--root-ca-file=${join(runDir, 'pki', 'ca.crt')}`,
    '--leader-elect=false',
    // No metrics/health endpoint needed: nothing listens, no port to collide.
    '--secure-port=0',
    '--v=1',
  ];
}

function schedulerArgs(runDir: string): string[] {
  return [
    `--kubeconfig=${join(runDir, 'kube-scheduler.kubeconfig')}`,
    // Leader election with one instance takes the Lease at once: its existence shows the
    // scheduler is up (nothing else of it is visible, it serves no port here).
    '--leader-elect=true',
    '--secure-port=0',
    '--v=1',
  ];
}

/** The scheduler holds kube-system/kube-scheduler once it runs. */
const SCHEDULER_LEASE = '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler';

/** Writes kube-scheduler's kubeconfig, starts it and waits for its Lease. */
async function startScheduler(
  info: TestEnvInfo,
  sched: ServiceState,
  timeoutMs: number,
  log: (msg: string) => void,
): Promise<void> {
  const t0 = Date.now();
  await new TestPki(info.pkiDir).issueClient('kube-scheduler', { user: 'system:kube-scheduler' });
  await writeCertKubeconfig(
    info,
    join(info.runDir, 'kube-scheduler.kubeconfig'),
    'kube-scheduler',
    'kube-scheduler',
  );
  const ref = await startDetached(sched.command, sched.args, sched.logPath);
  await updateState(info.stateFile, (s) => {
    if (s.scheduler !== null) s.scheduler.ref = ref;
  });
  await waitReady(
    'kube-scheduler',
    `${info.server}${SCHEDULER_LEASE}`,
    await adminTls(info),
    ref,
    sched.logPath,
    timeoutMs,
  );
  log(`kube-scheduler running in ${String(Date.now() - t0)} ms`);
}

/** kube-scheduler's entry in the state, or why this bin directory cannot give one. */
function schedulerState(binDir: string, runDir: string): ServiceState {
  const command = join(binDir, 'kube-scheduler');
  if (!existsSync(command)) {
    throw new ToolMissingError(
      `${command} is missing; workloads need it: run hack/testenv/build.sh --node`,
    );
  }
  return {
    ref: null,
    command,
    args: schedulerArgs(runDir),
    logPath: join(runDir, 'kube-scheduler.log'),
  };
}

/** Writes a kubeconfig for a client certificate already issued as pki/<certName>.{crt,key}. */
async function writeCertKubeconfig(
  info: TestEnvInfo,
  path: string,
  name: string,
  certName: string,
): Promise<void> {
  const [caPem, certPem, keyPem] = await Promise.all([
    readFile(info.caPath, 'utf8'),
    readFile(join(info.pkiDir, `${certName}.crt`), 'utf8'),
    readFile(join(info.pkiDir, `${certName}.key`), 'utf8'),
  ]);
  await writeFile(
    path,
    renderKubeconfig({
      name,
      server: info.server,
      caPem,
      credentials: { kind: 'clientCert', certPem, keyPem },
    }),
    { mode: 0o600 },
  );
}

/** Starts etcd, kube-apiserver and the controllers, writes kubeconfigs, applies the CRDs. */
export async function startTestEnv(opts: StartOptions = {}): Promise<TestEnv> {
  const log = opts.log ?? ((): void => undefined);
  const host = opts.host ?? '127.0.0.1';
  const readyTimeoutMs = opts.readyTimeoutMs ?? 120_000;
  const crdDir = opts.crdDir === undefined ? join(repoRoot, 'deploy', 'crds') : opts.crdDir;

  await reapAbandonedRuns(log);
  const binDir = opts.binDir ?? (await buildBinaries(log, opts.workloads === true));
  const versions = await readVersions();

  await mkdir(runsRoot(), { recursive: true });
  const runDir = await mkdtemp(join(runsRoot(), 'run-'));
  const stateFile = join(runDir, 'state.json');
  const pkiDir = join(runDir, 'pki');
  await Promise.all(
    ['pki', 'etcd', 'kubeconfigs'].map((d) => mkdir(join(runDir, d), { mode: 0o700 })),
  );

  const ownerPid = opts.ownerPid === undefined ? process.pid : opts.ownerPid;
  let owner = null;
  if (ownerPid !== null) {
    const startTime = await procStartTime(ownerPid);
    if (startTime === undefined) throw new Error(`ownerPid ${String(ownerPid)} is not running`);
    owner = { pid: ownerPid, startTime };
  }

  const [etcdClientPort, etcdPeerPort, apiPort] = [
    await freePort(host),
    await freePort(host),
    await freePort(host),
  ];
  const etcdEndpoint = `http://${host}:${String(etcdClientPort)}`;
  const server = `https://${host}:${String(apiPort)}`;
  const issuer = 'https://kubernetes.default.svc.cluster.local';

  const tokenUsers: Record<string, TokenUser> = {};
  for (const [name, u] of Object.entries({ ...DEFAULT_TOKEN_USERS, ...opts.tokenUsers })) {
    tokenUsers[name] = { ...u, groups: [...u.groups], token: randomBytes(24).toString('hex') };
  }

  const info: TestEnvInfo = {
    server,
    kubeconfigPath: join(runDir, 'admin.kubeconfig'),
    caPath: join(pkiDir, 'ca.crt'),
    caKeyPath: join(pkiDir, 'ca.key'),
    pkiDir,
    tokenUsers,
    serviceAccountIssuer: issuer,
    kubectlPath: join(binDir, 'kubectl'),
    binDir,
    runDir,
    stateFile,
    etcdEndpoint,
    versions,
  };
  const etcdName = 'oscar-testenv';
  const etcdPeer = `http://${host}:${String(etcdPeerPort)}`;
  const state: TestEnvState = {
    formatVersion: 1,
    owner,
    info,
    etcd: {
      ref: null,
      command: join(binDir, 'etcd'),
      args: [
        `--name=${etcdName}`,
        `--data-dir=${join(runDir, 'etcd')}`,
        `--listen-client-urls=${etcdEndpoint}`,
        `--advertise-client-urls=${etcdEndpoint}`,
        `--listen-peer-urls=${etcdPeer}`,
        `--initial-advertise-peer-urls=${etcdPeer}`,
        `--initial-cluster=${etcdName}=${etcdPeer}`,
        // Data is thrown away after the run; fsync only costs time on a shared machine.
        '--unsafe-no-fsync',
        '--log-level=warn',
      ],
      logPath: join(runDir, 'etcd.log'),
    },
    apiserver: {
      ref: null,
      command: join(binDir, 'kube-apiserver'),
      args: apiServerArgs(host, apiPort, etcdEndpoint, runDir, issuer),
      logPath: join(runDir, 'kube-apiserver.log'),
    },
    controllerManager:
      opts.controllers === false
        ? null
        : {
            ref: null,
            command: join(binDir, 'kube-controller-manager'),
            args: controllerManagerArgs(runDir, opts.workloads === true),
            logPath: join(runDir, 'kube-controller-manager.log'),
          },
    scheduler: opts.workloads === true ? schedulerState(binDir, runDir) : null,
  };
  // Written before anything starts, so a crash from here on is reaped by the next run.
  await writeState(stateFile, state);

  try {
    const pki = new TestPki(pkiDir);
    try {
      await pki.init();
    } catch (err) {
      if ((err as Error).message.includes('not on PATH'))
        throw new ToolMissingError((err as Error).message, { cause: err });
      throw err;
    }
    const sans = opts.extraSans ?? [];
    const isIp = (s: string): boolean => /^[0-9.]+$/.test(s) || s.includes(':');
    await Promise.all([
      pki.issueServing(
        [...new Set([host, '127.0.0.1', '10.0.0.1', ...sans.filter(isIp)])],
        [
          'localhost',
          'kubernetes',
          'kubernetes.default',
          'kubernetes.default.svc',
          'kubernetes.default.svc.cluster.local',
          ...sans.filter((s) => !isIp(s)),
        ],
      ),
      pki.issueClient('admin', { user: 'oscar-admin', groups: ['system:masters'] }),
      // The bootstrap RBAC policy binds this user to what the controller manager needs.
      pki.issueClient('kube-controller-manager', { user: 'system:kube-controller-manager' }),
      pki.serviceAccountKeys(),
    ]);
    const csvField = (s: string): string => `"${s.replace(/"/g, '""')}"`;
    await writeFile(
      join(runDir, 'tokens.csv'),
      Object.values(tokenUsers)
        .map((u) => [u.token, u.user, u.user, u.groups.join(',')].map(csvField).join(','))
        .join('\n') + '\n',
      { mode: 0o600 },
    );

    const t0 = Date.now();
    const etcdRef = await startDetached(state.etcd.command, state.etcd.args, state.etcd.logPath);
    await updateState(stateFile, (s) => (s.etcd.ref = etcdRef));
    await waitReady(
      'etcd',
      `${etcdEndpoint}/health`,
      undefined,
      etcdRef,
      state.etcd.logPath,
      readyTimeoutMs,
    );
    log(`etcd ${versions.etcd} ready at ${etcdEndpoint} in ${String(Date.now() - t0)} ms`);

    const env = await attachTestEnv(stateFile);
    await env.startApiServer();
    log(
      `kube-apiserver ${versions.kubernetes} ready at ${server} in ${String(Date.now() - t0)} ms (incl. etcd)`,
    );

    await writeCertKubeconfig(info, info.kubeconfigPath, 'oscar-admin', 'admin');
    // CRDs before the controllers: the garbage collector discovers resource types at
    // start (then only every 30 s), so OSC owner references work from the first test.
    if (crdDir !== null) await applyCrds(info, crdDir, log);
    const kcm = state.controllerManager;
    if (kcm !== null) {
      const t1 = Date.now();
      await writeCertKubeconfig(
        info,
        join(runDir, 'kube-controller-manager.kubeconfig'),
        'kube-controller-manager',
        'kube-controller-manager',
      );
      const kcmRef = await startDetached(kcm.command, kcm.args, kcm.logPath);
      await updateState(stateFile, (s) => {
        if (s.controllerManager !== null) s.controllerManager.ref = kcmRef;
      });
      // Its service-account controller creating default/default shows the controllers run.
      await waitReady(
        'kube-controller-manager',
        `${server}/api/v1/namespaces/default/serviceaccounts/default`,
        await adminTls(info),
        kcmRef,
        kcm.logPath,
        readyTimeoutMs,
      );
      log(`kube-controller-manager running in ${String(Date.now() - t1)} ms`);
    }
    if (state.scheduler !== null) {
      await startScheduler(info, state.scheduler, readyTimeoutMs, log);
    }
    return env;
  } catch (err) {
    await teardownRun(stateFile, runDir).catch(() => undefined);
    throw err;
  }
}

/** A handle on a running cluster from its state file — usable from any process. */
export async function attachTestEnv(stateFile: string): Promise<TestEnv> {
  const { info } = await readState(stateFile);

  const stopApiServer = async (o?: { signal?: NodeJS.Signals }): Promise<void> => {
    const { apiserver } = await readState(stateFile);
    if (apiserver.ref === null) return;
    await stopProcess(apiserver.ref, o?.signal ?? 'SIGTERM', API_SERVER_GRACE_MS);
    await updateState(stateFile, (s) => (s.apiserver.ref = null));
  };

  const startApiServer = async (): Promise<void> => {
    const state = await readState(stateFile);
    if (
      state.apiserver.ref !== null &&
      (await procStartTime(state.apiserver.ref.pid)) === state.apiserver.ref.startTime
    ) {
      throw new Error(`kube-apiserver is already running (pid ${String(state.apiserver.ref.pid)})`);
    }
    const { command, args, logPath } = state.apiserver;
    const ref = await startDetached(command, args, logPath);
    await updateState(stateFile, (s) => (s.apiserver.ref = ref));
    // A freshly started apiserver answers 403 to anonymous probes, so probe as admin.
    await waitReady(
      'kube-apiserver',
      `${info.server}/readyz`,
      await adminTls(info),
      ref,
      logPath,
      120_000,
    );
    // On a restart (the first start comes before the kubeconfig and the CRDs), wait for the
    // custom resources' storage too, or the first requests get 429 "storage is (re)initializing".
    if (existsSync(info.kubeconfigPath)) await waitCrdsServed(info);
  };

  return {
    ...info,
    info,
    stop: () => teardownRun(stateFile, info.runDir),
    stopApiServer,
    startApiServer,
    restartApiServer: async (o) => {
      await stopApiServer(o);
      await startApiServer();
    },
    pauseApiServer: async (paused) => {
      const { apiserver } = await readState(stateFile);
      if (apiserver.ref === null) throw new Error('kube-apiserver is not running');
      process.kill(apiserver.ref.pid, paused ? 'SIGSTOP' : 'SIGCONT');
    },
    writeKubeconfig: (identity, namespace) => writeKubeconfigFor(info, identity, namespace),
    writeTokenKubeconfig: (name, namespace) => writeTokenKubeconfigFor(info, name, namespace),
  };
}
