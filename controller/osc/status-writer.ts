/**
 * One writer of each OSC's status for the two controllers of the process that write it: the OSC
 * controller (the rendering, the conditions, status.nodes) and the rollout controller
 * (status.rollout). Both parts go out as one server-side apply of the whole status under one
 * field manager, so a node report that moves the node counts and the rollout's progress is one
 * write, not two (7 of the 22 OSC status writes of the Cluster API bench were such pairs:
 * docs/performance.md).
 *
 * Each controller hands over its part as it last computed it:
 * - write(): the part is due (its controller's pacing says so). Resolves once a write carrying it
 *   is stored, or at once if the status would not change. If the other controller has a pass of
 *   the same OSC queued or running, the write waits for that pass (at most GATHER_MAX_MS), so the
 *   two parts one event moved go out together.
 * - offer(): the part is not due yet (counts within their pacing interval). It goes out with the
 *   OSC's next write, whoever's; its controller asks again when its interval is up.
 * One write per OSC at a time. A part handed over while a write is in flight goes out with the next
 * one; a part its controller handed over as unchanged while a write was in flight, but which that
 * write made stale, is written next by itself (its controller will not come back for it: never
 * lost); a status equal to the stored one is not sent (never resent). A paced part left over
 * is not forced out: its controller comes back when its interval is up.
 *
 * Upgrade: before this writer, status.rollout had its own field manager (oscar-rollout). An apply
 * that omits a field removes it only if no other manager owns it, so the old manager's fields
 * would stay forever. When a write's answer shows that manager still owning status fields, the
 * writer applies an empty status as that manager once: it releases them, and what the write just
 * sent stays (owned by the one manager now), what it left out goes.
 */
import type { OperatingSystemConfigStatus, RolloutStatus } from '../../api/schema.js';
import { realClock, type Clock, type Timer } from '../kube/clock.js';
import type { KubeObject } from '../kube/types.js';
import { OwnWrites } from '../runtime/own-writes.js';
import { jsonEqual, splitKey } from './reconcile.js';

export type StatusPart = 'osc' | 'rollout';
const PARTS: readonly StatusPart[] = ['osc', 'rollout'];

/** How long a due write waits at most for the other controller's pass of the same OSC. */
export const GATHER_MAX_MS = 500;

/** The field manager that owned status.rollout before this writer (released on upgrade). */
export const LEGACY_ROLLOUT_MANAGER = 'oscar-rollout';

/** The requests: the whole status applied, and a legacy manager's status fields released. */
export interface StatusApi {
  patchStatus(
    namespace: string,
    name: string,
    status: OperatingSystemConfigStatus,
  ): Promise<KubeObject | undefined>;
  releaseStatus(namespace: string, name: string, manager: string): Promise<KubeObject | undefined>;
}

export interface StatusWriterOptions {
  api: StatusApi;
  /** The OSC as the watch last delivered it (not laid over with own writes). */
  cached(
    key: string,
  ): { status?: OperatingSystemConfigStatus; resourceVersion?: string } | undefined;
  clock?: Clock;
}

/** A producer of a part: whether it has a pass of the OSC queued or running. */
export interface StatusProducer {
  pending(key: string): boolean;
}

/** Told of every status write: the whole status sent and the metadata the server stored. */
export type StatusWritten = (
  key: string,
  status: OperatingSystemConfigStatus,
  stored: KubeObject,
) => void;

interface Parts {
  osc?: OperatingSystemConfigStatus;
  rollout?: RolloutStatus;
}

interface Waiter {
  resolve(stored: KubeObject | undefined): void;
  reject(error: unknown): void;
}

interface Entry {
  /** Each controller's latest part that may differ from the stored status. */
  parts: Parts;
  /** Passes waiting for the next write. */
  waiters: Waiter[];
  /** A part was left differing from a write: write again without anyone waiting. */
  due: boolean;
  /**
   * Parts handed over during a write as equal to the stored status: their controllers are done
   * with them, so if that write stored something else, the writer writes them back itself.
   */
  unchanged: Set<StatusPart>;
  /** Producers whose pass reached its status (or ended) since the last write began. */
  settled: Set<StatusPart>;
  inFlight: boolean;
  gather?: Timer;
  gatherExpired: boolean;
  /** A write nobody waited for failed: it is tried again then (its parts would wait otherwise). */
  retry?: Timer;
  failures: number;
}

