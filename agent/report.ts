/**
 * Reports this node's state in its OperatingSystemConfigNode (cluster-scoped, named after the
 * node): desired and applied checksum, conditions Applied and Degraded, the last error with the
 * failing unit's journal lines, the units the last apply touched, when it finished. The object
 * is created if missing; status goes through the status subresource as a merge patch. Writes are
 * coalesced (only the newest status is sent) and retried with exponential backoff and jitter, so
 * an API server outage loses nothing but the intermediate states.
 * status.oscRef names the OperatingSystemConfig this node follows (namespace, name, the Secret):
 * the name comes from the Secret's oscar.dev/osc label through setOscRef, and the controller
 * counts the nodes of each config by it (OSC status.nodes).
 * Drift (agent/drift/) lands in status.drift and the Drifted condition, and as Events
 * (events.k8s.io/v1) regarding that OperatingSystemConfig, in its namespace — where the agent's
 * Role lets it create them (a cluster-scoped object's Events would have to go to "default").
 */
import { randomBytes } from 'node:crypto';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Condition, OperatingSystemConfigNodeStatus, RevisionReport } from '../api/schema.js';
import { API_VERSION, OSC_KIND, OSC_NODE_KIND, type NodeSource } from '../api/constants.js';
import {
  ACCEPT_METADATA,
  ApiError,
  CONTENT_MERGE_PATCH,
  HttpKubeClient,
  isNotFound,
  type KubeHttp,
} from '../kube/client.js';
import { errorFields, type Logger } from '../log/logger.js';
import type { Reporter } from './agent.js';
import { ApplyError, type ApplyResult } from './apply.js';
import type { DriftReport } from './model/drift.js';
import { driftCondition, driftEvents, driftStatus, type DriftEvent } from './drift/report.js';
import { sleep } from '../api/util.js';

const PATH = '/apis/oscar.dev/v1alpha1/operatingsystemconfignodes';
/** Events a minute, at most: drift that flaps cannot flood the API server. */
const EVENTS_PER_MINUTE = 12;
/**
 * Drift alone writes the status at most this often. A local user who keeps rewriting a watched
 * file (a declared file in /tmp, say) makes a drift check every debounce interval (~100 ms), each
 * with another found hash: unpaced, every one was a status write, and every write wakes the
 * controller. The first change goes out at once, later ones as one write when the interval ends
 * (the newest state; any other write meanwhile carries it too).
 */
export const DRIFT_WRITE_INTERVAL_MS = 10_000;

export interface KubeReporterOptions {
  node: string;
  oscRef?: { namespace: string; name?: string; secretName?: string };
  log?: Logger;
  onRequest?: () => void;
  http?: KubeHttp;
  backoffBaseMs?: number;
  backoffMaxMs?: number;
  now?: () => Date;
}

type Status = OperatingSystemConfigNodeStatus;

/** Degraded reasons set by sourceFailed: the source's trouble, not an apply's. */
const SOURCE_REASONS = new Set(['InvalidSecret', 'InvalidConfig', 'SourceUnavailable']);

/** The Degraded reason for a refused or failed state, by the error's name. */
function reasonOf(error: Error, otherwise: string): string {
  switch (error.name) {
    case 'ReplacementNeeded':
      return 'ReplacementNeeded';
    case 'InvalidConfigError':
      return 'InvalidConfig';
    case 'CorruptPayloadError':
      return 'InvalidSecret';
    case 'RollbackRebootFailed':
    case 'RollbackUnhealthy':
      return error.name; // ROLLBACK_FAILED_REASONS: the node is not proven in any revision
    default:
      return otherwise;
  }
}

/** Keeps lastTransitionTime when a condition's status did not change (metav1.Condition rules). */
export function setCondition(
  conditions: readonly Condition[],
  next: Omit<Condition, 'lastTransitionTime'>,
  now: Date,
): Condition[] {
  const old = conditions.find((c) => c.type === next.type);
  const lastTransitionTime =
    old && old.status === next.status
      ? old.lastTransitionTime
      : now.toISOString().replace(/\.\d+Z$/, 'Z');
  return [...conditions.filter((c) => c.type !== next.type), { ...next, lastTransitionTime }].sort(
    (a, b) => (a.type < b.type ? -1 : 1),
  );
}

