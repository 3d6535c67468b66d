/**
 * The grant source: the agent's own OperatingSystemConfigNode, watched with a field selector on
 * its name (bookmarks on; a 410 relists; a broken stream reconnects with backoff and jitter), and
 * the revision Secret each new grant names, fetched by name and verified against the grant's
 * checksum (and the Secret's own annotation, labels and OSC) before it is delivered.
 * - The safety net is a GET of the node object, only when the watch has been silent for a poll
 *   interval: a healthy watch costs no polls.
 * - restartWatch() drops the stream and opens a new one at once from the last resourceVersion;
 *   waitForVersion(rv) resolves once an event at or after rv arrives — together the proof, after
 *   an apply, that this node's watch works (try mode's connectivity check).
 * A grant that cannot be fetched is retried with backoff while it is the current one.
 */
import { errorFields, type Logger } from '../../log/logger.js';
import {
  ANNOTATION_CHECKSUM,
  CorruptPayloadError,
  decodeConfigData,
  decodeSecretData,
  LABEL_OSC,
} from '../../api/secret.js';
import { API_VERSION } from '../../api/constants.js';
import { ApiError, isNotFound, type KubeHttp } from '../../kube/client.js';
import type { Desired } from '../state.js';
import { GrantError, parseGrant, type Grant, type GrantScope } from './grant.js';
import { checkDesired } from '../desired-check.js';
import { InvalidConfigError } from '../../api/validate-config.js';
import { parseJsonText } from '../../api/json-text.js';

export interface GrantedDesired {
  grant: Grant;
  desired: Desired;
}

export interface GrantEvents {
  /** A new grant, its revision fetched and verified. */
  onGrant(g: GrantedDesired): void;
  /** A grant this agent refused, or could not fetch (it is retried). */
  onError(error: Error): void;
  /**
   * The API server answers again after `error` (a watch or poll that failed): a Degraded that
   * error alone caused is over — the grant is unchanged, so no new grant would clear it.
   */
  onRecovered?(error: Error): void;
}

export interface GrantSourceOptions extends GrantScope {
  node: string;
  http: KubeHttp;
  pollIntervalMs: number;
  watchTimeoutSeconds?: number;
  log?: Logger;
  onRequest?: () => void;
  backoffBaseMs?: number;
  backoffMaxMs?: number;
}

interface NodeObject {
  metadata?: { name?: string; resourceVersion?: string; generation?: number };
  spec?: unknown;
}

interface WatchEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: NodeObject & { code?: number; message?: string };
}

interface SecretObject {
  metadata?: { annotations?: Record<string, string>; labels?: Record<string, string> };
  data?: Record<string, string>;
}

class Gone extends Error {}

const NODES = `/apis/${API_VERSION}/operatingsystemconfignodes`;

function rvNumber(rv: string | undefined): number {
  const n = Number(rv);
  return Number.isFinite(n) ? n : 0;
}

export class GrantSource {
  readonly description: string;
  private stopped = false;
  private stopAll = new AbortController();
  private watchAbort = new AbortController();
  private watching: Promise<void> | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private resourceVersion: string | undefined;
  private lastEventAt = 0;
  /** The grant last delivered or refused: key "checksum@generation". */
  private handled: string | undefined;
  private current: Grant | undefined;
  private fetchFailures = 0;
  private waiters: { rv: number; resolve: () => void }[] = [];
  private seenRv = 0;
  private events: GrantEvents | undefined;
  /**
   * The failures reported as onError until the API server answers again: the watch's or poll's,
   * and the revision fetch's (each retry reports anew; the last one is what the node shows).
   */
  private readonly unanswered: { watch?: Error | undefined; fetch?: Error | undefined } = {};

  constructor(private readonly opts: GrantSourceOptions) {
    this.description = `grants of node ${opts.node} (${opts.namespace}/${opts.osc})`;
  }

  private get log(): Logger | undefined {
    return this.opts.log;
  }

  async start(events: GrantEvents): Promise<void> {
    this.events = events;
    try {
      await this.get();
    } catch (error) {
      // remembered as unanswered, so the watch's first answer says the source is back (the
      // node's Degraded condition clears; left set, it held a rollout place for good)
      if (!isNotFound(error)) this.transportFailed(error as Error);
    }
    this.watching = this.watchLoop();
    this.pollTimer = setInterval(() => void this.poll(), this.opts.pollIntervalMs);
    this.pollTimer.unref();
  }

  /** GET the node object (the safety net and the first read). */
  private async get(): Promise<void> {
    this.opts.onRequest?.();
    const node = await this.opts.http.request<NodeObject>(
      'GET',
      `${NODES}/${encodeURIComponent(this.opts.node)}`,
      { signal: this.stopAll.signal, timeoutMs: 30_000 },
    );
    this.recovered();
    this.handle(node);
  }