function withoutRollout(s: OperatingSystemConfigStatus | undefined): OperatingSystemConfigStatus {
  const out = { ...s };
  delete out.rollout;
  return out;
}

/** The stored status with the parts laid over it. */
export function composeStatus(
  known: OperatingSystemConfigStatus | undefined,
  parts: Parts,
): OperatingSystemConfigStatus {
  const base = parts.osc ? withoutRollout(parts.osc) : withoutRollout(known);
  const rollout = parts.rollout ?? known?.rollout;
  return rollout === undefined ? base : { ...base, rollout };
}

function partOf(status: OperatingSystemConfigStatus | undefined, part: StatusPart): unknown {
  return part === 'rollout' ? status?.rollout : withoutRollout(status);
}

/** Whether a write's answer shows the legacy rollout manager still owning status fields. */
export function legacyOwnsStatus(stored: KubeObject | undefined): boolean {
  const meta = stored?.metadata as
    { managedFields?: { manager?: string; subresource?: string }[] } | undefined;
  const managed = meta?.managedFields;
  return (managed ?? []).some(
    (m) => m.manager === LEGACY_ROLLOUT_MANAGER && m.subresource === 'status',
  );
}

export class OscStatusWriter {
  private readonly entries = new Map<string, Entry>();
  private readonly own = new OwnWrites<OperatingSystemConfigStatus>();
  private readonly producers = new Map<StatusPart, StatusProducer>();
  private readonly listeners: StatusWritten[] = [];
  private readonly clock: Clock;

  constructor(private readonly o: StatusWriterOptions) {
    this.clock = o.clock ?? realClock;
  }

  /** A controller that hands over `part`: the writer waits for its queued passes. */
  producer(part: StatusPart, p: StatusProducer): void {
    this.producers.set(part, p);
  }

  onWritten(listener: StatusWritten): void {
    this.listeners.push(listener);
  }

  /** The status as last stored: our own last write while the watch has not delivered it. */
  known(key: string): OperatingSystemConfigStatus | undefined {
    const cached = this.o.cached(key);
    return this.own.newerThan(key, cached?.resourceVersion) ?? cached?.status;
  }

  /** The part as its controller computed it, not due yet: it rides along with the next write. */
  offer(key: string, part: 'osc', value: OperatingSystemConfigStatus): void;
  offer(key: string, part: 'rollout', value: RolloutStatus | undefined): void;
  offer(key: string, part: StatusPart, value: unknown): void {
    const e = this.entries.get(key);
    const equal = jsonEqual(value, partOf(this.known(key), part));
    if ((value === undefined || equal) && !e?.inFlight) {
      // Nothing to carry (and no write in flight whose answer could make it differ).
      if (e) {
        this.setPart(e, part, undefined);
        e.settled.add(part);
        this.schedule(key, e); // a write waiting for this pass may go
      }
      this.tidy(key);
      return;
    }
    const entry = e ?? this.entry(key);
    this.setPart(entry, part, value);
    if (value === undefined || equal) entry.unchanged.add(part);
    else entry.unchanged.delete(part);
    entry.settled.add(part);
    this.schedule(key, entry);
  }

  /** The part is due: resolves with the stored metadata once a write carries it. */
  write(
    key: string,
    part: 'osc',
    value: OperatingSystemConfigStatus,
  ): Promise<KubeObject | undefined>;
  write(key: string, part: 'rollout', value: RolloutStatus): Promise<KubeObject | undefined>;
  write(key: string, part: StatusPart, value: unknown): Promise<KubeObject | undefined> {
    const entry = this.entry(key);
    this.setPart(entry, part, value);
    entry.unchanged.delete(part);
    entry.settled.add(part);
    return new Promise((resolve, reject) => {
      entry.waiters.push({ resolve, reject });
      this.schedule(key, entry);
    });
  }

  /** A producer's pass of the OSC ended: a write waiting for it may go. */
  passDone(part: StatusPart, key: string): void {
    const e = this.entries.get(key);
    if (!e) return;
    e.settled.add(part);
    this.schedule(key, e);
  }

