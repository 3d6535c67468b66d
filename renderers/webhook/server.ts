/**
 * Serves renderers over the external renderer protocol (./protocol.ts), so the built-ins speak
 * the same contract as a provider's own: `POST /render` with a RenderRequest, `GET /healthz`.
 * Refusals are RenderErrors: 400 for a request that breaks the protocol, 422 for a config the
 * renderer will not render (the field errors of a ValidationError), 500 for a renderer crash.
 */
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import express, { type NextFunction, type Request, type Response } from 'express';
import { formatFieldError, ValidationError } from '../../api/field-error.js';
import { Slots, withSlot } from '../../api/slots.js';
import type { RendererRegistry } from '../registry.js';
import {
  decodeRequest,
  encodeError,
  encodeResponse,
  ProtocolError,
  type ErrorDetail,
} from './protocol.js';

export const RENDER_PATH = '/render';

/**
 * Renders in progress at once (bodies read, parsed, rendered), by default: rendering is CPU work,
 * so more at once would not finish sooner, and each may hold a 16 MiB body and its parse.
 */
export const DEFAULT_RENDER_SLOTS = 2;

export interface ServeOptions {
  /** Largest request body accepted. Default 16 MiB. */
  maxRequestBytes?: number;
  /**
   * Requests read and rendered at once; the rest wait, unread, in arrival order (api/slots.ts).
   * Default DEFAULT_RENDER_SLOTS.
   */
  slots?: Slots;
  /** Called once per request, for logs; never given request or response bodies. */
  onRequest?: (entry: {
    type: string;
    format: string;
    status: number;
    ms: number;
    code?: string;
  }) => void;
}

function sendError(res: Response, status: number, detail: ErrorDetail): void {
  res
    .status(status)
    .type('application/json')
    .send(JSON.stringify(encodeError(detail)));
}

/** An express app that renders with `registry`, for the types in `types` (default: all). */
export function createRendererApp(
  registry: RendererRegistry,
  types: readonly string[] = registry.types(),
  options: ServeOptions = {},
): express.Express {
  const app = express();
  app.disable('x-powered-by');
  // express would hash every response for an ETag: megabytes of sha1 no client uses
  app.set('etag', false);
  app.get('/healthz', (_req, res) => {
    res.type('text/plain').send('ok');
  });
  const slots = options.slots ?? new Slots(DEFAULT_RENDER_SLOTS);
  app.post(
    RENDER_PATH,
    (req, res, next) => {
      withSlot(slots, { req, res }, next);
    },
    express.json({ limit: options.maxRequestBytes ?? 16 * 1024 * 1024, type: () => true }),
    renderHandler(registry, new Set(types), options),
  );
  // body-parser's failures (bad JSON, too large) as RenderErrors rather than HTML pages
  app.use(bodyErrorHandler(options));
  return app;
}

/** POST /render: decode the request, pick the served renderer, render, answer; one log entry. */
function renderHandler(
  registry: RendererRegistry,
  served: ReadonlySet<string>,
  options: ServeOptions,
): (req: Request, res: Response) => Promise<void> {
  return async (req, res) => {
    const t0 = performance.now();
    let type = '?';
    let format = '?';
    const answer = (status: number, detail?: ErrorDetail): void => {
      if (detail) sendError(res, status, detail);
      options.onRequest?.({
        type,
        format,
        status,
        ms: performance.now() - t0,
        ...(detail ? { code: detail.code } : {}),
      });
    };
    let decoded;
    try {
      decoded = decodeRequest(req.body);
    } catch (error) {
      if (!(error instanceof ProtocolError)) throw error;
      answer(400, { code: 'BadRequest', message: error.message });
      return;
    }
    const { config, context } = decoded;
    type = config.type;
    format = context.format;
    const renderer = served.has(config.type) ? registry.get(config.type) : undefined;
    if (renderer === undefined) {
      answer(422, unknownType(served, config.type));
      return;
    }
    try {
      const result = await renderer.render(config, context);
      res
        .status(200)
        .type('application/json')
        .send(JSON.stringify(encodeResponse(result)));
      answer(200);
    } catch (error) {
      answer(...renderFailure(error));
    }
  };
}

