/**
 * A Renderer that forwards to an external renderer over HTTP (protocol: ./protocol.ts).
 *
 * Each call has a deadline per attempt; connection errors and plain 5xx answers are retried a
 * bounded number of times with exponential backoff and jitter; 4xx answers, structured
 * RenderErrors, TLS failures, timeouts and bad responses are final (retrying them would only
 * repeat the same answer or multiply the wait). The response is read as a stream and the
 * connection is cut as soon as it passes the size limit; a complete response is checked against
 * the RenderResponse schema before anything of it is used. Every failure is a RendererError, so
 * the controller can show it (Rendered=False) and keep the last good Secret.
 */
import http from 'node:http';
import https from 'node:https';
import { formatBytes } from '../../api/bytes.js';
import type { ResolvedConfig } from '../../api/resolved.js';
import type { Format } from '../../api/schema.js';
import type { RenderContext, RenderResult, Renderer } from '../types.js';
import {
  asRenderError,
  decodeResponse,
  encodeRequest,
  MEDIA_TYPE,
  ProtocolError,
} from './protocol.js';

/** Codes oscar's client sets itself; a renderer's structured error carries its own code. */
export type TransportCode =
  | 'Timeout'
  | 'Unreachable'
  | 'TLSError'
  | 'ServerError'
  | 'HttpError'
  | 'InvalidResponse'
  | 'ResponseTooLarge';

/**
 * An external rendering failed. `source` says whether the renderer refused (its structured
 * error: code, message and field exactly as it sent them) or the exchange failed (transport).
 */
export class RendererError extends Error {
  override name = 'RendererError';
  readonly code: string;
  readonly field: string | undefined;
  /** The renderer's own message (or the transport problem), without oscar's prefix. */
  readonly detail: string;
  readonly source: 'renderer' | 'transport';
  /** Where the renderer lives, without credentials or query. */
  readonly endpoint: string;
  readonly attempts: number;

  constructor(options: {
    code: string;
    message: string;
    field?: string | undefined;
    source: 'renderer' | 'transport';
    endpoint: string;
    attempts: number;
    cause?: unknown;
  }) {
    const where = options.field ? `${options.field}: ` : '';
    const who =
      options.source === 'renderer'
        ? `external renderer ${options.endpoint} refused (${options.code})`
        : `external renderer ${options.endpoint} failed (${options.code}${options.attempts > 1 ? `, ${String(options.attempts)} attempts` : ''})`;
    super(
      `${who}: ${where}${options.message}`,
      options.cause === undefined ? {} : { cause: options.cause },
    );
    this.code = options.code;
    this.field = options.field;
    this.detail = options.message;
    this.source = options.source;
    this.endpoint = options.endpoint;
    this.attempts = options.attempts;
  }
}

export interface WebhookRendererOptions {
  /** http:// or https:// URL the RenderRequest is POSTed to. */
  url: string;
  /** The spec.type values routed to this URL. */
  types: readonly string[];
  /** Formats it produces; the first is the default. */
  formats: readonly Format[];
  /** Deadline of one attempt, from connect to the last byte of the response. Default 10 s. */
  timeoutMs?: number;
  /** Extra attempts after a connection error or a plain 5xx. Default 2. */
  retries?: number;
  /** First backoff; doubles per retry, with jitter, capped at 5 s. Default 200 ms. */
  backoffMs?: number;
  /** Largest response body accepted. Default 8 MiB (a Secret holds 1 MiB; base64 adds a third). */
  maxResponseBytes?: number;
  /** PEM CA bundle that signs the renderer's certificate (instead of the system's CAs). */
  ca?: string | Buffer;
  /** The User-Agent header (the controller's, cli/support/version.ts userAgent); none by default. */
  userAgent?: string;
  /** Test seam: how to wait between attempts. */
  sleep?: (ms: number) => Promise<void>;
}