  /** The OSC is gone: nothing of it is kept. */
  forget(key: string): void {
    const e = this.entries.get(key);
    e?.gather?.cancel();
    e?.retry?.cancel();
    this.entries.delete(key);
    this.own.forget(key);
  }

  private entry(key: string): Entry {
    let e = this.entries.get(key);
    if (!e) {
      e = {
        parts: {},
        waiters: [],
        due: false,
        unchanged: new Set(),
        settled: new Set(),
        inFlight: false,
        gatherExpired: false,
        failures: 0,
      };
      this.entries.set(key, e);
    }
    return e;
  }

  /** Sets a part; undefined: the part is the stored one. */
  private setPart(e: Entry, part: StatusPart, value: unknown): void {
    if (part === 'osc') {
      if (value === undefined) delete e.parts.osc;
      else e.parts.osc = value as OperatingSystemConfigStatus;
    } else if (value === undefined) delete e.parts.rollout;
    else e.parts.rollout = value as RolloutStatus;
  }

  /** Drops an entry that holds nothing. */
  private tidy(key: string): void {
    const e = this.entries.get(key);
    if (
      e &&
      !e.inFlight &&
      !e.gather &&
      !e.retry &&
      !e.due &&
      e.waiters.length === 0 &&
      e.parts.osc === undefined &&
      e.parts.rollout === undefined
    ) {
      this.entries.delete(key);
    }
  }

  /** Starts the write when one is due, nothing is in flight and no other pass is worth waiting for. */
  private schedule(key: string, e: Entry): void {
    if (e.inFlight || (e.waiters.length === 0 && !e.due)) return;
    const awaited = PARTS.some((p) => !e.settled.has(p) && this.producers.get(p)?.pending(key));
    if (awaited && !e.gatherExpired) {
      e.gather ??= this.clock.after(GATHER_MAX_MS, () => {
        e.gather = undefined;
        e.gatherExpired = true;
        this.schedule(key, e);
      });
      return;
    }
    e.gather?.cancel();
    e.gather = undefined;
    e.gatherExpired = false;
    void this.flush(key, e);
  }

  private async flush(key: string, e: Entry): Promise<void> {
    e.inFlight = true;
    e.due = false;
    e.settled.clear();
    const waiters = e.waiters.splice(0);
    const sent = { ...e.parts };
    try {
      const known = this.known(key);
      const status = composeStatus(known, sent);
      const stored = jsonEqual(status, known) ? undefined : await this.apply(key, status);
      e.failures = 0;
      // What this write carried is stored now; a part handed over since stays for the next.
      for (const p of PARTS) if (e.parts[p] === sent[p]) this.setPart(e, p, undefined);
      const now = this.known(key);
      for (const p of e.unchanged) {
        const v = e.parts[p];
        if (v === undefined || jsonEqual(partOf(now, p), v)) this.setPart(e, p, undefined);
        else e.due = true;
      }
      e.unchanged.clear();
      for (const w of waiters) w.resolve(stored);
    } catch (error) {
      for (const w of waiters) w.reject(error);
      // The passes that waited retry with their queue's backoff; parts offered meanwhile would
      // wait for someone's next write, so the writer tries again itself too.
      this.retryLater(key, e);
    } finally {
      e.inFlight = false;
    }
    if (this.entries.get(key) !== e) return; // forgotten meanwhile
    this.schedule(key, e);
    this.tidy(key);
  }

  private retryLater(key: string, e: Entry): void {
    const ms = Math.min(30_000, 1000 * 2 ** e.failures);
    e.failures++;
    e.retry ??= this.clock.after(ms, () => {
      e.retry = undefined;
      e.due = true;
      this.schedule(key, e);
    });
  }

  /** One apply of the whole status (and, once per OSC after an upgrade, the legacy release). */
  private async apply(
    key: string,
    status: OperatingSystemConfigStatus,
  ): Promise<KubeObject | undefined> {
    const { namespace, name } = splitKey(key);
    let stored = await this.o.api.patchStatus(namespace, name, status);
    if (legacyOwnsStatus(stored)) {
      stored = (await this.o.api.releaseStatus(namespace, name, LEGACY_ROLLOUT_MANAGER)) ?? stored;
    }
    if (!stored) return undefined;
    this.own.record(key, status, stored.metadata.resourceVersion);
    for (const l of this.listeners) l(key, status, stored);
    return stored;
  }
}
