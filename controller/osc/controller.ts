/**
 * The controller proper: informers feed a work queue, workers run reconcile. Per watched
 * namespace (or once cluster-wide) four informers:
 * - OperatingSystemConfigs;
 * - the Secrets oscar owns (label oscar.dev/osc), metadata only: the checksum annotations are
 *   all reconcile needs to know whether a write is due, and rendered data never sits in memory;
 * - the other Secrets and the ConfigMaps, for the references (a change re-renders every OSC
 *   that uses the object, through the RefIndex).
 * And once, cluster-wide, the OperatingSystemConfigNodes the agents report in, slimmed to what
 * the OSC's status.nodes counts need (NodeIndex): a node's change re-reconciles the OSCs whose
 * counts it moves, and nothing else.
 * Workers start only once every cache is synced, so a fresh start never mistakes "not yet
 * listed" for "missing" (nor writes node counts of 0 before the nodes are listed).
 */
import { LABEL_CONFIG_NAME } from '../../api/bootstrap/constants.js';
import { referencedObjects, type References } from '../../api/resolve.js';
import type { OperatingSystemConfigSpec } from '../../api/schema.js';
import { LABEL_OSC } from '../../api/secret.js';
import type { Clock } from '../kube/clock.js';
import type { KubeHttp } from '../../kube/client.js';
import { dropManagedFields, httpSource, Informer, keyOf } from '../kube/informer.js';
import type { DataObject, KubeObject, OscObject } from '../kube/types.js';
import { oscPath, OSC_RESOURCE } from './writer.js';
import { errorFields, type Logger } from '../../log/logger.js';
import type { ControllerMetrics } from '../runtime/metrics.js';
import type { Pipeline } from './pipeline.js';
import { WorkQueue, type HandlerResult, type QueueOptions } from '../runtime/queue.js';
import { RefIndex, type Ref } from './ref-index.js';
import {
  NodeIndex,
  slimNode,
  summarize,
  type NodeSummary,
  type OscNodeObject,
} from './node-index.js';
import {
  reconcile,
  referencesFor,
  RenderFailedError,
  type Caches,
  type Memo,
  type Writer,
} from './reconcile.js';
import { API_VERSION } from '../../api/schema.js';

export const OSC_NODE_RESOURCE = 'operatingsystemconfignodes';

export interface OscControllerOptions {
  http: KubeHttp;
  writer: Writer;
  pipeline: Pipeline;
  /** Namespaces to watch; empty: all namespaces (needs cluster-wide RBAC on Secrets). */
  namespaces: string[];
  log: Logger;
  metrics: ControllerMetrics;
  queue?: Partial<QueueOptions>;
  clock?: Clock;
  /** Server-side watch timeout (seconds); short values exercise reconnects in tests. */
  watchTimeoutSeconds?: number;
  /**
   * Told of every OSC and node report that changed, so another controller of the process (the
   * bootstrap controller) shares these caches instead of watching the same objects again.
   */
  listeners?: { osc?(namespace: string, name: string): void; node?(name: string): void };
  /** See ReconcileDeps: the cleanup finalizer and the Normal Event per Secret write. */
  finalizer?: boolean;
  renderedEvents?: boolean;
}

interface Informers {
  osc: Informer<OscObject>;
  owned: Informer<KubeObject>;
  secrets: Informer<DataObject>;
  configMaps: Informer<DataObject>;
}

function sameMeta(a: KubeObject, b: KubeObject): boolean {
  return (
    JSON.stringify([a.metadata.annotations, a.metadata.labels, a.metadata.ownerReferences]) ===
    JSON.stringify([b.metadata.annotations, b.metadata.labels, b.metadata.ownerReferences])
  );
}

function refsOf(osc: OscObject): Ref[] {
  const r = referencedObjects(osc.spec);
  return [
    ...r.secrets.map((name) => ({ kind: 'Secret' as const, name })),
    ...r.configMaps.map((name) => ({ kind: 'ConfigMap' as const, name })),
  ];
}

