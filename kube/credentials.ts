/**
 * The kubeconfig of the agent and the controller, read without @kubernetes/client-node: that
 * library (760 modules, about 45 MB of memory) is more than the agent's whole budget, and both
 * need only what client.ts uses of a KubeConfig — the server URL and the TLS options and headers
 * of one request. Handled here: a kubeconfig file (YAML or JSON; CA, client certificate and key
 * inline or as files, a bearer token or token file, basic auth, insecure-skip-tls-verify,
 * tls-server-name) and the in-cluster ServiceAccount. Anything else (exec plugins, auth
 * providers, several files in $KUBECONFIG) is handed to client-node's KubeConfig, loaded only then.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import type { RequestOptions } from 'node:https';
import { homedir } from 'node:os';
import { delimiter, dirname, isAbsolute, join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { HttpKubeClient, type HttpKubeClientOptions } from './client.js';
import { isObj, type Obj } from '../api/util.js';

/** What kube/client.ts's HttpKubeClient uses of a KubeConfig. */
export interface KubeCredentials {
  /** The server, and the CA that verifies it (PEM) when the credentials name one. */
  getCurrentCluster(): { server: string; caPem?: string } | null;
  applyToHTTPSOptions(opts: RequestOptions): Promise<void>;
  /** Where the credentials came from, for logs: "kubeconfig /etc/oscar/kubeconfig", "in-cluster". */
  readonly origin: string;
}

const SA_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
/** A token file is re-read at most this often: bound ServiceAccount tokens are rotated on disk. */
const TOKEN_FILE_TTL_MS = 60_000;

interface Cluster {
  server: string;
  ca?: Buffer;
  insecure: boolean;
  tlsServerName?: string;
}

interface User {
  cert?: Buffer;
  key?: Buffer;
  token?: string;
  tokenFile?: string;
  basic?: string;
}

export class KubeconfigError extends Error {
  override name = 'KubeconfigError';
}

class StaticCredentials implements KubeCredentials {
  private token: { value: string; readAt: number } | undefined;

  constructor(
    readonly origin: string,
    private readonly cluster: Cluster,
    private readonly user: User,
    private readonly now: () => number = Date.now,
  ) {}

  getCurrentCluster(): { server: string; caPem?: string } {
    const { server, ca } = this.cluster;
    return ca ? { server, caPem: ca.toString('utf8') } : { server };
  }

  private bearer(): string | undefined {
    if (this.user.token !== undefined) return this.user.token;
    const file = this.user.tokenFile;
    if (file === undefined) return undefined;
    if (this.token === undefined || this.now() - this.token.readAt >= TOKEN_FILE_TTL_MS) {
      this.token = { value: readFileSync(file, 'utf8').trim(), readAt: this.now() };
    }
    return this.token.value;
  }

  applyToHTTPSOptions(opts: RequestOptions): Promise<void> {
    const { cluster, user } = this;
    if (cluster.ca) opts.ca = cluster.ca;
    if (cluster.insecure) opts.rejectUnauthorized = false;
    if (cluster.tlsServerName !== undefined) opts.servername = cluster.tlsServerName;
    if (user.cert) opts.cert = user.cert;
    if (user.key) opts.key = user.key;
    if (user.basic !== undefined) opts.auth = user.basic;
    const token = this.bearer();
    if (token !== undefined) {
      // kube/client.ts passes fresh options: headers, if any, are a plain object
      const headers = opts.headers as Record<string, string> | undefined;
      opts.headers = { ...headers, Authorization: `Bearer ${token}` };
    }
    return Promise.resolve();
  }
}

/** The named entry of clusters / users / contexts, with the field path of errors. */
function entry(doc: Obj, list: 'clusters' | 'users' | 'contexts', name: string, key: string): Obj {
  const items = doc[list];
  if (!Array.isArray(items))
    throw new KubeconfigError(`${list}: missing (a list of {name, ${key}})`);
  const found = items.find((i): i is Obj => isObj(i) && i.name === name);
  if (!found) throw new KubeconfigError(`${list}: no entry named "${name}"`);
  const value = found[key] ?? {};
  if (!isObj(value)) throw new KubeconfigError(`${list}[name=${name}].${key}: must be a mapping`);
  return value;
}

function str(o: Obj, field: string, where: string): string | undefined {
  const v = o[field];
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') throw new KubeconfigError(`${where}.${field}: must be a string`);
  return v;
}

/**
 * Credentials from a parsed kubeconfig; `base` is its directory (relative file paths are
 * relative to it). Returns undefined when the user needs what only client-node can do
 * (exec, auth-provider).
 */