function unknownType(served: ReadonlySet<string>, type: string): ErrorDetail {
  return {
    code: 'UnknownType',
    field: 'spec.type',
    message: `this renderer serves ${[...served]
      .sort()
      .map((t) => `"${t}"`)
      .join(', ')}, not "${type}"`,
  };
}

/** A renderer's refusal (422 with its field errors) or crash (500). */
function renderFailure(error: unknown): [number, ErrorDetail] {
  if (!(error instanceof ValidationError)) {
    return [500, { code: 'RenderFailed', message: (error as Error).message }];
  }
  const first = error.errors[0];
  return [
    422,
    {
      code: 'Invalid',
      message:
        error.errors.length === 1 && first
          ? first.message
          : error.errors.map(formatFieldError).join('; '),
      ...(error.errors.length === 1 && first?.path ? { field: first.path } : {}),
    },
  ];
}

/** body-parser's failures: 413 too large, 400 not JSON, anything else as itself. */
function bodyErrorHandler(
  options: ServeOptions,
): (
  error: Error & { type?: string; status?: number },
  req: Request,
  res: Response,
  next: NextFunction,
) => void {
  return (error, _req, res, next) => {
    if (res.headersSent) {
      next(error);
      return;
    }
    const [status, detail]: [number, ErrorDetail] =
      error.type === 'entity.too.large'
        ? [
            413,
            {
              code: 'RequestTooLarge',
              message: 'the request body is larger than this renderer accepts',
            },
          ]
        : error.type === 'entity.parse.failed'
          ? [400, { code: 'BadRequest', message: 'the request body is not JSON' }]
          : [error.status ?? 500, { code: 'Internal', message: error.message }];
    sendError(res, status, detail);
    options.onRequest?.({ type: '?', format: '?', status, ms: 0, code: detail.code });
  };
}

export interface ListenOptions {
  host: string;
  port: number;
  /** PEM certificate and key: serve HTTPS. */
  tls?: { cert: string | Buffer; key: string | Buffer };
  /** The whole request (headers and body) must arrive within this. Default 30 s. */
  requestTimeoutMs?: number;
  /** The headers must arrive within this. Default 10 s. */
  headersTimeoutMs?: number;
}

/**
 * A client that sends its request a byte at a time ("slowloris") holds a connection and its
 * buffers for as long as the server waits: Node.js waits 300 s for a request and 60 s for its
 * headers by default, checked every 30 s. The controller sends a whole request at once (at most
 * 16 MiB on the cluster network), so 10 s for the headers and 30 s for everything (as the
 * extension's server) is plenty for it and short for an attacker; the check runs every second.
 */
function timeouts(options: ListenOptions): {
  requestTimeout: number;
  headersTimeout: number;
  connectionsCheckingInterval: number;
} {
  const requestTimeout = options.requestTimeoutMs ?? 30_000;
  const headersTimeout = Math.min(options.headersTimeoutMs ?? 10_000, requestTimeout);
  return {
    requestTimeout,
    headersTimeout,
    connectionsCheckingInterval: Math.min(1000, headersTimeout),
  };
}

export interface RunningServer {
  server: Server;
  /** Base URL, such as http://127.0.0.1:8443 (append RENDER_PATH to render). */
  url: string;
  close(): Promise<void>;
}

export async function listen(app: express.Express, options: ListenOptions): Promise<RunningServer> {
  const limits = timeouts(options);
  const server: Server = options.tls
    ? createHttpsServer({ cert: options.tls.cert, key: options.tls.key, ...limits }, app)
    : createHttpServer(limits, app);
  // keep idle connections longer than a controller's burst of renders
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `${options.tls ? 'https' : 'http'}://${host}:${String(address.port)}`;
  return {
    server,
    url,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
        server.closeAllConnections();
      }),
  };
}

/** "host:port", ":port" or "port" → host and port (host default 0.0.0.0). */
export function parseListen(addr: string): { host: string; port: number } {
  const i = addr.lastIndexOf(':');
  const host = i <= 0 ? '0.0.0.0' : addr.slice(0, i).replace(/^\[(.*)\]$/, '$1');
  const port = Number(i < 0 ? addr : addr.slice(i + 1));
  if (!Number.isInteger(port) || port < 0 || port > 65535 || addr.trim() === '') {
    throw new Error(`--listen "${addr}": expected host:port such as ":8443" or "127.0.0.1:0"`);
  }
  return { host, port };
}