export const DEFAULT_TIMEOUT_MS = 10_000;
export const DEFAULT_RETRIES = 2;
export const DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024;
const MAX_BACKOFF_MS = 5_000;

/** Errors on the way to the renderer that a new connection may not hit. */
const RETRYABLE_NET = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'ENOTFOUND',
  'ECONNABORTED',
  'UND_ERR_SOCKET',
]);

interface Answer {
  status: number;
  contentType: string;
  body: Buffer;
}

/** One attempt's failure, before it becomes a RendererError. */
class AttemptFailure extends Error {
  constructor(
    readonly code: TransportCode,
    message: string,
    readonly retryable: boolean,
    cause?: unknown,
  ) {
    super(message, cause === undefined ? {} : { cause });
  }
}

/** The URL as it may appear in messages and logs: no user:password, no query. */
export function redactUrl(url: URL): string {
  return `${url.protocol}//${url.host}${url.pathname}`;
}

function netFailure(error: NodeJS.ErrnoException): AttemptFailure {
  const code = error.code ?? '';
  if (RETRYABLE_NET.has(code)) {
    return new AttemptFailure(
      'Unreachable',
      `cannot reach it: ${code} ${error.message}`.trim(),
      true,
      error,
    );
  }
  if (/CERT|SSL|TLS|SELF_SIGNED|UNABLE_TO|HOSTNAME|ALTNAME/.test(code)) {
    return new AttemptFailure(
      'TLSError',
      `TLS verification failed: ${error.message} (set caBundle or caFile to the CA that signs its certificate)`,
      false,
      error,
    );
  }
  return new AttemptFailure('Unreachable', `request failed: ${error.message}`, false, error);
}

export class WebhookRenderer implements Renderer {
  readonly types: readonly string[];
  readonly formats: readonly Format[];
  private readonly url: URL;
  private readonly endpoint: string;
  private readonly agent: http.Agent;
  private readonly timeoutMs: number;
  private readonly userAgent: string | undefined;
  private readonly retries: number;
  private readonly backoffMs: number;
  private readonly maxResponseBytes: number;
  private readonly sleep: (ms: number) => Promise<void>;

  constructor(options: WebhookRendererOptions) {
    this.url = new URL(options.url);
    if (this.url.protocol !== 'http:' && this.url.protocol !== 'https:') {
      throw new Error(`renderer URL ${options.url} must start with http:// or https://`);
    }
    this.endpoint = redactUrl(this.url);
    this.types = [...options.types];
    this.formats = [...options.formats];
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.userAgent = options.userAgent;
    this.retries = options.retries ?? DEFAULT_RETRIES;
    this.backoffMs = options.backoffMs ?? 200;
    this.maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    this.sleep = options.sleep ?? ((ms) => new Promise((r) => setTimeout(r, ms)));
    // keep-alive: the controller renders in bursts (a resync renders every OSC)
    this.agent =
      this.url.protocol === 'https:'
        ? new https.Agent({
            keepAlive: true,
            ...(options.ca === undefined ? {} : { ca: options.ca }),
          })
        : new http.Agent({ keepAlive: true });
  }