export class OscController implements Caches {
  readonly queue: WorkQueue;
  private readonly sets = new Map<string, Informers>();
  private readonly refs = new RefIndex();
  private readonly nodeIndex = new NodeIndex();
  private readonly nodes: Informer<OscNodeObject>;
  private readonly memo = new Map<string, Memo>();
  private started = false;
  /**
   * Read-your-writes: what our own writes returned, used until the watch delivers that version
   * (or a later one). Without it, a pass that runs between a write and its watch event would see
   * the old state and write again.
   */
  private readonly oscOverlay = new Map<string, OscObject>();
  private readonly secretOverlay = new Map<string, KubeObject>();
  private readonly writer: Writer;

  constructor(private readonly o: OscControllerOptions) {
    this.queue = new WorkQueue({
      concurrency: 16,
      baseDelayMs: 200,
      maxDelayMs: 60_000,
      ...o.queue,
      ...(o.clock ? { clock: o.clock } : {}),
      onDepth: (d) => {
        o.metrics.queueDepth.set(d);
      },
    });
    this.writer = this.recordingWriter(o.writer);
    const scopes = o.namespaces.length === 0 ? [''] : o.namespaces;
    for (const ns of scopes) this.sets.set(ns, this.makeInformers(ns));
    this.nodes = this.makeNodeInformer();
  }

  private makeNodeInformer(): Informer<OscNodeObject> {
    const { http, log, metrics } = this.o;
    const name = 'operatingsystemconfignodes';
    const watched = (key: string): boolean =>
      this.o.namespaces.length === 0 || this.o.namespaces.includes(key.slice(0, key.indexOf('/')));
    const note = (touched: string[]): void => {
      for (const k of touched) if (watched(k)) this.queue.add(k);
    };
    return new Informer<OscNodeObject>(
      httpSource(http, {
        path: `/apis/${API_VERSION}/${OSC_NODE_RESOURCE}`,
        ...(this.o.watchTimeoutSeconds === undefined
          ? {}
          : { watchTimeoutSeconds: this.o.watchTimeoutSeconds }),
      }),
      {
        onAdd: (n) => {
          note(this.nodeIndex.set(n.metadata.name, summarize(n)));
          this.o.listeners?.node?.(n.metadata.name);
        },
        onUpdate: (_, n) => {
          note(this.nodeIndex.set(n.metadata.name, summarize(n)));
        },
        onDelete: (n) => {
          note(this.nodeIndex.remove(n.metadata.name));
          this.o.listeners?.node?.(n.metadata.name);
        },
      },
      {
        name,
        transform: slimNode,
        ...(this.o.clock ? { clock: this.o.clock } : {}),
        onError: (error: unknown, attempt: number) => {
          metrics.watchErrors.inc({ informer: name, namespace: '' });
          log.warn(
            { informer: name, attempt, ...errorFields(error) },
            'list/watch failed; retrying',
          );
        },
      },
    );
  }

