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
import type { Clock } from '../clock.js';
import { dropManagedFields, keyOf } from '../kube/informer.js';
import type { KubeObject, OscObject } from '../kube/types.js';
import { errorFields, type Logger } from '../../log/logger.js';
import type { OscController } from '../osc/controller.js';
import type { EventInput } from '../osc/reconcile.js';
import { WorkQueue, type HandlerResult, type QueueOptions } from '../queue.js';
import { GrantNodeIndex, memberOf } from './node-index.js';
import type { NodeState } from './planner.js';
import { reconcileRollout, type RolloutCaches, type RolloutMemo } from './reconcile.js';
import type { RolloutWriter } from './writer.js';
import type { NodeDrainer } from '../drain/drainer.js';

export interface RolloutControllerOptions {
  /** The OSC controller: its caches and informers. */
  osc: OscController;
  writer: RolloutWriter;
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

interface Own<T> {
  value: T;
  resourceVersion: number;
}

function rv(obj: KubeObject | undefined): number {
  const n = Number(obj?.metadata.resourceVersion);
  return Number.isFinite(n) ? n : 0;
}

export class RolloutController implements RolloutCaches {
  readonly queue: WorkQueue;
  private readonly index = new GrantNodeIndex();
  private readonly memo = new Map<string, RolloutMemo>();
  private readonly ownGrants = new Map<string, Own<{ grant: RevisionGrant; generation: number }>>();
  private readonly ownStatus = new Map<string, Own<RolloutStatus>>();
  private readonly ownSecrets = new Map<string, Own<KubeObject>>();
  private readonly nodeRvs = new Map<string, number>();
  /** status.rollout as the watch last delivered it (the OSC controller's overlay lags on it). */
  private readonly watchedStatus = new Map<string, Own<RolloutStatus | undefined>>();

  constructor(private readonly o: RolloutControllerOptions) {
    this.queue = new WorkQueue({
      concurrency: 8,
      baseDelayMs: 200,
      maxDelayMs: 60_000,
      ...o.queue,
      ...(o.clock ? { clock: o.clock } : {}),
    });
    this.subscribe();
  }

  private subscribe(): void {
    const { osc, owned, nodes } = this.o.osc.informers;
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
          const own = this.ownStatus.get(keyOf(after));
          if (own && rv(after) >= own.resourceVersion) this.ownStatus.delete(keyOf(after));
        },
        onDelete: (o) => {
          this.ownStatus.delete(keyOf(o));
          this.watchedStatus.delete(keyOf(o));
          this.queue.add(keyOf(o));
        },
      });
    }
    const ownerKey = (s: KubeObject): string | undefined => {
      const name = s.metadata.labels?.[LABEL_OSC];
      return name ? `${s.metadata.namespace ?? ''}/${name}` : undefined;
    };
    const secretChanged = (s: KubeObject): void => {
      const own = this.ownSecrets.get(keyOf(s));
      if (own && rv(s) >= own.resourceVersion) this.ownSecrets.delete(keyOf(s));
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
          this.ownSecrets.delete(keyOf(s));
          const k = ownerKey(s);
          if (k) this.queue.add(k);
        },
      });
    }
    nodes.subscribe({
      onAdd: (n) => {
        this.nodeRvs.set(n.metadata.name, rv(n));
        for (const k of this.index.set(n)) this.queue.add(k);
      },
      onUpdate: (_, n) => {
        this.nodeRvs.set(n.metadata.name, rv(n));
        const own = this.ownGrants.get(n.metadata.name);
        if (own && rv(n) >= own.resourceVersion) this.ownGrants.delete(n.metadata.name);
        for (const k of this.index.set(n)) this.queue.add(k);
      },
      onDelete: (n) => {
        this.nodeRvs.delete(n.metadata.name);
        this.ownGrants.delete(n.metadata.name);
        for (const k of this.index.remove(n.metadata.name)) this.queue.add(k);
      },
    });
  }

  start(): void {
    this.queue.start((key) => this.handle(key));
  }

  async stop(): Promise<void> {
    await this.queue.shutdown();
  }

  private async handle(key: string): Promise<HandlerResult | undefined> {
    try {
      const out = await reconcileRollout(key, {
        caches: this,
        writer: this.o.writer,
        ...(this.o.drainer ? { drainer: this.o.drainer } : {}),
        event: (osc, e) => this.o.event(osc, e),
        memo: this.memo,
        now: () => new Date(),
        recorded: {
          grant: (node, grant, stored) => {
            const generation = stored?.metadata.generation;
            if (generation === undefined) return;
            this.ownGrants.set(node, {
              value: { grant, generation },
              resourceVersion: rv(stored),
            });
          },
          status: (oscKey, rollout, stored) => {
            if (stored) this.ownStatus.set(oscKey, { value: rollout, resourceVersion: rv(stored) });
          },
          revision: (stored) => {
            if (!stored) return;
            dropManagedFields(stored);
            this.ownSecrets.set(keyOf(stored), { value: stored, resourceVersion: rv(stored) });
          },
        },
      });
      this.o.onReconcile?.('ok', out.writes);
      if (out.writes > 0) {
        this.o.log.info(
          { osc: key, grants: out.grants, writes: out.writes, phase: out.phase },
          'rollout reconciled',
        );
      }
      return out.requeueAfterMs === undefined ? undefined : { requeueAfterMs: out.requeueAfterMs };
    } catch (error) {
      this.o.onReconcile?.('error', 0);
      this.o.log.warn(
        { osc: key, retryInMs: this.queue.backoffFor(key), ...errorFields(error) },
        'rollout reconcile failed; will retry',
      );
      throw error;
    }
  }

  // RolloutCaches: the shared caches, with this controller's own writes laid over them.
  osc(namespace: string, name: string): OscObject | undefined {
    return this.o.osc.osc(namespace, name);
  }

  ownedSecret(namespace: string, name: string): KubeObject | undefined {
    const own = this.ownSecrets.get(`${namespace}/${name}`);
    const cached = this.o.osc.ownedSecret(namespace, name);
    return own && rv(cached) < own.resourceVersion ? own.value : cached;
  }

  ownedSecretsOf(namespace: string, oscName: string): KubeObject[] {
    const cached = new Map(
      this.o.osc.ownedSecretsOf(namespace, oscName).map((s) => [s.metadata.name, s]),
    );
    for (const [key, own] of this.ownSecrets) {
      const s = own.value;
      if (s.metadata.namespace !== namespace || s.metadata.labels?.[LABEL_OSC] !== oscName) {
        continue;
      }
      if (rv(cached.get(s.metadata.name)) < own.resourceVersion) cached.set(s.metadata.name, s);
      else this.ownSecrets.delete(key);
    }
    return [...cached.values()];
  }

  grantNodesOf(oscKey: string): NodeState[] {
    const issued = this.o.issuedNamespaces ?? (() => []);
    const members = this.index.of(oscKey).filter((n) => memberOf(oscKey, issued(n.name)));
    return members.map((n) => {
      const own = this.ownGrants.get(n.name);
      if (!own || (this.nodeRvs.get(n.name) ?? 0) >= own.resourceVersion) return n;
      return { ...n, grant: own.value.grant, generation: own.value.generation };
    });
  }

  rolloutOf(oscKey: string): RolloutStatus | undefined {
    const watched = this.watchedStatus.get(oscKey);
    const own = this.ownStatus.get(oscKey);
    if (own && (watched?.resourceVersion ?? 0) < own.resourceVersion) return own.value;
    return watched?.value;
  }
}