export function credentialsFromKubeconfig(
  doc: unknown,
  opts: {
    base: string;
    origin: string;
    read?: (path: string) => Buffer;
    now?: () => number;
    /** --context: this context instead of current-context (kubectl's flag). */
    context?: string;
  },
): KubeCredentials | undefined {
  const { base, origin } = opts;
  const read = opts.read ?? ((p: string) => readFileSync(p));
  if (!isObj(doc)) throw new KubeconfigError('not a kubeconfig: expected a mapping');
  const contextName = opts.context ?? doc['current-context'];
  if (typeof contextName !== 'string' || contextName === '') {
    throw new KubeconfigError(
      'current-context: missing; set it (kubectl config use-context NAME) or pass --context NAME',
    );
  }
  const context = entry(doc, 'contexts', contextName, 'context');
  const clusterName = str(context, 'cluster', `contexts[name=${contextName}].context`);
  if (clusterName === undefined)
    throw new KubeconfigError(`contexts[name=${contextName}].context.cluster: missing`);
  const userName = str(context, 'user', `contexts[name=${contextName}].context`);
  const c = entry(doc, 'clusters', clusterName, 'cluster');
  const cw = `clusters[name=${clusterName}].cluster`;
  const server = str(c, 'server', cw);
  if (server === undefined) throw new KubeconfigError(`${cw}.server: missing (https://HOST:PORT)`);
  try {
    new URL(server);
  } catch {
    throw new KubeconfigError(`${cw}.server: "${server}" is not a URL (https://HOST:PORT)`);
  }
  const file = (p: string): string => (isAbsolute(p) ? p : join(base, p));
  const data = (o: Obj, where: string, inline: string, path: string): Buffer | undefined => {
    const b64 = str(o, inline, where);
    if (b64 !== undefined) return Buffer.from(b64, 'base64');
    const p = str(o, path, where);
    if (p === undefined) return undefined;
    try {
      return read(file(p));
    } catch (error) {
      throw new KubeconfigError(
        `${where}.${path}: cannot read ${file(p)}: ${(error as Error).message}`,
      );
    }
  };
  const ca = data(c, cw, 'certificate-authority-data', 'certificate-authority');
  const tlsServerName = str(c, 'tls-server-name', cw);
  const cluster: Cluster = {
    server: server.replace(/\/$/, ''),
    insecure: c['insecure-skip-tls-verify'] === true,
    ...(ca ? { ca } : {}),
    ...(tlsServerName !== undefined ? { tlsServerName } : {}),
  };
  const user: User = {};
  if (userName !== undefined) {
    const u = entry(doc, 'users', userName, 'user');
    if (u.exec !== undefined || u['auth-provider'] !== undefined) return undefined;
    const uw = `users[name=${userName}].user`;
    const cert = data(u, uw, 'client-certificate-data', 'client-certificate');
    const key = data(u, uw, 'client-key-data', 'client-key');
    if ((cert === undefined) !== (key === undefined)) {
      throw new KubeconfigError(
        `${uw}: client-certificate and client-key go together (one of them is missing)`,
      );
    }
    if (cert && key) Object.assign(user, { cert, key });
    const token = str(u, 'token', uw);
    const tokenFile = str(u, 'tokenFile', uw);
    if (token !== undefined) user.token = token;
    else if (tokenFile !== undefined) user.tokenFile = file(tokenFile);
    const username = str(u, 'username', uw);
    if (username !== undefined) user.basic = `${username}:${str(u, 'password', uw) ?? ''}`;
  }
  return new StaticCredentials(origin, cluster, user, opts.now);
}

/** The in-cluster ServiceAccount, as client-node's loadFromCluster sees it. */
export function inClusterCredentials(env = process.env, dir = SA_DIR): KubeCredentials {
  const host = env.KUBERNETES_SERVICE_HOST ?? '';
  const port = env.KUBERNETES_SERVICE_PORT ?? '443';
  const scheme = ['80', '8080', '8001'].includes(port) ? 'http' : 'https';
  const h = host.includes(':') ? `[${host}]` : host;
  return new StaticCredentials(
    'in-cluster',
    { server: `${scheme}://${h}:${port}`, ca: readFileSync(join(dir, 'ca.crt')), insecure: false },
    { tokenFile: join(dir, 'token') },
  );
}

async function parseFile(path: string): Promise<unknown> {
  const text = readFileSync(path, 'utf8');
  // JSON is YAML too, but the YAML parser costs memory the agent rarely needs to spend
  if (text.trimStart().startsWith('{')) return JSON.parse(text) as unknown;
  const { parse } = await import('yaml');
  return parse(text) as unknown;
}

