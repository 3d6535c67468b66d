/**
 * The Kubernetes source: the agent's own reconcile Secret.
 * - A watch on exactly that Secret (field selector metadata.name=…, bookmarks on) delivers changes
 *   within the API server's latency; a 410 Gone relists; a broken stream reconnects with backoff.
 * - A metadata-only poll (PartialObjectMetadata: no Secret data crosses the wire) is the safety
 *   net for a watch that silently stalls: it compares the checksum annotation and fetches the data
 *   only when it changed.
 * Every payload is verified with decodeConfigData: a corrupted Secret is refused and reported,
 * and the agent keeps its last good state.
 * After a reported failure (API unreachable, Secret deleted or refused), the source says so once
 * it sees its Secret healthy again — by delivering the last good payload once more, even when its
 * checksum did not change — so the node's report does not stay Degraded until the next change.
 * The Secret's oscar.dev/osc label names the OperatingSystemConfig it was rendered from; the
 * source passes it on (onOscRef) so the node's report can say which config it follows — the
 * controller counts nodes per config by it.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import {
  ANNOTATION_CHECKSUM,
  CorruptPayloadError,
  decodeConfigData,
  decodeSecretData,
  LABEL_OSC,
} from '../api/secret.js';
import { ApiError, HttpKubeClient, isNotFound, type KubeHttp } from '../kube/client.js';
import { errorFields, shortChecksum, silentLogger, type Logger } from '../log/logger.js';
import { InvalidConfigError } from '../api/validate-config.js';
import { checkDesired } from './desired-check.js';
import type { Source, SourceEvents } from './source.js';
import type { Desired } from './state.js';
import { parseJsonText } from '../api/json-text.js';

const ACCEPT_PARTIAL_OBJECT = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1';

interface SecretObject {
  metadata?: {
    name?: string;
    resourceVersion?: string;
    annotations?: Record<string, string>;
    labels?: Record<string, string>;
  };
  data?: Record<string, string>;
}

/** The OperatingSystemConfig a reconcile Secret was rendered from. */
export interface OscRef {
  namespace: string;
  name: string;
}

/** The config named by the Secret's oscar.dev/osc label, if it carries one. */
export function oscRefOf(secret: SecretObject, namespace: string): OscRef | undefined {
  const name = secret.metadata?.labels?.[LABEL_OSC];
  return name ? { namespace, name } : undefined;
}

interface WatchEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: SecretObject & { code?: number; message?: string };
}

export interface SecretSourceOptions {
  namespace: string;
  name: string;
  /** Metadata-only poll interval (the watch delivers changes; this only catches a stalled watch). */
  pollIntervalMs: number;
  /** Server-side timeout of one watch request; the agent then re-watches from its resourceVersion. */
  watchTimeoutSeconds?: number;
  log?: Logger;
  /** Called once per API request (for the requests-per-minute metric). */
  onRequest?: () => void;
  /**
   * Called with the config a verified payload was rendered from (its oscar.dev/osc label),
   * right before that payload is delivered and only when it differs from the last one: wire it
   * to KubeReporter.setOscRef.
   */
  onOscRef?: (ref: OscRef) => void;
  /** Injected HTTP client (tests); default: one built from the kubeconfig. */
  http?: KubeHttp;
  backoffBaseMs?: number;
  backoffMaxMs?: number;
}

class Gone extends Error {}

export class SecretSource implements Source {
  readonly description: string;
  private readonly http: KubeHttp;
  private readonly path: string;
  private readonly log: Logger;
  private stopped = false;
  private abort = new AbortController();
  private pollTimer: NodeJS.Timeout | undefined;
  private watching: Promise<void> | undefined;
  /** Checksum of the last payload handled (delivered or refused): the same one is not redone. */
  private lastChecksum: string | undefined;
  private lastRefusal: string | undefined;
  private resourceVersion: string | undefined;
  private lastOscRef: OscRef | undefined;
  /** The last payload delivered, for the re-delivery that says the source works again. */
  private lastDesired: Desired | undefined;
  /** A failure was reported and no payload was delivered since. */
  private reportedFailure = false;
  /** The Secret, as last seen, holds the last delivered payload (not deleted, not refused). */
  private secretGood = false;