export class KubeReporter implements Reporter {
  private readonly http: KubeHttp;
  private status: Status = {};
  /** Fields to remove with the next patch (merge patch: null deletes). */
  private cleared = new Set<keyof Status>();
  private dirty = false;
  private sending: Promise<void> | undefined;
  private failures = 0;
  private stopped = false;
  /** Writes are numbered: a waiter asks for the first write that starts after a given number. */
  private epoch = 0;
  private writeWaiters: { epoch: number; resolve: (rv: string) => void }[] = [];
  private readonly eventTimes: number[] = [];
  private eventsDropped = 0;
  /** When drift last wrote (performance.now()), and the write waiting for the interval's end. */
  private lastDriftWrite = Number.NEGATIVE_INFINITY;
  private driftTimer: NodeJS.Timeout | undefined;
  /** Whether the status last handed to a write listed drift. */
  private driftShown = false;

  constructor(
    kc: KubeConfig,
    private readonly opts: KubeReporterOptions,
  ) {
    this.http = opts.http ?? new HttpKubeClient(kc);
    if (opts.oscRef) {
      this.status.oscRef = {
        namespace: opts.oscRef.namespace,
        name: opts.oscRef.name ?? '',
        ...(opts.oscRef.secretName ? { secretName: opts.oscRef.secretName } : {}),
      };
    }
  }

  private now(): Date {
    return this.opts.now?.() ?? new Date();
  }

  private condition(type: string, status: 'True' | 'False', reason: string, message: string): void {
    this.status.conditions = setCondition(
      this.status.conditions ?? [],
      { type, status, reason, message },
      this.now(),
    );
  }

  /**
   * The config this node follows, as the Secret's label names it. Sent with the next write: the
   * source calls this in the same tick as the payload's desired(), which makes it one request.
   */
  setOscRef(ref: { namespace: string; name: string }): void {
    const current = this.status.oscRef;
    if (current?.namespace === ref.namespace && current.name === ref.name) return;
    const secretName = current?.secretName ?? this.opts.oscRef?.secretName;
    this.status.oscRef = {
      namespace: ref.namespace,
      name: ref.name,
      ...(secretName ? { secretName } : {}),
    };
    this.push();
  }

  /** The applied checksum, and its first 12 characters for `kubectl get oscnode`. */
  private setApplied(checksum: string): void {
    this.status.appliedChecksum = checksum;
    this.status.appliedChecksumShort = checksum.slice(0, 12);
  }

  /** How this agent follows its configuration, and the OSC (grant mode names it up front). */
  setSource(source: NodeSource, oscRef?: { namespace: string; name: string }): void {
    this.status.source = source;
    if (oscRef) this.status.oscRef = { namespace: oscRef.namespace, name: oscRef.name };
    this.push();
  }

  /** Whether the node asks for a reboot (agent/reboot/required.ts); written only when it changes. */
  setRebootRequired(required: boolean): void {
    if ((this.status.rebootRequired === true) === required) return;
    if (required) {
      this.status.rebootRequired = true;
      this.cleared.delete('rebootRequired');
    } else {
      delete this.status.rebootRequired;
      this.cleared.add('rebootRequired');
    }
    this.push();
  }

  /** The agent's answer to its grant (grant mode, agent/rollout/). */
  setRevision(report: RevisionReport): void {
    this.status.revision = report;
    this.push();
  }

  /**
   * A mark: writeAfter(mark) resolves with the resourceVersion the first status write begun
   * after this call stored. Try mode uses it to prove a write reaches the API server.
   */
  mark(): number {
    return ++this.epoch;
  }

  writtenAfter(mark: number): Promise<string> {
    return new Promise((resolve) => this.writeWaiters.push({ epoch: mark, resolve }));
  }

  /** What the node carries from an earlier run: reported so a fresh node object says it too. */
  restored(checksum: string): void {
    this.setApplied(checksum);
    this.push();
  }

