/**
 * The rollout controller: the OSC controller's informers (shared: one list and one watch per
 * resource), its own work queue of OSC keys, reconcileRollout per key. It is queued by
 * - an OSC that is added or deleted, or whose generation (spec.rollout), resume annotation or
 *   rendered checksum changed;
 * - a Secret of the OSC's (the reconcile Secret's checksum, a revision slot) that changed;
 * - a node whose grant, answer, applied checksum or health moved (GrantNodeIndex).
 * It reads its own writes (grants, status.rollout, revision Secrets) until the watch delivers
 * them, so a pass that runs in between neither grants twice nor forgets what it recorded.
 */
import { ANNOTATION_RESUME, LABEL_OSC } from '../../api/secret.js';
import type { RevisionGrant, RolloutStatus } from '../../api/schema.js';
import type { Clock } from '../kube/clock.js';
import { dropManagedFields, keyOf } from '../kube/informer.js';
import type { KubeObject, OscObject } from '../kube/types.js';
import type { Logger } from '../../log/logger.js';
import type { OscController } from '../osc/controller.js';
import type { EventInput } from '../osc/reconcile.js';
import type { QueueOptions, WorkQueue } from '../runtime/queue.js';
import { ControllerRuntime, controllerQueue, RuntimeController } from '../runtime/controller.js';
import { timedHandle, type Reconciled } from '../runtime/handle.js';
import { OwnWrites } from '../runtime/own-writes.js';
import { GrantNodeIndex, memberOf } from './node-index.js';
import type { NodeState } from './planner.js';
import { reconcileRollout, type RolloutCaches, type RolloutMemo } from './reconcile.js';
import type { RolloutRequests, RolloutWriter } from './writer.js';
import type { NodeDrainer } from '../drain/drainer.js';

export interface RolloutControllerOptions {
  /** The OSC controller: its caches and informers. */
  osc: OscController;
  /** Its own requests; status.rollout goes through the OSC controller's status writer. */
  writer: RolloutRequests;
  /** Drains nodes before Drain- and Reboot-level revisions (controller/drain/). */
  drainer?: NodeDrainer;
  event(osc: OscObject, e: EventInput): Promise<void>;
  log: Logger;
  queue?: Partial<QueueOptions>;
  clock?: Clock;
  onReconcile?: (result: 'ok' | 'error', writes: number) => void;
  /** Namespaces whose config had this node's identity issued (none: oscar issued it none). */
  issuedNamespaces?: (node: string) => readonly string[];
}

/** status.rollout as the watch last delivered it, at that resourceVersion. */
interface Watched<T> {
  value: T;
  resourceVersion: number;
}

function rv(obj: KubeObject | undefined): number {
  const n = Number(obj?.metadata.resourceVersion);
  return Number.isFinite(n) ? n : 0;
}

export class RolloutController extends RuntimeController implements RolloutCaches {
  readonly queue: WorkQueue;
  protected readonly runtime: ControllerRuntime;
  private readonly index = new GrantNodeIndex();
  private readonly memo = new Map<string, RolloutMemo>();
  private readonly ownGrants = new OwnWrites<{ grant: RevisionGrant; generation: number }>();
  private readonly ownStatus = new OwnWrites<RolloutStatus>();
  private readonly ownSecrets = new OwnWrites<KubeObject>();
  private readonly nodeRvs = new Map<string, number>();
  /** status.rollout as the watch last delivered it (the OSC controller's overlay lags on it). */
  private readonly watchedStatus = new Map<string, Watched<RolloutStatus | undefined>>();
  /** Its requests, status.rollout through the OSC's status writer. */
  private readonly writer: RolloutWriter;