/** client-node's KubeConfig for what this module does not handle (loaded only then). */
async function viaClientNode(
  path: string | undefined,
  context: string | undefined,
): Promise<KubeCredentials> {
  let lib: typeof import('@kubernetes/client-node');
  try {
    lib = await import('@kubernetes/client-node');
  } catch (error) {
    // The agent's single executable (hack/agent/build.ts) leaves the library out.
    throw new KubeconfigError(
      `the kubeconfig needs an exec plugin, an auth provider or several merged files, which only @kubernetes/client-node reads, and it is not available here (${(error as Error).message.split('\n')[0] ?? ''}); give the agent a kubeconfig with a client certificate or a token (what oscar's bootstrap writes), or run the agent from the npm package`,
      { cause: error },
    );
  }
  const { KubeConfig } = lib;
  const kc = new KubeConfig();
  if (path !== undefined) kc.loadFromFile(path);
  else kc.loadFromDefault();
  if (context !== undefined) {
    if (!kc.getContexts().some((c) => c.name === context)) {
      throw new KubeconfigError(`contexts: no entry named "${context}" (--context)`);
    }
    kc.setCurrentContext(context);
  }
  const cluster = kc.getCurrentCluster();
  if (!cluster) {
    throw new KubeconfigError(
      `no cluster in the kubeconfig${path ? ` ${path}` : ''}: pass --kubeconfig, or run in a pod with a service account`,
    );
  }
  return {
    origin: `kubeconfig ${path ?? '(default)'} via @kubernetes/client-node`,
    getCurrentCluster: () => {
      const c = kc.getCurrentCluster();
      if (!c) return null;
      return c.caData
        ? { server: c.server, caPem: Buffer.from(c.caData, 'base64').toString('utf8') }
        : { server: c.server };
    },
    applyToHTTPSOptions: (opts) => kc.applyToHTTPSOptions(opts),
  };
}

/**
 * The agent's credentials: --kubeconfig PATH when given; otherwise $KUBECONFIG, ~/.kube/config,
 * then the in-cluster ServiceAccount (client-node's loadFromDefault order).
 */
export async function loadKubeCredentials(
  path?: string,
  context?: string,
): Promise<KubeCredentials> {
  let file = path;
  if (file === undefined) {
    const fromEnv = (process.env.KUBECONFIG ?? '').split(delimiter).filter(Boolean);
    if (fromEnv.length > 1) return viaClientNode(undefined, context); // merging: client-node's job
    const home = join(homedir(), '.kube', 'config');
    file = fromEnv[0] ?? (existsSync(home) ? home : undefined);
  }
  if (file === undefined) {
    if (context !== undefined) {
      throw new KubeconfigError(
        `--context ${context} names a kubeconfig context, and there is no kubeconfig: pass --kubeconfig or set $KUBECONFIG`,
      );
    }
    if (process.env.KUBERNETES_SERVICE_HOST && existsSync(join(SA_DIR, 'token'))) {
      return inClusterCredentials();
    }
    throw new KubeconfigError(
      'no kubeconfig: pass --kubeconfig, set $KUBECONFIG, or run in a pod with a service account',
    );
  }
  let doc: unknown;
  try {
    statSync(file);
    doc = await parseFile(file);
  } catch (error) {
    throw new KubeconfigError(`kubeconfig ${file}: cannot read: ${(error as Error).message}`);
  }
  try {
    return (
      credentialsFromKubeconfig(doc, {
        base: dirname(file),
        origin: `kubeconfig ${file}${context === undefined ? '' : ` (context ${context})`}`,
        ...(context === undefined ? {} : { context }),
      }) ?? (await viaClientNode(file, context))
    );
  } catch (error) {
    if (error instanceof KubeconfigError) {
      throw new KubeconfigError(`kubeconfig ${file}: ${error.message}`, { cause: error });
    }
    throw error;
  }
}

/**
 * kube/client.ts and the Secret source and reporter are typed with client-node's KubeConfig but
 * use only getCurrentCluster() and applyToHTTPSOptions() of it — what KubeCredentials has.
 */
export function asKubeConfig(credentials: KubeCredentials): KubeConfig {
  return credentials as unknown as KubeConfig;
}

/** One HTTP client on these credentials (each user of the API gets its own connection pool). */
export function kubeHttp(
  credentials: KubeCredentials,
  options: HttpKubeClientOptions = {},
): HttpKubeClient {
  return new HttpKubeClient(asKubeConfig(credentials), options);
}