  constructor(
    kc: KubeConfig,
    private readonly opts: SecretSourceOptions,
  ) {
    this.http = opts.http ?? new HttpKubeClient(kc);
    this.log = opts.log ?? silentLogger();
    this.description = `Secret ${opts.namespace}/${opts.name}`;
    this.path = `/api/v1/namespaces/${encodeURIComponent(opts.namespace)}/secrets`;
  }

  private async request<T>(
    path: string,
    accept?: string,
    query?: Record<string, string>,
  ): Promise<T> {
    this.opts.onRequest?.();
    return this.http.request<T>('GET', path, {
      ...(accept ? { accept } : {}),
      ...(query ? { query } : {}),
      signal: this.abort.signal,
      timeoutMs: 30_000,
    });
  }

  async start(events: SourceEvents): Promise<void> {
    try {
      await this.fetch(events);
    } catch (error) {
      this.fail(events, error);
    }
    this.watching = this.watchLoop(events);
    this.pollTimer = setInterval(() => void this.poll(events), this.opts.pollIntervalMs);
    this.pollTimer.unref();
  }

  private fail(events: SourceEvents, error: unknown): void {
    if (isNotFound(error)) this.secretGood = false;
    this.reportedFailure = true;
    events.onError(this.describe(error));
  }

  /** After a reported failure: the API answers and the Secret holds the last good payload. */
  private recover(events: SourceEvents): void {
    if (!this.reportedFailure || !this.secretGood || !this.lastDesired) return;
    this.reportedFailure = false;
    this.log.info(
      { secret: this.secretKey(), checksum: shortChecksum(this.lastDesired.checksum) },
      'source healthy again',
    );
    events.onDesired(this.lastDesired);
  }

  private describe(error: unknown): Error {
    if (isNotFound(error)) {
      return new Error(`${this.description} does not exist (yet); keeping the last applied state`);
    }
    return error instanceof Error ? error : new Error(String(error));
  }

  /** GET the whole Secret and handle it. */
  private async fetch(events: SourceEvents): Promise<void> {
    const secret = await this.request<SecretObject>(
      `${this.path}/${encodeURIComponent(this.opts.name)}`,
    );
    this.handle(secret, events);
  }

  private handle(secret: SecretObject, events: SourceEvents): void {
    const checksum = secret.metadata?.annotations?.[ANNOTATION_CHECKSUM];
    if (checksum !== undefined && checksum === this.lastChecksum) {
      this.secretGood = true;
      this.recover(events);
      return;
    }
    try {
      const decoded = decodeConfigData(decodeSecretData(secret.data), checksum);
      // intact is not enough: the agent acts only on what oscar validate would let through
      checkDesired(decoded.config, this.description);
      this.lastChecksum = decoded.checksum;
      this.lastRefusal = undefined;
      this.noteOscRef(oscRefOf(secret, this.opts.namespace));
      const desired = { config: decoded.config, checksum: decoded.checksum, bytes: decoded.bytes };
      this.lastDesired = desired;
      this.secretGood = true;
      this.reportedFailure = false;
      events.onDesired(desired);
    } catch (error) {
      if (!(error instanceof CorruptPayloadError) && !(error instanceof InvalidConfigError)) {
        throw error;
      }
      this.secretGood = false;
      const key = `${checksum ?? ''}:${secret.metadata?.resourceVersion ?? ''}`;
      if (key === this.lastRefusal) return; // reported once per bad version
      this.lastRefusal = key;
      this.fail(
        events,
        error instanceof InvalidConfigError
          ? error
          : new CorruptPayloadError(
              `${this.description} refused, keeping the last good state: ${error.message}`,
              { cause: error },
            ),
      );
    }
  }

  /** The config the last verified payload came from (undefined: the Secret has no label). */
  get oscRef(): OscRef | undefined {
    return this.lastOscRef;
  }

  private noteOscRef(ref: OscRef | undefined): void {
    if (!ref || ref.name === this.lastOscRef?.name) return;
    this.lastOscRef = ref;
    this.opts.onOscRef?.(ref);
  }