  private transportFailed(error: Error, what: 'watch' | 'fetch' = 'watch'): void {
    this.unanswered[what] = error;
    this.events?.onError(error);
  }

  /** An answer from the API server after a reported failure of the watch (or the fetch). */
  private recovered(what: 'watch' | 'fetch' = 'watch'): void {
    const e = this.unanswered[what];
    if (!e) return;
    this.unanswered[what] = undefined;
    this.events?.onRecovered?.(e);
  }

  private async poll(): Promise<void> {
    if (this.stopped || Date.now() - this.lastEventAt < this.opts.pollIntervalMs) return;
    try {
      await this.get();
    } catch (error) {
      if (!this.isStopped() && !isNotFound(error)) this.transportFailed(error as Error);
    }
  }

  private handle(node: NodeObject): void {
    const events = this.events;
    if (!events) return;
    let grant: Grant | undefined;
    try {
      grant = parseGrant(node, this.opts);
    } catch (error) {
      const key = `refused@${String(node.metadata?.generation ?? '')}`;
      if (key !== this.handled) {
        this.handled = key;
        events.onError(
          new GrantError(
            `refusing the grant of node ${this.opts.node}: ${(error as Error).message}`,
          ),
        );
      }
      return;
    }
    if (!grant) return;
    const key = `${grant.checksum}@${String(grant.generation)}`;
    if (key === this.handled) return;
    this.handled = key;
    this.current = grant;
    this.fetchFailures = 0;
    void this.fetch(grant);
  }

  /** Fetches and verifies the granted revision; retried with backoff while it is current. */
  private async fetch(grant: Grant): Promise<void> {
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    const events = this.events;
    if (!events || this.stopped || this.current !== grant) return;
    try {
      this.opts.onRequest?.();
      const secret = await this.opts.http.request<SecretObject>(
        'GET',
        `/api/v1/namespaces/${encodeURIComponent(this.opts.namespace)}/secrets/${encodeURIComponent(grant.secretName)}`,
        { signal: this.stopAll.signal, timeoutMs: 30_000 },
      );
      if (this.current !== grant) return; // a newer grant came meanwhile
      const desired = verifyRevision(secret, grant);
      this.fetchFailures = 0;
      // a grant the admission is already verifying (after a reboot) brings no apply to clear it
      this.recovered('fetch');
      events.onGrant({ grant, desired });
    } catch (error) {
      if (this.isStopped() || this.current !== grant) return;
      if (error instanceof InvalidConfigError) {
        // refused as it is (reason InvalidConfig), once: fetching it again cannot help; the
        // next grant is tried afresh
        events.onError(error);
        return;
      }
      this.fetchFailures++;
      const base = this.opts.backoffBaseMs ?? 1000;
      const max = this.opts.backoffMaxMs ?? 30_000;
      const delay = Math.min(max, base * 2 ** (this.fetchFailures - 1)) * (0.5 + Math.random() / 2);
      this.transportFailed(
        new Error(
          `revision ${String(grant.number)} (${grant.secretName}): ${(error as Error).message}; retrying in ${(delay / 1000).toFixed(1)} s`,
          { cause: error },
        ),
        'fetch',
      );
      this.retryTimer = setTimeout(() => void this.fetch(grant), delay);
      this.retryTimer.unref();
    }
  }

  /** Drops the watch connection and opens a new one at once, from the last resourceVersion. */
  restartWatch(): void {
    this.watchAbort.abort();
  }