  private makeInformers(ns: string): Informers {
    const { http, log, metrics } = this.o;
    const nsPath = ns ? `/namespaces/${ns}` : '';
    // `informer` names what it caches (secrets-owned, …); `namespace` where ("" for all)
    const common = (name: string, informer: string) => ({
      name,
      transform: dropManagedFields,
      ...(this.o.clock ? { clock: this.o.clock } : {}),
      onError: (error: unknown, attempt: number) => {
        metrics.watchErrors.inc({ informer, namespace: ns });
        log.warn({ informer: name, attempt, ...errorFields(error) }, 'list/watch failed; retrying');
      },
    });
    const timeout =
      this.o.watchTimeoutSeconds === undefined
        ? {}
        : { watchTimeoutSeconds: this.o.watchTimeoutSeconds };
    const scope = ns || '*';
    const osc = new Informer<OscObject>(
      httpSource(http, {
        path: `/apis/${API_VERSION}${nsPath}/${OSC_RESOURCE}`,
        // An OSC can be ~1 MiB; pages of 50 keep a (re)list's response text, its parse and the
        // previous page's garbage small next to the cache itself.
        pageSize: 50,
        ...timeout,
      }),
      {
        onAdd: (o) => {
          this.catchUp(this.oscOverlay, o);
          this.refs.set(keyOf(o), o.metadata.namespace ?? '', refsOf(o));
          this.queue.add(keyOf(o));
          this.o.listeners?.osc?.(o.metadata.namespace ?? '', o.metadata.name);
        },
        onUpdate: (before, after) => {
          this.catchUp(this.oscOverlay, after);
          this.refs.set(keyOf(after), after.metadata.namespace ?? '', refsOf(after));
          // Our own status writes come back as updates: only spec, deletion and finalizer
          // changes (or a status that lags the generation) need a pass.
          if (
            before.metadata.generation !== after.metadata.generation ||
            before.metadata.uid !== after.metadata.uid ||
            after.metadata.deletionTimestamp !== before.metadata.deletionTimestamp ||
            JSON.stringify(before.metadata.finalizers) !==
              JSON.stringify(after.metadata.finalizers) ||
            after.status?.observedGeneration !== after.metadata.generation
          ) {
            this.queue.add(keyOf(after));
          }
          if (before.metadata.generation !== after.metadata.generation) {
            this.o.listeners?.osc?.(after.metadata.namespace ?? '', after.metadata.name);
          }
        },
        onDelete: (o) => {
          this.refs.remove(keyOf(o));
          this.oscOverlay.delete(keyOf(o));
          this.queue.add(keyOf(o));
          this.o.listeners?.osc?.(o.metadata.namespace ?? '', o.metadata.name);
        },
      },
      common(`operatingsystemconfigs(${scope})`, 'operatingsystemconfigs'),
    );
    const ownerKey = (s: KubeObject): string | undefined => {
      const name = s.metadata.labels?.[LABEL_OSC];
      return name ? `${s.metadata.namespace ?? ''}/${name}` : undefined;
    };
    const owned = new Informer<KubeObject>(
      httpSource(http, {
        path: `/api/v1${nsPath}/secrets`,
        labelSelector: LABEL_OSC,
        metadataOnly: true,
        ...timeout,
      }),
      {
        onAdd: (s) => {
          this.catchUp(this.secretOverlay, s);
          const k = ownerKey(s);
          if (k) this.queue.add(k);
        },
        onUpdate: (before, after) => {
          this.catchUp(this.secretOverlay, after);
          const k = ownerKey(after);
          if (k && !sameMeta(before, after)) this.queue.add(k);
        },
        onDelete: (s) => {
          this.secretOverlay.delete(keyOf(s));
          const k = ownerKey(s);
          if (k) this.queue.add(k);
        },
      },
      common(`secrets(${scope}, owned)`, 'secrets-owned'),
    );
    const referenced = (kind: 'Secret' | 'ConfigMap') => {
      const touch = (o: KubeObject): void => {
        for (const k of this.refs.usersOf(kind, o.metadata.namespace ?? '', o.metadata.name)) {
          this.queue.add(k);
        }
      };
      return {
        onAdd: touch,
        onUpdate: (_: KubeObject, after: KubeObject) => {
          touch(after);
        },
        onDelete: touch,
      };
    };
    const secrets = new Informer<DataObject>(
      httpSource(http, {
        path: `/api/v1${nsPath}/secrets`,
        // Neither oscar's rendered Secrets nor its per-machine user data: they are never referenced.
        labelSelector: `!${LABEL_OSC},!${LABEL_CONFIG_NAME}`,
        ...timeout,
      }),
      referenced('Secret'),
      common(`secrets(${scope}, referenced)`, 'secrets-referenced'),
    );
    const configMaps = new Informer<DataObject>(
      httpSource(http, { path: `/api/v1${nsPath}/configmaps`, ...timeout }),
      referenced('ConfigMap'),
      common(`configmaps(${scope})`, 'configmaps'),
    );
    return { osc, owned, secrets, configMaps };
  }

  /**
   * The informers, for another controller to subscribe to (controller/rollout): OSCs and owned
   * Secrets per watched namespace, and the node reports.
   */
  get informers(): {
    osc: Informer<OscObject>[];
    owned: Informer<KubeObject>[];
    nodes: Informer<OscNodeObject>;
  } {
    const sets = [...this.sets.values()];
    return { osc: sets.map((s) => s.osc), owned: sets.map((s) => s.owned), nodes: this.nodes };
  }

