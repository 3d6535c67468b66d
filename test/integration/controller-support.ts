// Helpers for the controller's integration tests: run the controller in this process or as
// a separate `oscar controller` process against the test API server, read and write objects,
// wait for conditions.
import { spawn, type ChildProcess } from 'node:child_process';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { API_VERSION, OSC_KIND, type OperatingSystemConfigSpec } from '../../api/schema.js';
import { HttpKubeClient, isNotFound, CONTENT_APPLY_PATCH } from '../../kube/client.js';
import type { DataObject, OscObject } from '../../controller/kube/types.js';
import { oscPath } from '../../controller/osc/writer.js';
import { createLogger } from '../../log/logger.js';
import {
  runController,
  type ControllerConfig,
  type ControllerHandle,
} from '../../controller/main.js';
import { kubectl, testEnvInfo } from './support/cluster.js';
import { waitFor } from '../support/wait.js';
import { agentRbacManifest } from '../support/agent-identity.js';

const repoRoot = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..');

export function adminClient(kubeconfigPath = testEnvInfo().kubeconfigPath): HttpKubeClient {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  return new HttpKubeClient(kc);
}

export { sleep } from '../../api/util.js';
export { waitFor };

export class Api {
  constructor(readonly http: HttpKubeClient = adminClient()) {}

  /** Server-side applies an OSC (field manager "test"); returns it. */
  applyOsc(ns: string, name: string, spec: OperatingSystemConfigSpec): Promise<OscObject> {
    return this.http.request<OscObject>('PATCH', oscPath(ns, name), {
      query: { fieldManager: 'test', force: true },
      contentType: CONTENT_APPLY_PATCH,
      body: { apiVersion: API_VERSION, kind: OSC_KIND, metadata: { name, namespace: ns }, spec },
    });
  }

  async getOsc(ns: string, name: string): Promise<OscObject | undefined> {
    try {
      return await this.http.request<OscObject>('GET', oscPath(ns, name));
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
  }

  deleteOsc(ns: string, name: string): Promise<unknown> {
    return this.http.request('DELETE', oscPath(ns, name));
  }

  async getSecret(ns: string, name: string): Promise<DataObject | undefined> {
    try {
      return await this.http.request<DataObject>('GET', `/api/v1/namespaces/${ns}/secrets/${name}`);
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
  }

  /** Creates or replaces a plain Secret with string data. */
  putSecret(ns: string, name: string, data: Record<string, string>): Promise<DataObject> {
    const encoded = Object.fromEntries(
      Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
    );
    return this.http.request<DataObject>('PATCH', `/api/v1/namespaces/${ns}/secrets/${name}`, {
      query: { fieldManager: 'test', force: true },
      contentType: CONTENT_APPLY_PATCH,
      body: { apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace: ns }, data: encoded },
    });
  }

  async listEvents(
    ns: string,
  ): Promise<
    { reason: string; type: string; message: string; involvedObject: { name: string } }[]
  > {
    const list = await this.http.request<{
      items: { reason: string; type: string; message: string; involvedObject: { name: string } }[];
    }>('GET', `/api/v1/namespaces/${ns}/events`);
    return list.items;
  }

  /** Waits until the OSC's status is Ready for its current generation; returns it. */
  waitReady(ns: string, name: string, timeoutMs = 60_000): Promise<OscObject> {
    return waitFor(
      `${ns}/${name} Ready for its generation`,
      async () => {
        const o = await this.getOsc(ns, name);
        const ready = o?.status?.conditions?.find((c) => c.type === 'Ready');
        return o &&
          o.status?.observedGeneration === o.metadata.generation &&
          ready?.status === 'True'
          ? o
          : undefined;
      },
      timeoutMs,
    );
  }

  /** Waits for the condition of type `type` to have `status` at the current generation. */
  waitCondition(
    ns: string,
    name: string,
    type: string,
    status: string,
    timeoutMs = 60_000,
  ): Promise<OscObject> {
    return waitFor(
      `${ns}/${name} ${type}=${status}`,
      async () => {
        const o = await this.getOsc(ns, name);
        const c = o?.status?.conditions?.find((x) => x.type === type);
        return o && o.status?.observedGeneration === o.metadata.generation && c?.status === status
          ? o
          : undefined;
      },
      timeoutMs,
    );
  }
}

/** A controller in this process, logging into memory (so tests can read the logs). */
export async function startController(
  namespaces: string[],
  extra: Partial<ControllerConfig> = {},
): Promise<{ handle: ControllerHandle; logs: string[]; stop: () => Promise<void> }> {
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      logs.push(chunk.toString('utf8'));
      cb();
    },
  });
  const handle = await runController({
    kubeconfig: testEnvInfo().kubeconfigPath,
    namespaces,
    metricsAddr: '127.0.0.1:0',
    leaderElect: false,
    leaseDurationMs: 15_000,
    log: createLogger({ component: 'controller', level: 'debug', destination: sink }),
    ...extra,
  });
  let stopped = false;
  return {
    handle,
    logs,
    stop: async () => {
      if (stopped) return;
      stopped = true;
      await handle.stop();
    },
  };
}