  desired(checksum: string): void {
    this.status.desiredChecksum = checksum;
    this.status.desiredChecksumShort = checksum.slice(0, 12);
    // The node already carries it (restored from an earlier run): no apply will come to say so.
    if (
      checksum === this.status.appliedChecksum &&
      !this.status.conditions?.some((c) => c.type === 'Applied')
    ) {
      this.condition('Applied', 'True', 'Applied', `${checksum.slice(0, 12)} is applied`);
      this.condition('Degraded', 'False', 'Applied', 'the node carries the desired state');
    }
    // A verified payload means the source works; if it is what this node already applied, a
    // Degraded that only the source caused is over (no apply will come to clear it).
    const degraded = this.status.conditions?.find((c) => c.type === 'Degraded');
    if (
      degraded?.status === 'True' &&
      SOURCE_REASONS.has(degraded.reason) &&
      checksum === this.status.appliedChecksum
    ) {
      this.condition(
        'Degraded',
        'False',
        'Applied',
        `the source is healthy again; ${checksum.slice(0, 12)} stays applied`,
      );
      delete this.status.lastError;
      this.cleared.add('lastError');
    }
    this.push();
  }

  applied(result: ApplyResult): void {
    this.setApplied(result.checksum);
    this.status.lastAppliedTime = this.now()
      .toISOString()
      .replace(/\.\d+Z$/, 'Z');
    if (result.touchedUnits.length > 0 || result.actions.length > 0) {
      this.status.restartedUnits = result.touchedUnits.map((u) => ({
        ...u,
        time: u.time.replace(/\.\d+Z$/, 'Z'),
      }));
    }
    this.condition(
      'Applied',
      'True',
      'Applied',
      `applied ${result.checksum.slice(0, 12)} (${result.actions.length} action(s))`,
    );
    this.condition('Degraded', 'False', 'Applied', 'the last apply succeeded');
    delete this.status.lastError;
    this.cleared.add('lastError');
    // a node that took a state in place after all (the change was undone) needs no new machine
    if (this.status.needsReplacement !== undefined) {
      delete this.status.needsReplacement;
      this.cleared.add('needsReplacement');
    }
    this.push();
  }

  failed(checksum: string, error: Error): void {
    const unit = error instanceof ApplyError ? error.unit : undefined;
    const journal = error instanceof ApplyError ? error.journal : [];
    this.status.lastError = {
      message: error.message.slice(0, 4000),
      ...(unit ? { unit } : {}),
      ...(journal.length > 0 ? { journal } : {}),
      time: this.now()
        .toISOString()
        .replace(/\.\d+Z$/, 'Z'),
    };
    this.cleared.delete('lastError');
    // a state the node cannot take in place says so, for the provider to replace the machine
    const reason = reasonOf(error, 'ApplyFailed');
    if (reason === 'ReplacementNeeded') {
      this.status.needsReplacement = true;
      this.cleared.delete('needsReplacement');
    }
    this.condition(
      'Applied',
      'False',
      reason,
      `applying ${checksum.slice(0, 12)} failed; the last good state stays`,
    );
    this.condition('Degraded', 'True', reason, error.message.slice(0, 4000));
    this.push();
  }

  sourceFailed(error: Error): void {
    this.status.lastError = {
      message: error.message.slice(0, 4000),
      time: this.now()
        .toISOString()
        .replace(/\.\d+Z$/, 'Z'),
    };
    this.cleared.delete('lastError');
    this.condition(
      'Degraded',
      'True',
      reasonOf(error, 'SourceUnavailable'),
      error.message.slice(0, 4000),
    );
    this.push();
  }

  /**
   * The source answers again after `error`: if the node is Degraded by that very error (nothing
   * since), it is not any more — in grant mode an unchanged grant brings no new desired state
   * that would clear it, and a Degraded node holds a place of the rollout's maxUnavailable.
   */
  sourceRecovered(error: Error): void {
    const degraded = this.status.conditions?.find((c) => c.type === 'Degraded');
    if (
      degraded?.status !== 'True' ||
      degraded.reason !== 'SourceUnavailable' ||
      degraded.message !== error.message.slice(0, 4000)
    ) {
      return;
    }
    const applied = this.status.appliedChecksum;
    this.condition(
      'Degraded',
      'False',
      'SourceAvailable',
      `the source answers again${applied ? `; ${applied.slice(0, 12)} stays applied` : ''}`,
    );
    delete this.status.lastError;
    this.cleared.add('lastError');
    this.push();
  }