  private all(): Informer<KubeObject>[] {
    return [
      ...[...this.sets.values()].flatMap((s): Informer<KubeObject>[] => [
        s.osc,
        s.owned,
        s.secrets,
        s.configMaps,
      ]),
      this.nodes,
    ];
  }

  get synced(): boolean {
    return this.started && this.all().every((i) => i.synced);
  }

  /** Starts the informers, waits until their caches are filled, then starts the workers. */
  async start(): Promise<void> {
    const t0 = Date.now();
    for (const i of this.all()) i.start();
    await Promise.all(this.all().map((i) => i.waitForSync()));
    this.o.log.info(
      { ms: Date.now() - t0, oscs: this.countOscs(), namespaces: this.o.namespaces },
      'caches synced; reconciling',
    );
    this.started = true;
    this.queue.start((key) => this.handle(key));
  }

  /** Stops taking work, lets the reconciles in flight finish, stops the watches. */
  async stop(): Promise<void> {
    await this.queue.shutdown();
    await Promise.all(this.all().map((i) => i.stop()));
  }

  countOscs(): number {
    let n = 0;
    for (const s of this.sets.values()) n += s.osc.size;
    return n;
  }

  private async handle(key: string): Promise<HandlerResult | undefined> {
    const { metrics, log } = this.o;
    const end = metrics.reconcileDuration.startTimer();
    try {
      const out = await reconcile(key, {
        caches: this,
        writer: this.writer,
        pipeline: this.o.pipeline,
        now: () => new Date(),
        memo: this.memo,
        ...(this.o.finalizer === false ? { finalizer: false } : {}),
        ...(this.o.renderedEvents === false ? { renderedEvents: false } : {}),
      });
      metrics.reconciles.inc({ result: out.result });
      if (out.renderBytes !== undefined) metrics.renderSize.observe(out.renderBytes);
      if (out.writes > 0) {
        log.info({ osc: key, result: out.result, writes: out.writes }, 'reconciled');
      } else {
        log.debug({ osc: key, result: out.result }, 'reconciled; nothing to write');
      }
      // The finalizer's watch event normally queues the status pass at once; this is the net.
      return out.statusDeferred ? { requeueAfterMs: 1000 } : undefined;
    } catch (error) {
      metrics.reconciles.inc({
        result: error instanceof RenderFailedError ? 'renderFailed' : 'error',
      });
      log.warn(
        { osc: key, retryInMs: this.queue.backoffFor(key), ...errorFields(error) },
        'reconcile failed; will retry',
      );
      throw error;
    } finally {
      end();
    }
  }

  private recordingWriter(inner: Writer): Writer {
    /**
     * Writes answer with the stored metadata only. The OSC as stored is then the one we based the
     * write on (same uid and generation: same spec) with that metadata and, after a status
     * write, the status we applied (all of it is ours). If the generation moved meanwhile, we
     * cannot tell the stored spec: nothing is recorded, and the watch brings it.
     */
    const recordOsc = (stored: KubeObject, status?: OscObject['status']): void => {
      dropManagedFields(stored);
      const key = keyOf(stored);
      const base = this.osc(stored.metadata.namespace ?? '', stored.metadata.name);
      if (
        base &&
        base.metadata.uid === stored.metadata.uid &&
        base.metadata.generation === stored.metadata.generation
      ) {
        const own: OscObject = { ...base, metadata: stored.metadata };
        // status.rollout belongs to the rollout controller: this write left it as it was.
        const rollout = base.status?.rollout;
        if (status) own.status = rollout ? { ...status, rollout } : status;
        this.oscOverlay.set(key, own);
      } else {
        this.oscOverlay.delete(key);
      }
    };
    // every write request, by what it writes and how (oscar_controller_api_writes_total)
    const count = (resource: string, verb: string): void => {
      this.o.metrics.writes.inc({ resource, verb });
    };
    return {
      applySecret: async (body) => {
        count('secrets', 'apply');
        const stored = await inner.applySecret(body);
        if (stored) {
          dropManagedFields(stored);
          this.secretOverlay.set(keyOf(stored), { metadata: stored.metadata });
        }
        return stored;
      },
      deleteSecret: async (namespace, name) => {
        count('secrets', 'delete');
        await inner.deleteSecret(namespace, name);
        this.secretOverlay.delete(`${namespace}/${name}`);
      },
      patchStatus: async (namespace, name, status) => {
        count('operatingsystemconfigs/status', 'apply');
        const stored = await inner.patchStatus(namespace, name, status);
        if (stored) recordOsc(stored, status);
        return stored;
      },
      setFinalizer: async (namespace, name, present) => {
        count('operatingsystemconfigs', 'apply');
        const stored = await inner.setFinalizer(namespace, name, present);
        if (stored) recordOsc(stored);
        return stored;
      },
      event: (osc, e) => {
        count('events', 'create');
        return inner.event(osc, e);
      },
    };
  }