  constructor(private readonly o: RolloutControllerOptions) {
    super();
    this.queue = controllerQueue(
      { concurrency: 8, baseDelayMs: 200, maxDelayMs: 60_000 },
      o.queue,
      o.clock,
    );
    this.writer = this.statusThroughOscWriter(o.writer);
    this.subscribeOscs();
    this.subscribeSecrets();
    this.subscribeNodes();
    this.runtime = new ControllerRuntime({
      queue: this.queue,
      handle: timedHandle((key) => this.reconcile(key), {
        keyField: 'osc',
        reconciled: 'rollout reconciled',
        failed: 'rollout reconcile failed; will retry',
        log: o.log,
        queue: () => this.queue,
        count: (result, writes) => {
          o.onReconcile?.(result === 'ok' ? 'ok' : 'error', writes);
        },
        errorResult: () => 'error',
      }),
      log: o.log,
      // The OSC controller's informers, synced before this one starts.
      informers: () => [],
    });
  }

  /**
   * status.rollout is written with the rest of the status, by the OSC's one status writer: it
   * waits for this controller's queued passes, and every write it makes (whoever's part was due)
   * is recorded here, so a count that rode along is not written again.
   */
  private statusThroughOscWriter(requests: RolloutRequests): RolloutWriter {
    const status = this.o.osc.status;
    status.producer('rollout', { pending: (key) => this.queue.pending(key) });
    status.onWritten((key, written, stored) => {
      if (written.rollout) this.ownStatus.record(key, written.rollout, rv(stored));
      const memo = this.memo.get(key);
      if (memo) memo.lastStatusWrite = Date.now();
    });
    return {
      readSecret: (namespace, name) => requests.readSecret(namespace, name),
      applyRevision: (body) => requests.applyRevision(body),
      grant: (node, grant) => requests.grant(node, grant),
      patchRolloutStatus: (namespace, name, rollout) =>
        status.write(`${namespace}/${name}`, 'rollout', rollout),
      offerRolloutStatus: (namespace, name, rollout) => {
        status.offer(`${namespace}/${name}`, 'rollout', rollout);
      },
    };
  }

  /** An OSC's spec, resume annotation or rendered checksum moved: a pass. */
  private subscribeOscs(): void {
    const { osc } = this.o.osc.informers;
    const note = (o: OscObject): void => {
      this.watchedStatus.set(keyOf(o), { value: o.status?.rollout, resourceVersion: rv(o) });
    };
    for (const informer of osc) {
      informer.subscribe({
        onAdd: (o) => {
          note(o);
          this.queue.add(keyOf(o));
        },
        onUpdate: (before, after) => {
          note(after);
          if (
            before.metadata.generation !== after.metadata.generation ||
            before.metadata.deletionTimestamp !== after.metadata.deletionTimestamp ||
            before.metadata.annotations?.[ANNOTATION_RESUME] !==
              after.metadata.annotations?.[ANNOTATION_RESUME] ||
            before.status?.checksum !== after.status?.checksum
          ) {
            this.queue.add(keyOf(after));
          }
          this.ownStatus.seen(keyOf(after), rv(after));
        },
        onDelete: (o) => {
          this.ownStatus.forget(keyOf(o));
          this.watchedStatus.delete(keyOf(o));
          this.queue.add(keyOf(o));
        },
      });
    }
  }

  /** The OSC's reconcile Secret or a revision slot changed: its OSC gets a pass. */
  private subscribeSecrets(): void {
    const { owned } = this.o.osc.informers;
    const ownerKey = (s: KubeObject): string | undefined => {
      const name = s.metadata.labels?.[LABEL_OSC];
      return name ? `${s.metadata.namespace ?? ''}/${name}` : undefined;
    };
    const secretChanged = (s: KubeObject): void => {
      this.ownSecrets.seen(keyOf(s), rv(s));
      const k = ownerKey(s);
      if (k) this.queue.add(k);
    };
    for (const informer of owned) {
      informer.subscribe({
        onAdd: secretChanged,
        onUpdate: (before, after) => {
          if (
            JSON.stringify([before.metadata.annotations, before.metadata.labels]) !==
            JSON.stringify([after.metadata.annotations, after.metadata.labels])
          ) {
            secretChanged(after);
          }
        },
        onDelete: (s) => {
          this.ownSecrets.forget(keyOf(s));
          const k = ownerKey(s);
          if (k) this.queue.add(k);
        },
      });
    }
  }