  async render(config: ResolvedConfig, context: RenderContext): Promise<RenderResult> {
    const body = Buffer.from(JSON.stringify(encodeRequest(config, context)), 'utf8');
    let attempt = 0;
    for (;;) {
      attempt++;
      let answer: Answer;
      try {
        answer = await this.post(body);
      } catch (error) {
        const failure =
          error instanceof AttemptFailure
            ? error
            : new AttemptFailure('Unreachable', (error as Error).message, false, error);
        if (failure.retryable && attempt <= this.retries) {
          await this.sleep(this.backoff(attempt));
          continue;
        }
        throw this.transportError(failure.code, failure.message, attempt, failure.cause);
      }
      const parsed = parseJson(answer.body);
      const refusal = parsed.ok ? asRenderError(parsed.value) : undefined;
      if (refusal !== undefined) {
        throw new RendererError({
          code: refusal.code,
          message: refusal.message,
          field: refusal.field,
          source: 'renderer',
          endpoint: this.endpoint,
          attempts: attempt,
        });
      }
      if (answer.status >= 500) {
        if (attempt <= this.retries) {
          await this.sleep(this.backoff(attempt));
          continue;
        }
        throw this.transportError(
          'ServerError',
          `HTTP ${String(answer.status)} without a RenderError body`,
          attempt,
        );
      }
      if (answer.status !== 200) {
        throw this.transportError(
          'HttpError',
          `HTTP ${String(answer.status)} without a RenderError body (is the URL right?)`,
          attempt,
        );
      }
      if (!parsed.ok) {
        throw this.transportError(
          'InvalidResponse',
          `the response is not JSON (${formatBytes(answer.body.length)}, content-type ${answer.contentType || 'none'})`,
          attempt,
        );
      }
      let result: RenderResult;
      try {
        result = decodeResponse(parsed.value);
      } catch (error) {
        if (error instanceof ProtocolError)
          throw this.transportError('InvalidResponse', error.message, attempt);
        throw error;
      }
      if (result.format !== context.format) {
        throw this.transportError(
          'InvalidResponse',
          `asked for format "${context.format}", got "${result.format}"`,
          attempt,
        );
      }
      return result;
    }
  }

  /** Closes idle keep-alive connections (tests, shutdown). */
  close(): void {
    this.agent.destroy();
  }

  private transportError(
    code: TransportCode,
    message: string,
    attempts: number,
    cause?: unknown,
  ): RendererError {
    return new RendererError({
      code,
      message,
      source: 'transport',
      endpoint: this.endpoint,
      attempts,
      cause,
    });
  }

  private backoff(attempt: number): number {
    const base = Math.min(MAX_BACKOFF_MS, this.backoffMs * 2 ** (attempt - 1));
    return Math.round(base / 2 + Math.random() * (base / 2));
  }

  private post(body: Buffer): Promise<Answer> {
    const transport = this.url.protocol === 'https:' ? https : http;
    return new Promise<Answer>((resolve, reject) => {
      let settled = false;
      const fail = (failure: AttemptFailure): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        req.destroy();
        reject(failure);
      };
      const req = transport.request(this.url, {
        method: 'POST',
        agent: this.agent,
        headers: {
          'content-type': MEDIA_TYPE,
          accept: MEDIA_TYPE,
          'content-length': String(body.length),
          ...(this.userAgent === undefined ? {} : { 'user-agent': this.userAgent }),
        },
      });
      const timer = setTimeout(() => {
        fail(
          new AttemptFailure(
            'Timeout',
            `no complete answer within ${String(this.timeoutMs)} ms`,
            false,
          ),
        );
      }, this.timeoutMs);
      req.on('error', (error: NodeJS.ErrnoException) => {
        fail(netFailure(error));
      });
      req.on('response', (res) => {
        const tooLarge = (): AttemptFailure =>
          new AttemptFailure(
            'ResponseTooLarge',
            `the response is larger than the ${formatBytes(this.maxResponseBytes)} limit`,
            false,
          );
        const declared = Number(res.headers['content-length'] ?? NaN);
        if (declared > this.maxResponseBytes) {
          fail(tooLarge());
          return;
        }
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > this.maxResponseBytes) fail(tooLarge());
          else chunks.push(chunk);
        });
        res.on('error', (error: NodeJS.ErrnoException) => {
          fail(netFailure(error));
        });
        res.on('end', () => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          resolve({
            status: res.statusCode ?? 0,
            contentType: res.headers['content-type'] ?? '',
            body: Buffer.concat(chunks, size),
          });
        });
      });
      req.end(body);
    });
  }
}

function parseJson(body: Buffer): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(body.toString('utf8')) as unknown };
  } catch {
    return { ok: false };
  }
}
