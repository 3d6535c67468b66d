/**
 * The Runtime Extension's HTTPS server: Cluster API POSTs JSON to
 * `/hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery` and to each handler's path, and checks the
 * serving certificate against the ExtensionConfig's caBundle. Requests are bounded in size and
 * time; a handler that throws answers `Failure` with the error (Cluster API retries with backoff)
 * rather than a bare 500, so the reason shows in Cluster API's log.
 */
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import {
  DISCOVERY_PATH,
  handlerPath,
  HANDLER_NAMES,
  HOOKS,
  HOOKS_API_VERSION,
  type DiscoveryResponse,
  type HookName,
} from './hooks.js';
import type { ExtensionMetrics } from './metrics.js';
import { Slots, withSlot } from '../../api/slots.js';
import { unsupported, type InPlaceExtension } from './service.js';

/** Cluster API sends whole Machines, MachineSets and templates: generous, but bounded. */
const MAX_BODY_BYTES = 8 * 1024 * 1024;
/**
 * Hook requests read and handled at once; the rest wait, unread (api/slots.ts): each body may be
 * 8 MiB, and the extension ships with 256Mi. Handlers mostly wait on the API server, so a few at
 * once keep Cluster API's calls flowing.
 */
export const DEFAULT_HOOK_SLOTS = 4;

/** Each handler's timeout as announced (Cluster API allows at most 30). */
export const HANDLER_TIMEOUT_SECONDS = 10;

export function discovery(): DiscoveryResponse {
  return {
    apiVersion: HOOKS_API_VERSION,
    kind: 'DiscoveryResponse',
    status: 'Success',
    handlers: HOOKS.map((hook) => ({
      name: HANDLER_NAMES[hook],
      requestHook: { apiVersion: HOOKS_API_VERSION, hook },
      timeoutSeconds: HANDLER_TIMEOUT_SECONDS,
      // Fail: an unreachable extension must never read as "cannot update in place" → a rollout
      // of every machine, nor as "updated"; Cluster API waits and retries instead.
      failurePolicy: 'Fail',
    })),
  };
}

const ROUTES = new Map<string, HookName>(HOOKS.map((h) => [handlerPath(h), h]));

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES)
      throw new RangeError(`request body over ${String(MAX_BODY_BYTES)} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/** The metrics' labels for one answer: the hook asked, and Success/Failure, or error (not 200). */
export function answerLabels(
  hook: HookName | 'Discovery' | 'other',
  code: number,
  body: unknown,
): { hook: string; status: string } {
  const status = (body as { status?: unknown } | undefined)?.status;
  return {
    hook,
    status: code === 200 && (status === 'Success' || status === 'Failure') ? status : 'error',
  };
}

function sendJson(res: ServerResponse, code: number, body: unknown): void {
  const bytes = Buffer.from(JSON.stringify(body));
  res.writeHead(code, { 'content-type': 'application/json', 'content-length': bytes.length });
  res.end(bytes);
}

export interface ExtensionServerOptions {
  cert: Buffer | string;
  key: Buffer | string;
  host: string;
  port: number;
  extension: InPlaceExtension;
  log: Logger;
  metrics?: ExtensionMetrics;
  /** Hook requests read and handled at once. Default DEFAULT_HOOK_SLOTS. */
  slots?: Slots;
}

export interface RunningExtensionServer {
  server: Server;
  port: number;
  close(): Promise<void>;
}

export async function startExtensionServer(
  o: ExtensionServerOptions,
): Promise<RunningExtensionServer> {
  const slots = o.slots ?? new Slots(DEFAULT_HOOK_SLOTS);
  const server = createServer(
    { cert: o.cert, key: o.key, minVersion: 'TLSv1.2', requestTimeout: 30_000 },
    (req, res) => {
      const handle = (): void => {
        void route(req, res).catch((error: unknown) => {
          o.log.error({ err: error }, 'extension request failed');
          if (!res.headersSent) sendJson(res, 500, unsupported((error as Error).message));
        });
      };
      // health checks never wait behind hooks: the kubelet's probe must not fail under load
      if (req.method === 'GET' && req.url === '/healthz') handle();
      else withSlot(slots, { req, res }, handle);
    },
  );
  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '').split('?')[0] ?? '';
    if (req.method === 'GET' && path === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      return;
    }
    const hook = ROUTES.get(path);
    const label = hook ?? (path === DISCOVERY_PATH ? 'Discovery' : 'other');
    const done = o.metrics?.requestDuration.startTimer({ hook: label });
    const send = (r: ServerResponse, code: number, body: unknown): void => {
      sendJson(r, code, body);
      done?.();
      o.metrics?.requests.inc(answerLabels(label, code, body));
    };
    if (path !== DISCOVERY_PATH && !hook) {
      send(res, 404, unsupported(`no handler at ${path}`));
      return;
    }
    if (req.method !== 'POST') {
      send(res, 405, unsupported(`${req.method ?? ''} ${path}: hooks are POSTed`));
      return;
    }
    let body: unknown;
    try {
      const raw = await readBody(req);
      body = raw.length === 0 ? {} : JSON.parse(raw.toString('utf8'));
    } catch (error) {
      send(res, 400, unsupported(`the request is not JSON: ${(error as Error).message}`));
      return;
    }
    if (!hook) {
      send(res, 200, discovery());
      return;
    }
    try {
      send(res, 200, await o.extension.handle(hook, body));
    } catch (error) {
      o.log.warn({ hook, err: error }, 'hook failed');
      send(res, 200, unsupported(`${hook}: ${(error as Error).message}`));
    }
  }
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port, o.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  return {
    server,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
        server.closeAllConnections();
      }),
  };
}