  /** Resolves once the watch delivered an event at or after resourceVersion `rv`. */
  waitForVersion(rv: string): Promise<void> {
    const n = rvNumber(rv);
    if (this.seenRv >= n) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ rv: n, resolve }));
  }

  private saw(rv: string | undefined): void {
    this.lastEventAt = Date.now();
    this.recovered();
    if (rv === undefined) return;
    this.seenRv = Math.max(this.seenRv, rvNumber(rv));
    const ready = this.waiters.filter((w) => w.rv <= this.seenRv);
    this.waiters = this.waiters.filter((w) => w.rv > this.seenRv);
    for (const w of ready) w.resolve();
  }

  private async watchLoop(): Promise<void> {
    let failures = 0;
    while (!this.stopped) {
      this.watchAbort = new AbortController();
      const abort = AbortSignal.any([this.stopAll.signal, this.watchAbort.signal]);
      try {
        if (this.resourceVersion === undefined) await this.listOwnObject(abort);
        await this.watchOwnObject(abort, () => {
          failures = 0;
        });
        this.lastEventAt = Date.now(); // a normal end (timeoutSeconds) shows the watch worked
      } catch (error) {
        if (this.isStopped()) return;
        if (this.restarted()) continue; // restartWatch(): reconnect at once
        if (error instanceof Gone || (error instanceof ApiError && error.status === 410)) {
          this.resourceVersion = undefined;
          continue;
        }
        failures++;
        await this.backOff(failures, error as Error);
      }
    }
  }

  private get selector(): string {
    return `metadata.name=${this.opts.node}`;
  }

  /** The node object as it is now, and the version the watch starts after. */
  private async listOwnObject(abort: AbortSignal): Promise<void> {
    this.opts.onRequest?.();
    const list = await this.opts.http.request<{
      metadata?: { resourceVersion?: string };
      items?: NodeObject[];
    }>('GET', NODES, {
      query: { fieldSelector: this.selector },
      signal: abort,
      timeoutMs: 30_000,
    });
    this.recovered();
    const item = list.items?.[0];
    if (item) this.handle(item);
    this.resourceVersion = list.metadata?.resourceVersion;
    // the list is a read at that version over the new connection: a status write at or
    // before it is seen (the watch, starting after it, never delivers that write; without
    // this the connectivity proof waited for the next bookmark, a minute or more)
    this.saw(this.resourceVersion);
  }

  /** Watches the node object from the version last seen until the server ends the watch. */
  private async watchOwnObject(abort: AbortSignal, onEvent: () => void): Promise<void> {
    this.opts.onRequest?.();
    await this.opts.http.stream(
      NODES,
      {
        query: {
          watch: 'true',
          fieldSelector: this.selector,
          allowWatchBookmarks: 'true',
          resourceVersion: this.resourceVersion,
          timeoutSeconds: String(this.opts.watchTimeoutSeconds ?? 600),
        },
        signal: abort,
      },
      (line) => {
        onEvent();
        const event = parseJsonText(line) as WatchEvent;
        if (event.type === 'ERROR') {
          if (event.object.code === 410) throw new Gone(event.object.message ?? 'too old');
          throw new Error(`watch error: ${event.object.message ?? JSON.stringify(event.object)}`);
        }
        const rv = event.object.metadata?.resourceVersion;
        if (rv) this.resourceVersion = rv;
        if (event.type === 'ADDED' || event.type === 'MODIFIED') this.handle(event.object);
        this.saw(rv);
      },
    );
  }

  /** Waits out an exponential, jittered backoff (cut short by restartWatch or stop). */
  private async backOff(failures: number, error: Error): Promise<void> {
    const base = this.opts.backoffBaseMs ?? 500;
    const max = this.opts.backoffMaxMs ?? 30_000;
    const delay = Math.min(max, base * 2 ** (failures - 1)) * (0.5 + Math.random() / 2);
    this.log?.warn(
      { node: this.opts.node, retryInMs: Math.round(delay), ...errorFields(error) },
      'grant watch failed; reconnecting',
    );
    if (failures === 1) this.transportFailed(error);
    await new Promise<void>((r) => {
      const t = setTimeout(r, delay);
      this.watchAbort.signal.addEventListener('abort', () => {
        clearTimeout(t);
        r();
      });
    });
  }

  /** A method, not the field: the flag flips while awaits are pending. */
  private isStopped(): boolean {
    return this.stopped;
  }

  private restarted(): boolean {
    return this.watchAbort.signal.aborted;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.pollTimer) clearInterval(this.pollTimer);
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.stopAll.abort();
    this.watchAbort.abort();
    await this.watching?.catch(() => undefined);
  }
}

/** The revision Secret, checked against the grant: the granted OSC, its checksum, intact data. */
export function verifyRevision(secret: SecretObject, grant: Grant): Desired {
  const labels = secret.metadata?.labels ?? {};
  if (labels[LABEL_OSC] !== grant.osc) {
    throw new CorruptPayloadError(
      `${grant.secretName} is not a revision of ${grant.osc} (label ${LABEL_OSC}=${labels[LABEL_OSC] ?? 'missing'})`,
    );
  }
  const annotated = secret.metadata?.annotations?.[ANNOTATION_CHECKSUM];
  if (annotated !== grant.checksum) {
    throw new CorruptPayloadError(
      `${grant.secretName} holds revision ${(annotated ?? 'none').slice(0, 12)}…, not the granted ${grant.checksum.slice(0, 12)}… (the slot was reused; waiting for a new grant)`,
    );
  }
  const decoded = decodeConfigData(decodeSecretData(secret.data), grant.checksum);
  // intact is not enough: the agent acts only on what oscar validate would let through
  const config = checkDesired(
    decoded.config,
    `revision ${String(grant.number)} (${grant.secretName})`,
  );
  return { config, checksum: decoded.checksum, bytes: decoded.bytes };
}