export interface ControllerProcess {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
  /**
   * The exit code once the process has exited and its stdout and stderr are read to the end:
   * `exited` can come first, with the last lines still in the pipe (a `stopped` record, say).
   */
  closed: Promise<number | null>;
}

/** Runs `oscar controller ARGS` as its own process (what a Deployment's container runs). */
export function spawnController(args: string[]): ControllerProcess {
  return spawnOscar('controller', args);
}

/** Runs `oscar COMMAND ARGS` as its own process, collecting its output; `wrap` may prefix its command line (a memory cgroup). */
export function spawnOscar(
  command: string,
  args: string[],
  wrap: (argv: string[]) => string[] = (argv) => argv,
): ControllerProcess {
  const [file = '', ...rest] = wrap([
    process.execPath,
    '--import',
    'tsx',
    join(repoRoot, 'cli', 'oscar.ts'),
    command,
    ...args,
  ]);
  const child = spawn(file, rest, { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      resolve(code);
    }),
  );
  const closed = new Promise<number | null>((resolve) =>
    child.once('close', (code) => {
      resolve(code);
    }),
  );
  return { child, output: () => out, exited, closed };
}

/**
 * SIGTERM, then waits for the exit; a process that outlives its shutdown timeout (15 s by
 * default) plus a margin is killed and the test fails with its output, instead of hanging.
 */
export async function stopProcess(p: ControllerProcess, withinMs = 30_000): Promise<number | null> {
  if (p.child.exitCode !== null || p.child.signalCode !== null) return p.exited;
  p.child.kill('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => {
      resolve('late');
    }, withinMs);
  });
  const code = await Promise.race([p.exited, late]);
  clearTimeout(timer);
  if (code === 'late') {
    p.child.kill('SIGKILL');
    await p.exited;
    throw new Error(
      `pid ${String(p.child.pid)} did not exit within ${String(withinMs)} ms of SIGTERM; its output:\n${p.output()}`,
    );
  }
  return code;
}

/** A small OSC of either purpose with one file and one unit that uses it. */
export function demoSpec(
  purpose: 'provision' | 'reconcile',
  content = 'hello\n',
): OperatingSystemConfigSpec {
  return {
    type: 'ubuntu',
    purpose,
    files: [
      { path: '/etc/demo/app.conf', permissions: '0640', content: { inline: { data: content } } },
    ],
    units: [
      {
        name: 'demo.service',
        content:
          '[Unit]\nDescription=demo\n\n[Service]\nExecStart=/bin/sleep infinity\n\n[Install]\nWantedBy=multi-user.target\n',
        filePaths: ['/etc/demo/app.conf'],
      },
    ],
  };
}

export function secretData(s: DataObject | undefined): Record<string, Buffer> {
  return Object.fromEntries(
    Object.entries(s?.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64')]),
  );
}

const NODES = '/apis/oscar.dev/v1alpha1/operatingsystemconfignodes';

/**
 * The agent's identity (deploy/agent-rbac.yaml): its own Secret and its own node object, nothing
 * else. Returns the cleanup (the grants and the node object).
 */
export async function grantAgent(
  api: Api,
  ns: string,
  node: string,
  osc: string,
): Promise<() => Promise<void>> {
  const rbac = await agentRbacManifest({ node, namespace: ns, osc });
  const applied = await kubectl(['apply', '-f', '-'], { input: rbac });
  if (applied.code !== 0) throw new Error(`kubectl apply agent-rbac: ${applied.stderr}`);
  return async () => {
    await kubectl(['delete', 'clusterrole,clusterrolebinding', `oscar-agent-${node}`]);
    try {
      await api.http.request('DELETE', `${NODES}/${node}`);
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
  };
}

export { agentIdentity } from '../support/agent-identity.js';