  /** The safety net: metadata only; the data is fetched only when the checksum annotation moved. */
  private async poll(events: SourceEvents): Promise<void> {
    if (this.stopped) return;
    try {
      const meta = await this.request<SecretObject>(
        `${this.path}/${encodeURIComponent(this.opts.name)}`,
        ACCEPT_PARTIAL_OBJECT,
      );
      const checksum = meta.metadata?.annotations?.[ANNOTATION_CHECKSUM];
      const refusedKey = `${checksum ?? ''}:${meta.metadata?.resourceVersion ?? ''}`;
      if (checksum !== this.lastChecksum && refusedKey !== this.lastRefusal) {
        this.log.info(
          {
            secret: this.secretKey(),
            checksum: checksum === undefined ? 'none' : shortChecksum(checksum),
          },
          'poll: checksum annotation changed; fetching the Secret',
        );
        await this.fetch(events);
      } else if (checksum !== undefined && checksum === this.lastChecksum) {
        this.secretGood = true;
        this.recover(events);
      }
    } catch (error) {
      if (!this.isStopped()) this.fail(events, error);
    }
  }

  private async watchLoop(events: SourceEvents): Promise<void> {
    let failures = 0;
    const base = this.opts.backoffBaseMs ?? 500;
    const max = this.opts.backoffMaxMs ?? 30_000;
    while (!this.stopped) {
      try {
        if (this.resourceVersion === undefined) {
          const list = await this.request<{
            metadata?: { resourceVersion?: string };
            items?: SecretObject[];
          }>(this.path, undefined, { fieldSelector: `metadata.name=${this.opts.name}` });
          const item = list.items?.[0];
          if (item) this.handle(item, events);
          this.resourceVersion = list.metadata?.resourceVersion;
        }
        this.opts.onRequest?.();
        await this.http.stream(
          this.path,
          {
            query: {
              watch: 'true',
              fieldSelector: `metadata.name=${this.opts.name}`,
              allowWatchBookmarks: 'true',
              resourceVersion: this.resourceVersion,
              timeoutSeconds: String(this.opts.watchTimeoutSeconds ?? 600),
            },
            signal: this.abort.signal,
          },
          (line) => {
            failures = 0; // the stream works
            const event = parseJsonText(line) as WatchEvent;
            if (event.type === 'ERROR') {
              if (event.object.code === 410)
                throw new Gone(event.object.message ?? 'resourceVersion too old');
              throw new Error(
                `watch error: ${event.object.message ?? JSON.stringify(event.object)}`,
              );
            }
            const rv = event.object.metadata?.resourceVersion;
            if (rv) this.resourceVersion = rv;
            if (event.type === 'ADDED' || event.type === 'MODIFIED')
              this.handle(event.object, events);
            if (event.type === 'DELETED') {
              this.lastChecksum = undefined;
              this.secretGood = false;
              this.fail(
                events,
                new Error(`${this.description} was deleted; keeping the last applied state`),
              );
            }
            // Any event, a bookmark too, shows the watch works again.
            this.recover(events);
          },
        );
      } catch (error) {
        if (this.isStopped()) return;
        if (error instanceof Gone || (error instanceof ApiError && error.status === 410)) {
          this.log.info(
            { secret: this.secretKey() },
            'watch: resourceVersion expired (410 Gone); relisting',
          );
          this.resourceVersion = undefined;
          continue;
        }
        failures++;
        const delay = Math.min(max, base * 2 ** (failures - 1)) * (0.5 + Math.random() / 2);
        this.log.warn(
          { secret: this.secretKey(), ...errorFields(error), retryInMs: Math.round(delay) },
          'watch failed; reconnecting',
        );
        if (failures === 1) this.fail(events, error);
        await this.pause(delay);
      }
    }
  }

  /** Waits `ms`, or less when the source stops meanwhile (a stop never waits out a backoff). */
  private pause(ms: number): Promise<void> {
    const signal = this.abort.signal;
    if (signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
    });
  }

  /** "namespace/name", the `secret` field of log records. */
  private secretKey(): string {
    return `${this.opts.namespace}/${this.opts.name}`;
  }

  /** A method, not the field: the flag flips while awaits are pending. */
  private isStopped(): boolean {
    return this.stopped;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.pollTimer) clearInterval(this.pollTimer);
    this.abort.abort();
    await this.watching?.catch(() => undefined);
    if (this.http instanceof HttpKubeClient) this.http.close();
  }
}