  /** What drifted changed: status.drift, the Drifted condition, and Events. */
  drift(report: DriftReport): void {
    this.status.drift = driftStatus(report);
    const c = driftCondition(report);
    this.condition('Drifted', c.status, c.reason, c.message);
    this.pushDrift();
    for (const e of driftEvents(report)) this.event(e);
  }

  /**
   * push(), paced to one write per DRIFT_WRITE_INTERVAL_MS — except a node found clean again after
   * a write that showed drift, which goes out at once (a revert or a fix is not held back). That
   * cannot make a storm: each such write follows a paced one, so at most two per interval.
   */
  private pushDrift(): void {
    if (this.driftShown && (this.status.drift?.count ?? 0) === 0) {
      this.push();
      return;
    }
    if (this.driftTimer) return; // the waiting write sends the newest state
    const wait = this.lastDriftWrite + DRIFT_WRITE_INTERVAL_MS - performance.now();
    if (wait <= 0) {
      this.lastDriftWrite = performance.now();
      this.push();
      return;
    }
    this.driftTimer = setTimeout(() => {
      this.driftTimer = undefined;
      this.lastDriftWrite = performance.now();
      this.push();
    }, wait);
    this.driftTimer.unref();
  }

  /** A revert restarted units: they show in restartedUnits as an apply's do. */
  reverted(result: ApplyResult): void {
    if (result.touchedUnits.length === 0) return;
    this.status.restartedUnits = result.touchedUnits.map((u) => ({
      ...u,
      time: u.time.replace(/\.\d+Z$/, 'Z'),
    }));
    this.push();
  }

  /** Best effort and bounded: the status is the record, an Event is a notice. */
  private event(e: DriftEvent): void {
    const ref = this.status.oscRef;
    if (!ref?.namespace) return;
    const now = this.now();
    while (this.eventTimes.length > 0 && now.getTime() - (this.eventTimes[0] ?? 0) > 60_000)
      this.eventTimes.shift();
    if (this.eventTimes.length >= EVENTS_PER_MINUTE) {
      if (this.eventsDropped++ === 0)
        this.opts.log?.warn(
          { eventsPerMinute: EVENTS_PER_MINUTE },
          'drift Events dropped until they calm down; the status keeps the record',
        );
      return;
    }
    this.eventTimes.push(now.getTime());
    this.eventsDropped = 0;
    const regarding = ref.name
      ? { apiVersion: API_VERSION, kind: OSC_KIND, namespace: ref.namespace, name: ref.name }
      : { apiVersion: 'v1', kind: 'Secret', namespace: ref.namespace, name: ref.secretName ?? '' };
    const body = {
      apiVersion: 'events.k8s.io/v1',
      kind: 'Event',
      // named as client-go's recorder names them (events.k8s.io refuses a generateName ending in ".")
      metadata: {
        name: `${this.opts.node.slice(0, 200)}.${now.getTime().toString(16)}${randomBytes(3).toString('hex')}`,
        namespace: ref.namespace,
      },
      eventTime: now.toISOString().replace(/(\.\d{3})Z$/, '$1000Z'), // MicroTime
      reportingController: 'oscar.dev/agent',
      reportingInstance: this.opts.node.slice(0, 128),
      action: e.action,
      reason: e.reason,
      type: e.type,
      note: e.note,
      regarding,
      related: { apiVersion: API_VERSION, kind: OSC_NODE_KIND, name: this.opts.node },
    };
    this.opts.onRequest?.();
    this.http
      .request(
        'POST',
        `/apis/events.k8s.io/v1/namespaces/${encodeURIComponent(ref.namespace)}/events`,
        {
          body,
        },
      )
      .catch((error: unknown) => {
        this.opts.log?.warn({ reason: e.reason, ...errorFields(error) }, 'drift Event not sent');
      });
  }