  /**
   * Drops our own record of a write once the watch has delivered that version or a later one:
   * it is no longer needed, and an OSC kept there would be a second copy of the cached one.
   */
  private catchUp(overlay: Map<string, KubeObject>, obj: KubeObject): void {
    const key = keyOf(obj);
    const own = overlay.get(key);
    if (!own) return;
    const a = Number(obj.metadata.resourceVersion ?? 0);
    const b = Number(own.metadata.resourceVersion);
    if (!(Number.isFinite(a) && Number.isFinite(b)) || a >= b) overlay.delete(key);
  }

  /** The newer of the cached object and our own last write of it. */
  private pick<T extends KubeObject>(
    overlay: Map<string, T>,
    key: string,
    cached: T | undefined,
    requireCached: boolean,
  ): T | undefined {
    const own = overlay.get(key);
    if (!own) return cached;
    if (!cached && requireCached) {
      // Gone from the cache (deleted) after we wrote it: the record has nothing left to say.
      overlay.delete(key);
      return undefined;
    }
    // resourceVersions are etcd revisions in practice; if one is not a number, trust the cache.
    const a = Number(cached?.metadata.resourceVersion ?? 0);
    const b = Number(own.metadata.resourceVersion);
    if (Number.isFinite(a) && Number.isFinite(b) && a < b) return own;
    overlay.delete(key);
    return cached;
  }

  // Caches: the informers' stores.
  private setFor(namespace: string): Informers | undefined {
    return this.sets.get(namespace) ?? this.sets.get('');
  }
  osc(namespace: string, name: string): OscObject | undefined {
    const cached = this.setFor(namespace)?.osc.get(namespace, name);
    return this.pick(this.oscOverlay, `${namespace}/${name}`, cached, true);
  }
  ownedSecret(namespace: string, name: string): KubeObject | undefined {
    const cached = this.setFor(namespace)?.owned.get(namespace, name);
    return this.pick(this.secretOverlay, `${namespace}/${name}`, cached, false);
  }
  ownedSecretsOf(namespace: string, oscName: string): KubeObject[] {
    return (this.setFor(namespace)?.owned.list() ?? []).filter(
      (s) => s.metadata.namespace === namespace && s.metadata.labels?.[LABEL_OSC] === oscName,
    );
  }
  secret(namespace: string, name: string): DataObject | undefined {
    return this.setFor(namespace)?.secrets.get(namespace, name);
  }
  configMap(namespace: string, name: string): DataObject | undefined {
    return this.setFor(namespace)?.configMaps.get(namespace, name);
  }
  ownWriteSeen(namespace: string, name: string): boolean {
    const own = this.oscOverlay.get(`${namespace}/${name}`);
    if (!own) return true;
    const cached = this.setFor(namespace)?.osc.get(namespace, name);
    const a = Number(cached?.metadata.resourceVersion ?? 0);
    const b = Number(own.metadata.resourceVersion);
    return !(Number.isFinite(a) && Number.isFinite(b)) || a >= b;
  }
  nodesOf(namespace: string, name: string): readonly NodeSummary[] {
    return this.nodeIndex.of(`${namespace}/${name}`);
  }
  /** Whether the node report named so exists (its agent has reported). */
  nodeReported(name: string): boolean {
    return this.nodes.get('', name) !== undefined;
  }
  /** The data of the Secrets and ConfigMaps `spec` references, from these caches. */
  references(namespace: string, spec: OperatingSystemConfigSpec): References {
    return referencesFor(spec, namespace, this);
  }
}

export { oscPath };
