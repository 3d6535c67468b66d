/**
 * A small HTTP client for the Kubernetes API: JSON requests and line-delimited watch streams.
 * Written on node:https (credentials from @kubernetes/client-node's KubeConfig) rather than on
 * the generated API classes so oscar controls what matters here: server-side apply
 * content types, metadata-only lists (PartialObjectMetadata), watch bookmarks and stream ends.
 * Shared by the controller and the agent, so it sits below both.
 */
import { Agent, request, type RequestOptions } from 'node:https';
import type { IncomingMessage } from 'node:http';
import type { KubeConfig } from '@kubernetes/client-node';
import { parseJsonText } from '../api/json-text.js';

/** A non-2xx answer from the API server, with its Status reason ("NotFound", "Conflict", …). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly reason: string,
    message: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

export function isNotFound(error: unknown): boolean {
  return error instanceof ApiError && error.status === 404;
}

export function isConflict(error: unknown): boolean {
  return error instanceof ApiError && error.status === 409;
}

export type Query = Record<string, string | number | boolean | undefined>;

export interface RequestSpec {
  query?: Query;
  body?: unknown;
  contentType?: string;
  accept?: string;
  /** Aborts the request (used to stop watches). */
  signal?: AbortSignal;
  timeoutMs?: number;
}

export const CONTENT_JSON = 'application/json';
export const CONTENT_MERGE_PATCH = 'application/merge-patch+json';
export const CONTENT_APPLY_PATCH = 'application/apply-patch+yaml';
export const CONTENT_JSON_PATCH = 'application/json-patch+json';
/**
 * Lists and watches that return only metadata (no Secret data crosses the wire). A watch must ask
 * for the item type: offered the list type too, the server picks it and ends the watch at once.
 */
export const ACCEPT_METADATA_LIST =
  'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1';
export const ACCEPT_METADATA = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1';

export interface KubeHttp {
  request<T>(method: string, path: string, spec?: RequestSpec): Promise<T>;
  /** Opens a watch; calls onLine per JSON line; resolves when the server ends the stream. */
  stream(path: string, spec: RequestSpec, onLine: (line: string) => void): Promise<void>;
  /** Drops pooled connections, so the next request dials afresh (see HttpKubeClient). */
  resetConnections?(): void;
}

function withQuery(path: string, query: Query | undefined): string {
  if (!query) return path;
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined) params.set(k, String(v));
  const text = params.toString();
  return text ? `${path}?${text}` : path;
}

export interface HttpKubeClientOptions {
  /**
   * Sent with every request, so the API server's audit log and metrics tell oscar's components
   * apart: `oscar-agent/0.1.0 (linux/x64) node/v24.…` (cli/support/version.ts userAgent). Default "oscar".
   */
  userAgent?: string;
}

export class HttpKubeClient implements KubeHttp {
  private readonly server: URL;
  // Replaced by resetConnections(), so not readonly.
  private agent = new Agent({ keepAlive: true, maxSockets: 32 });
  private readonly userAgent: string;

  constructor(
    private readonly kc: KubeConfig,
    options: HttpKubeClientOptions = {},
  ) {
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error('the kubeconfig has no current cluster');
    this.server = new URL(cluster.server);
    this.userAgent = options.userAgent ?? 'oscar';
  }

  private async options(method: string, path: string, spec: RequestSpec): Promise<RequestOptions> {
    const opts: RequestOptions = {};
    await this.kc.applyToHTTPSOptions(opts);
    const headers: Record<string, string> = {
      accept: spec.accept ?? CONTENT_JSON,
      'user-agent': this.userAgent,
    };
    for (const [k, v] of Object.entries(opts.headers ?? {})) {
      if (typeof v === 'string') headers[k] = v;
    }
    if (opts.auth) headers.authorization = `Basic ${Buffer.from(opts.auth).toString('base64')}`;
    return {
      protocol: this.server.protocol,
      hostname: this.server.hostname,
      port: this.server.port,
      method,
      path: withQuery(`${this.server.pathname.replace(/\/$/, '')}${path}`, spec.query),
      headers,
      ca: opts.ca,
      cert: opts.cert,
      key: opts.key,
      rejectUnauthorized: opts.rejectUnauthorized,
      servername: opts.servername,
      agent: this.agent,
      signal: spec.signal,
      timeout: spec.timeoutMs,
    };
  }

  private async open(method: string, path: string, spec: RequestSpec): Promise<IncomingMessage> {
    const opts = await this.options(method, path, spec);
    let payload: Buffer | undefined;
    if (spec.body !== undefined) {
      payload = Buffer.from(JSON.stringify(spec.body));
      const headers = opts.headers as Record<string, string>;
      headers['content-type'] = spec.contentType ?? CONTENT_JSON;
      headers['content-length'] = String(payload.length);
    }
    return new Promise((resolve, reject) => {
      const req = request(opts, resolve);
      req.once('error', reject);
      req.once('timeout', () => {
        req.destroy(new Error(`${method} ${path}: timed out`));
      });
      req.end(payload);
    });
  }

  async request<T>(method: string, path: string, spec: RequestSpec = {}): Promise<T> {
    const res = await this.open(method, path, { timeoutMs: 30_000, ...spec });
    const chunks: Buffer[] = [];
    for await (const chunk of res) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    const status = res.statusCode ?? 0;
    if (status < 200 || status > 299) throw toApiError(status, text, method, path);
    // a body holds object data (a Secret's): a syntax error must not quote it
    return (text ? parseJsonText(text) : undefined) as T;
  }

  async stream(path: string, spec: RequestSpec, onLine: (line: string) => void): Promise<void> {
    const res = await this.open('GET', path, spec);
    const status = res.statusCode ?? 0;
    if (status < 200 || status > 299) {
      const chunks: Buffer[] = [];
      for await (const chunk of res) chunks.push(chunk as Buffer);
      throw toApiError(status, Buffer.concat(chunks).toString('utf8'), 'WATCH', path);
    }
    let buffered = '';
    res.setEncoding('utf8');
    try {
      for await (const chunk of res) {
        buffered += chunk as string;
        let nl: number;
        while ((nl = buffered.indexOf('\n')) >= 0) {
          const line = buffered.slice(0, nl).trim();
          buffered = buffered.slice(nl + 1);
          if (line) onLine(line);
        }
      }
      if (buffered.trim()) onLine(buffered.trim());
    } finally {
      // onLine may throw (410 Gone): drop the connection rather than drain it.
      res.destroy();
    }
  }

  /**
   * Closes every pooled connection: the next request dials, resolves the server's name and
   * handshakes again. Try mode calls it after an apply so that "the API server answers" is
   * proven over the node's current network and name resolution, not over an old socket.
   */
  resetConnections(): void {
    const old = this.agent;
    this.agent = new Agent({ keepAlive: true, maxSockets: 32 });
    old.destroy();
  }

  close(): void {
    this.agent.destroy();
  }
}

/** Only the Status' reason and message are kept: a response body may echo object content. */
function toApiError(status: number, text: string, method: string, path: string): ApiError {
  let reason = '';
  let message = `${method} ${path}: HTTP ${status}`;
  try {
    const body = JSON.parse(text) as { reason?: string; message?: string };
    reason = body.reason ?? '';
    if (body.message) message = `${method} ${path}: ${body.message}`;
  } catch {
    // not a Status object
  }
  return new ApiError(status, reason, message);
}