  /** A node's grant, answer, applied checksum or health moved: the OSCs it counts in. */
  private subscribeNodes(): void {
    const { nodes } = this.o.osc.informers;
    nodes.subscribe({
      onAdd: (n) => {
        this.nodeRvs.set(n.metadata.name, rv(n));
        for (const k of this.index.set(n)) this.queue.add(k);
      },
      onUpdate: (_, n) => {
        this.nodeRvs.set(n.metadata.name, rv(n));
        this.ownGrants.seen(n.metadata.name, rv(n));
        for (const k of this.index.set(n)) this.queue.add(k);
      },
      onDelete: (n) => {
        this.nodeRvs.delete(n.metadata.name);
        this.ownGrants.forget(n.metadata.name);
        for (const k of this.index.remove(n.metadata.name)) this.queue.add(k);
      },
    });
  }

  private async reconcile(key: string): Promise<Reconciled> {
    try {
      return await this.reconcileOnce(key);
    } finally {
      // an OSC status write that waited for this pass may go now
      this.o.osc.status.passDone('rollout', key);
    }
  }

  private async reconcileOnce(key: string): Promise<Reconciled> {
    const out = await reconcileRollout(key, {
      caches: this,
      writer: this.writer,
      ...(this.o.drainer ? { drainer: this.o.drainer } : {}),
      event: (osc, e) => this.o.event(osc, e),
      memo: this.memo,
      now: () => new Date(),
      recorded: {
        grant: (node, grant, stored) => {
          const generation = stored?.metadata.generation;
          if (generation === undefined) return;
          this.ownGrants.record(node, { grant, generation }, rv(stored));
        },
        status: (oscKey, rollout, stored) => {
          if (stored) this.ownStatus.record(oscKey, rollout, rv(stored));
        },
        revision: (stored) => {
          if (!stored) return;
          dropManagedFields(stored);
          this.ownSecrets.record(keyOf(stored), stored, rv(stored));
        },
      },
    });
    return {
      result: 'ok',
      writes: out.writes,
      fields: { grants: out.grants, phase: out.phase },
      ...(out.requeueAfterMs === undefined ? {} : { requeueAfterMs: out.requeueAfterMs }),
    };
  }

  // RolloutCaches: the shared caches, with this controller's own writes laid over them.
  osc(namespace: string, name: string): OscObject | undefined {
    return this.o.osc.osc(namespace, name);
  }

  ownedSecret(namespace: string, name: string): KubeObject | undefined {
    const cached = this.o.osc.ownedSecret(namespace, name);
    return this.ownSecrets.newerThan(`${namespace}/${name}`, rv(cached)) ?? cached;
  }

  ownedSecretsOf(namespace: string, oscName: string): KubeObject[] {
    const cached = new Map(
      this.o.osc.ownedSecretsOf(namespace, oscName).map((s) => [s.metadata.name, s]),
    );
    for (const [key, s] of this.ownSecrets.entries()) {
      if (s.metadata.namespace !== namespace || s.metadata.labels?.[LABEL_OSC] !== oscName) {
        continue;
      }
      const own = this.ownSecrets.newerThan(key, rv(cached.get(s.metadata.name)));
      if (own) cached.set(s.metadata.name, own);
    }
    return [...cached.values()];
  }

  grantNodesOf(oscKey: string): NodeState[] {
    const issued = this.o.issuedNamespaces ?? (() => []);
    const members = this.index.of(oscKey).filter((n) => memberOf(oscKey, issued(n.name)));
    return members.map((n) => {
      const own = this.ownGrants.newerThan(n.name, this.nodeRvs.get(n.name) ?? 0);
      return own ? { ...n, grant: own.grant, generation: own.generation } : n;
    });
  }

  rolloutOf(oscKey: string): RolloutStatus | undefined {
    const watched = this.watchedStatus.get(oscKey);
    return this.ownStatus.newerThan(oscKey, watched?.resourceVersion ?? 0) ?? watched?.value;
  }
}