  private push(): void {
    if (this.driftTimer) {
      // this write carries the drift that was waiting
      clearTimeout(this.driftTimer);
      this.driftTimer = undefined;
    }
    this.driftShown = (this.status.drift?.count ?? 0) > 0;
    this.dirty = true;
    if (!this.sending) {
      // Started a microtask later, so updates made in the same tick (oscRef and desired
      // checksum, say) go out as one request.
      this.sending = Promise.resolve()
        .then(() => this.sendLoop())
        .finally(() => {
          this.sending = undefined;
        });
    }
  }

  private async sendLoop(): Promise<void> {
    while (this.dirty && !this.stopped) {
      this.dirty = false;
      const body: Record<string, unknown> = { ...this.status };
      for (const key of this.cleared) body[key] = null;
      const epoch = this.epoch;
      try {
        const rv = await this.send(body);
        this.cleared.clear();
        this.failures = 0;
        const done = this.writeWaiters.filter((w) => w.epoch <= epoch);
        this.writeWaiters = this.writeWaiters.filter((w) => w.epoch > epoch);
        for (const w of done) w.resolve(rv);
      } catch (error) {
        this.dirty = true;
        this.failures++;
        const base = this.opts.backoffBaseMs ?? 500;
        const max = this.opts.backoffMaxMs ?? 30_000;
        const delay = Math.min(max, base * 2 ** (this.failures - 1)) * (0.5 + Math.random() / 2);
        if (this.failures === 1 || this.failures % 10 === 0) {
          this.opts.log?.warn(
            {
              node: this.opts.node,
              ...errorFields(error),
              failures: this.failures,
              retryInMs: Math.round(delay),
            },
            'report failed; retrying',
          );
        }
        await sleep(delay);
      }
    }
  }

  /**
   * One status write; returns its resourceVersion. The object is created only when the write
   * finds none (404): a bootstrapped node's object already exists, made and labelled with its
   * config's UID by the identity approver, and the admission policy refuses a node's create of an
   * object without that label before the API server could answer "exists".
   */
  private async send(status: Record<string, unknown>): Promise<string> {
    const path = `${PATH}/${encodeURIComponent(this.opts.node)}`;
    const write = async (): Promise<string> => {
      this.opts.onRequest?.();
      const stored = await this.http.request<
        { metadata?: { resourceVersion?: string } } | undefined
      >('PATCH', `${path}/status`, {
        body: { status: clearingStaleSecret(status) },
        contentType: CONTENT_MERGE_PATCH,
        accept: ACCEPT_METADATA,
      });
      return stored?.metadata?.resourceVersion ?? '';
    };
    try {
      return await write();
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
    this.opts.onRequest?.();
    try {
      await this.http.request('POST', PATH, {
        body: {
          apiVersion: API_VERSION,
          kind: OSC_NODE_KIND,
          metadata: { name: this.opts.node },
        },
      });
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 409)) throw error; // 409: made meanwhile
    }
    return write();
  }

  /** Waits until the newest status was written (or `timeoutMs` passed). */
  async flush(timeoutMs = 15_000): Promise<void> {
    if (this.driftTimer) this.push(); // a flush (shutdown, tests) does not wait for the pacing
    const deadline = Date.now() + timeoutMs;
    while ((this.sending || this.dirty) && Date.now() < deadline) {
      await Promise.race([this.sending, sleep(100)]);
    }
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.driftTimer);
    if (this.http instanceof HttpKubeClient) this.http.close();
  }
}

/**
 * A merge patch keeps what it leaves out: a node that moved from --secret to grant mode (--osc)
 * would go on showing the Secret it no longer follows (`kubectl get oscnode`'s SECRET column).
 * An oscRef without a Secret says so with null, which removes the stored one.
 */
export function clearingStaleSecret(status: Record<string, unknown>): Record<string, unknown> {
  const ref = status.oscRef as { secretName?: string } | undefined;
  if (ref === undefined || ref.secretName !== undefined) return status;
  return { ...status, oscRef: { ...ref, secretName: null } };
}
