/**
 * The controller proper: informers feed a work queue, workers run reconcile. Per watched
 * namespace (or once cluster-wide) four informers:
 * - OperatingSystemConfigs;
 * - the Secrets oscar owns (label oscar.dev/osc), metadata only: the checksum annotations are
 *   all reconcile needs to know whether a write is due, and rendered data never sits in memory;
 * - the other Secrets, metadata only too: a change re-renders every OSC that references the
 *   Secret (through the RefIndex), and the data of a referenced one is read by name when such an
 *   OSC renders (ReferencedSecrets), so the data of Secrets no OSC uses is never held;
 * - the ConfigMaps, in full, for the references (a change re-renders every OSC using it).
 * And once, cluster-wide, the OperatingSystemConfigNodes the agents report in, slimmed to what
 * the OSC's status.nodes counts need (NodeIndex): a node's change re-reconciles the OSCs whose
 * counts it moves, and nothing else.
 * Workers start only once every cache is synced, so a fresh start never mistakes "not yet
 * listed" for "missing" (nor writes node counts of 0 before the nodes are listed).
 */
import { LABEL_CONFIG_NAME } from '../../api/bootstrap/constants.js';
import { CONFIG_UID_LABEL } from '../../api/identity.js';
import { referencedObjects, type References } from '../../api/resolve.js';
import type { OperatingSystemConfigSpec } from '../../api/schema.js';
import { LABEL_OSC } from '../../api/secret.js';
import type { Clock } from '../kube/clock.js';
import type { KubeHttp } from '../../kube/client.js';
import { dropManagedFields, keyOf, type Informer } from '../kube/informer.js';
import type { DataObject, KubeObject, OscObject } from '../kube/types.js';
import { oscPath, OSC_RESOURCE } from './writer.js';
import { OscStatusWriter, type StatusApi } from './status-writer.js';
import type { Logger } from '../../log/logger.js';
import type { ControllerMetrics } from '../runtime/metrics.js';
import type { Pipeline } from './pipeline.js';
import { budgetedPipeline } from './render-budget.js';
import { namespaceOfKey, type QueueOptions, type WorkQueue } from '../runtime/queue.js';
import { ControllerRuntime, controllerQueue, RuntimeController } from '../runtime/controller.js';
import { timedHandle, type Reconciled } from '../runtime/handle.js';
import { watchInformer, type InformerContext } from '../runtime/informers.js';
import { OwnWrites } from '../runtime/own-writes.js';
import { RefIndex, type Ref, type RefKind } from './ref-index.js';
import { httpSecretReader, ReferencedSecrets } from './referenced-secrets.js';
import {
  NodeIndex,
  nodeOfConfig,
  slimNode,
  summarize,
  type NodeSummary,
  type OscNodeObject,
} from './node-index.js';
import {
  reconcile,
  referencesFor,
  splitKey,
  RenderFailedError,
  SecretNameTakenError,
  type Caches,
  type Memo,
  type Writer,
} from './reconcile.js';
import { API_VERSION } from '../../api/schema.js';

export const OSC_NODE_RESOURCE = 'operatingsystemconfignodes';

export interface OscControllerOptions {
  http: KubeHttp;
  /** The requests; the status goes through the OSC's status writer (`status`). */
  writer: Writer & Pick<StatusApi, 'releaseStatus'>;
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
  secrets: Informer<KubeObject>;
  configMaps: Informer<DataObject>;
}

function sameMeta(a: KubeObject, b: KubeObject): boolean {
  return (
    JSON.stringify([a.metadata.annotations, a.metadata.labels, a.metadata.ownerReferences]) ===
    JSON.stringify([b.metadata.annotations, b.metadata.labels, b.metadata.ownerReferences])
  );
}

function nsPath(ns: string): string {
  return ns ? `/namespaces/${ns}` : '';
}

/**
 * Our own status writes come back as updates: only spec, deletion and finalizer changes (or a
 * status that lags the generation) need a pass.
 */
function needsPass(before: OscObject, after: OscObject): boolean {
  return (
    before.metadata.generation !== after.metadata.generation ||
    before.metadata.uid !== after.metadata.uid ||
    after.metadata.deletionTimestamp !== before.metadata.deletionTimestamp ||
    JSON.stringify(before.metadata.finalizers) !== JSON.stringify(after.metadata.finalizers) ||
    after.status?.observedGeneration !== after.metadata.generation
  );
}

function refsOf(osc: OscObject): Ref[] {
  const r = referencedObjects(osc.spec);
  return [
    ...r.secrets.map((name) => ({ kind: 'Secret' as const, name })),
    ...r.configMaps.map((name) => ({ kind: 'ConfigMap' as const, name })),
  ];
}

export class OscController extends RuntimeController implements Caches {
  readonly queue: WorkQueue;
  protected readonly runtime: ControllerRuntime;
  private readonly sets = new Map<string, Informers>();
  private readonly refs = new RefIndex((kind, key) => {
    if (kind !== 'Secret') return;
    const slash = key.indexOf('/');
    this.referenced.drop(key.slice(0, slash), key.slice(slash + 1));
  });
  private readonly referenced: ReferencedSecrets;
  private readonly nodeIndex = new NodeIndex();
  private readonly nodes: Informer<OscNodeObject>;
  private readonly memo = new Map<string, Memo>();
  /** Each OSC's last status write, to pace the writes node reports cause (ReconcileDeps). */
  private readonly statusWrites = new Map<string, number>();
  /**
   * OSCs whose counts-only status write waits for its second (ms since the epoch when it is due):
   * the queue runs them then, with the latest counts, so node reports until then need no pass
   * (each would count the OSC's nodes again only to wait).
   */
  private readonly countsDue = new Map<string, number>();
  /**
   * Read-your-writes: what our own writes returned, used until the watch delivers that version
   * (or a later one). Without it, a pass that runs between a write and its watch event would see
   * the old state and write again.
   */
  private readonly ownOscs = new OwnWrites<OscObject>();
  private readonly ownSecrets = new OwnWrites<KubeObject>();
  private readonly writer: Writer;
  private readonly ctx: InformerContext;
  /**
   * The one writer of each OSC's status: this controller's part and the rollout controller's
   * (status.rollout) go out together (status-writer.ts).
   */
  readonly status: OscStatusWriter;
  /** The pipeline, large renders holding their size of a shared budget (render-budget.ts). */
  private readonly pipeline: Pipeline;

  constructor(private readonly o: OscControllerOptions) {
    super();
    this.queue = controllerQueue(
      // One namespace (one tenant) holds at most half the workers, and waiting keys are taken
      // from the namespaces in turn: its slow renders or thousands of objects never stall another's.
      {
        concurrency: 16,
        baseDelayMs: 200,
        maxDelayMs: 60_000,
        partitionOf: namespaceOfKey,
      },
      o.queue,
      o.clock,
      (d) => {
        o.metrics.queueDepth.set(d);
      },
    );
    this.ctx = {
      http: o.http,
      log: o.log,
      metrics: o.metrics,
      ...(o.clock ? { clock: o.clock } : {}),
      ...(o.watchTimeoutSeconds === undefined
        ? {}
        : { watchTimeoutSeconds: o.watchTimeoutSeconds }),
    };
    this.pipeline = budgetedPipeline(o.pipeline);
    this.status = this.statusWriter(o.writer);
    this.writer = this.recordingWriter(o.writer);
    this.referenced = new ReferencedSecrets({
      reader: httpSecretReader(o.http),
      meta: (ns, name) => this.setFor(ns)?.secrets.get(ns, name),
      used: (ns, name) => this.refs.used('Secret', ns, name),
      onRead: (namespace, name, found) => {
        o.metrics.referencedSecretReads.inc({ result: found ? 'found' : 'notFound' });
        o.log.debug({ namespace, secret: name, found }, 'read a referenced Secret');
      },
    });
    const scopes = o.namespaces.length === 0 ? [''] : o.namespaces;
    for (const ns of scopes) this.sets.set(ns, this.makeInformers(ns));
    this.nodes = this.makeNodeInformer();
    this.runtime = new ControllerRuntime({
      queue: this.queue,
      handle: timedHandle((key) => this.reconcile(key), {
        keyField: 'osc',
        reconciled: 'reconciled',
        failed: 'reconcile failed; will retry',
        log: o.log,
        queue: () => this.queue,
        timer: () => o.metrics.reconcileDuration.startTimer(),
        count: (result) => {
          o.metrics.reconciles.inc({ result });
        },
        errorResult: (error) =>
          error instanceof RenderFailedError
            ? 'renderFailed'
            : error instanceof SecretNameTakenError
              ? 'secretTaken'
              : 'error',
      }),
      log: o.log,
      informers: () => this.all(),
      synced: {
        message: 'caches synced; reconciling',
        fields: () => ({ oscs: this.countOscs(), namespaces: o.namespaces }),
      },
    });
  }

  /** The node reports, slimmed: a change re-queues the OSCs whose counts it moves. */
  private makeNodeInformer(): Informer<OscNodeObject> {
    const watched = (key: string): boolean =>
      this.o.namespaces.length === 0 || this.o.namespaces.includes(key.slice(0, key.indexOf('/')));
    const note = (touched: string[]): void => {
      const now = Date.now();
      for (const k of touched) {
        if (watched(k) && !((this.countsDue.get(k) ?? 0) > now)) this.queue.add(k);
      }
    };
    return watchInformer<OscNodeObject>(
      this.ctx,
      {
        name: OSC_NODE_RESOURCE,
        source: { path: `/apis/${API_VERSION}/${OSC_NODE_RESOURCE}` },
        transform: slimNode,
      },
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
    );
  }

  private makeInformers(ns: string): Informers {
    return {
      osc: this.oscInformer(ns),
      owned: this.ownedInformer(ns),
      secrets: this.referencedSecretsInformer(ns),
      configMaps: this.configMapsInformer(ns),
    };
  }

  /** OSCs: a change of spec, deletion or finalizers (not our own status writes) needs a pass. */
  private oscInformer(ns: string): Informer<OscObject> {
    const oscChanged = (o: OscObject): void => {
      this.o.listeners?.osc?.(o.metadata.namespace ?? '', o.metadata.name);
    };
    return watchInformer<OscObject>(
      this.ctx,
      {
        name: `operatingsystemconfigs(${ns || '*'})`,
        metricName: 'operatingsystemconfigs',
        namespace: ns,
        source: {
          path: `/apis/${API_VERSION}${nsPath(ns)}/${OSC_RESOURCE}`,
          // An OSC can be ~1 MiB; pages of 50 keep a (re)list's response text, its parse and the
          // previous page's garbage small next to the cache itself.
          pageSize: 50,
        },
      },
      {
        onAdd: (o) => {
          this.ownOscs.seen(keyOf(o), o.metadata.resourceVersion);
          this.refs.set(keyOf(o), o.metadata.namespace ?? '', refsOf(o));
          this.queue.add(keyOf(o));
          oscChanged(o);
        },
        onUpdate: (before, after) => {
          this.ownOscs.seen(keyOf(after), after.metadata.resourceVersion);
          this.refs.set(keyOf(after), after.metadata.namespace ?? '', refsOf(after));
          if (needsPass(before, after)) this.queue.add(keyOf(after));
          if (before.metadata.generation !== after.metadata.generation) oscChanged(after);
        },
        onDelete: (o) => {
          this.refs.remove(keyOf(o));
          this.ownOscs.forget(keyOf(o));
          this.status.forget(keyOf(o));
          this.queue.add(keyOf(o));
          oscChanged(o);
        },
      },
    );
  }

  /** The Secrets oscar owns, metadata only: a change re-queues their OSC. */
  private ownedInformer(ns: string): Informer<KubeObject> {
    const ownerKey = (s: KubeObject): string | undefined => {
      const name = s.metadata.labels?.[LABEL_OSC];
      return name ? `${s.metadata.namespace ?? ''}/${name}` : undefined;
    };
    return watchInformer<KubeObject>(
      this.ctx,
      {
        name: `secrets(${ns || '*'}, owned)`,
        metricName: 'secrets-owned',
        namespace: ns,
        source: {
          path: `/api/v1${nsPath(ns)}/secrets`,
          labelSelector: LABEL_OSC,
          metadataOnly: true,
        },
      },
      {
        onAdd: (s) => {
          this.ownSecrets.seen(keyOf(s), s.metadata.resourceVersion);
          const k = ownerKey(s);
          if (k) this.queue.add(k);
        },
        onUpdate: (before, after) => {
          this.ownSecrets.seen(keyOf(after), after.metadata.resourceVersion);
          const k = ownerKey(after);
          if (k && !sameMeta(before, after)) this.queue.add(k);
        },
        onDelete: (s) => {
          this.ownSecrets.forget(keyOf(s));
          const k = ownerKey(s);
          if (k) this.queue.add(k);
        },
      },
    );
  }

  /** A change to a Secret or ConfigMap re-renders every OSC that references it. */
  private touchUsers(kind: RefKind): (o: KubeObject) => void {
    return (o) => {
      for (const k of this.refs.usersOf(kind, o.metadata.namespace ?? '', o.metadata.name)) {
        this.queue.add(k);
      }
    };
  }

  private configMapsInformer(ns: string): Informer<DataObject> {
    const touch = this.touchUsers('ConfigMap');
    return watchInformer<DataObject>(
      this.ctx,
      {
        name: `configmaps(${ns || '*'})`,
        metricName: 'configmaps',
        namespace: ns,
        source: { path: `/api/v1${nsPath(ns)}/configmaps` },
      },
      {
        onAdd: touch,
        onUpdate: (_, after) => {
          touch(after);
        },
        onDelete: touch,
      },
    );
  }

  /**
   * The Secrets an OSC may reference (any but oscar's own), metadata only: enough to requeue the
   * OSCs that use one when it changes; its data is read when one of them renders.
   */
  private referencedSecretsInformer(ns: string): Informer<KubeObject> {
    const touch = this.touchUsers('Secret');
    return watchInformer<KubeObject>(
      this.ctx,
      {
        name: `secrets(${ns || '*'}, referenced)`,
        metricName: 'secrets-referenced',
        namespace: ns,
        source: {
          path: `/api/v1${nsPath(ns)}/secrets`,
          // Neither oscar's rendered Secrets nor its per-machine user data: never referenced.
          labelSelector: `!${LABEL_OSC},!${LABEL_CONFIG_NAME}`,
          metadataOnly: true,
        },
      },
      {
        onAdd: touch,
        onUpdate: (_, after) => {
          touch(after);
        },
        onDelete: (s) => {
          this.referenced.drop(s.metadata.namespace ?? '', s.metadata.name);
          touch(s);
        },
      },
    );
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

  countOscs(): number {
    let n = 0;
    for (const s of this.sets.values()) n += s.osc.size;
    return n;
  }

  private async reconcile(key: string): Promise<Reconciled> {
    try {
      return await this.reconcileOnce(key);
    } finally {
      // a status write of the rollout controller's that waited for this pass may go now
      this.status.passDone('osc', key);
    }
  }

  private async reconcileOnce(key: string): Promise<Reconciled> {
    const slash = key.indexOf('/');
    const osc = this.osc(key.slice(0, slash), key.slice(slash + 1));
    if (osc) await this.loadReferences(key.slice(0, slash), osc.spec);
    const out = await reconcile(key, {
      caches: this,
      writer: this.writer,
      pipeline: this.pipeline,
      now: () => new Date(),
      memo: this.memo,
      nodeCounts: { last: this.statusWrites },
      ...(this.o.finalizer === false ? { finalizer: false } : {}),
      ...(this.o.renderedEvents === true ? { renderedEvents: true } : {}),
    });
    if (out.renderBytes !== undefined) this.o.metrics.renderSize.observe(out.renderBytes);
    return {
      result: out.result,
      writes: out.writes,
      ...(out.checksum === undefined ? {} : { fields: { checksum: out.checksum } }),
      ...this.requeueOf(key, out),
    };
  }

  /**
   * When to run again: the finalizer's watch event normally queues the status pass at once (the
   * net is a second); a counts-only status write waits for its second, and node reports until
   * then need no pass.
   */
  private requeueOf(
    key: string,
    out: { statusDeferred?: boolean; nodesDueInMs?: number },
  ): { requeueAfterMs?: number } {
    if (out.statusDeferred) return { requeueAfterMs: 1000 };
    if (out.nodesDueInMs === undefined) {
      this.countsDue.delete(key);
      return {};
    }
    this.countsDue.set(key, Date.now() + out.nodesDueInMs);
    return { requeueAfterMs: out.nodesDueInMs };
  }

  /** The status writer: whole-status applies, counted; each write recorded for our reads. */
  private statusWriter(inner: OscControllerOptions['writer']): OscStatusWriter {
    const count = (verb: string): void => {
      this.o.metrics.writes.inc({ resource: 'operatingsystemconfigs/status', verb });
    };
    const writer = new OscStatusWriter({
      api: {
        patchStatus: (namespace, name, status) => {
          count('apply');
          return inner.patchStatus(namespace, name, status);
        },
        releaseStatus: (namespace, name, manager) => {
          count('release');
          return inner.releaseStatus(namespace, name, manager);
        },
      },
      cached: (key) => {
        const { namespace, name } = splitKey(key);
        const o = this.setFor(namespace)?.osc.get(namespace, name);
        return o && { status: o.status, resourceVersion: o.metadata.resourceVersion };
      },
      ...(this.o.clock ? { clock: this.o.clock } : {}),
    });
    writer.producer('osc', { pending: (key) => this.queue.pending(key) });
    writer.onWritten((key, status, stored) => {
      this.recordOsc(stored, status);
      this.statusWrites.set(key, Date.now());
    });
    return writer;
  }

  /**
   * Writes answer with the stored metadata only. The OSC as stored is then the one we based the
   * write on (same uid and generation: same spec) with that metadata and, after a status write,
   * the whole status we applied. If the generation moved meanwhile, we cannot tell the stored
   * spec: nothing is recorded, and the watch brings it.
   */
  private recordOsc(stored: KubeObject, status?: OscObject['status']): void {
    dropManagedFields(stored);
    const key = keyOf(stored);
    const base = this.osc(stored.metadata.namespace ?? '', stored.metadata.name);
    if (
      base &&
      base.metadata.uid === stored.metadata.uid &&
      base.metadata.generation === stored.metadata.generation
    ) {
      const own: OscObject = { ...base, metadata: stored.metadata };
      if (status) own.status = status;
      this.ownOscs.record(key, own, stored.metadata.resourceVersion);
    } else {
      this.ownOscs.forget(key);
    }
  }

  private recordingWriter(inner: Writer): Writer {
    const recordSecret = (stored: KubeObject): void => {
      dropManagedFields(stored);
      this.ownSecrets.record(
        keyOf(stored),
        { metadata: stored.metadata },
        stored.metadata.resourceVersion,
      );
    };
    // every write request, by what it writes and how (oscar_controller_api_writes_total)
    const count = (resource: string, verb: string): void => {
      this.o.metrics.writes.inc({ resource, verb });
    };
    return {
      createSecret: async (body) => {
        count('secrets', 'create');
        const stored = await inner.createSecret(body);
        if (stored && stored !== 'exists') recordSecret(stored);
        return stored;
      },
      secretMeta: (namespace, name) => inner.secretMeta(namespace, name),
      updateSecret: async (existing, body) => {
        count('secrets', 'patch');
        const stored = await inner.updateSecret(existing, body);
        if (stored) recordSecret(stored);
        return stored;
      },
      deleteSecret: async (namespace, name) => {
        count('secrets', 'delete');
        await inner.deleteSecret(namespace, name);
        this.ownSecrets.forget(`${namespace}/${name}`);
      },
      // the status goes through the OSC's status writer, which counts and records its writes
      patchStatus: (namespace, name, status) =>
        this.status.write(`${namespace}/${name}`, 'osc', status),
      offerStatus: (namespace, name, status) => {
        this.status.offer(`${namespace}/${name}`, 'osc', status);
      },
      setFinalizer: async (namespace, name, present) => {
        count('operatingsystemconfigs', 'apply');
        const stored = await inner.setFinalizer(namespace, name, present);
        if (stored) this.recordOsc(stored);
        return stored;
      },
      event: (osc, e) => {
        count('events', 'create');
        return inner.event(osc, e);
      },
    };
  }

  // Caches: the informers' stores.
  private setFor(namespace: string): Informers | undefined {
    return this.sets.get(namespace) ?? this.sets.get('');
  }
  osc(namespace: string, name: string): OscObject | undefined {
    const key = `${namespace}/${name}`;
    const cached = this.setFor(namespace)?.osc.get(namespace, name);
    if (!cached) {
      // Gone from the cache (deleted) after we wrote it: the record has nothing left to say.
      this.ownOscs.forget(key);
      return undefined;
    }
    return this.ownOscs.newerThan(key, cached.metadata.resourceVersion) ?? cached;
  }
  ownedSecret(namespace: string, name: string): KubeObject | undefined {
    const cached = this.setFor(namespace)?.owned.get(namespace, name);
    return (
      this.ownSecrets.newerThan(`${namespace}/${name}`, cached?.metadata.resourceVersion) ?? cached
    );
  }
  ownedSecretsOf(namespace: string, oscName: string): KubeObject[] {
    return (this.setFor(namespace)?.owned.list() ?? []).filter(
      (s) => s.metadata.namespace === namespace && s.metadata.labels?.[LABEL_OSC] === oscName,
    );
  }
  /** A referenced Secret's data, as read by loadReferences (see ReferencedSecrets). */
  secret(namespace: string, name: string): DataObject | undefined {
    return this.referenced.get(namespace, name);
  }
  configMap(namespace: string, name: string): DataObject | undefined {
    return this.setFor(namespace)?.configMaps.get(namespace, name);
  }
  ownWriteSeen(namespace: string, name: string): boolean {
    const cached = this.setFor(namespace)?.osc.get(namespace, name);
    return this.ownOscs.caughtUp(`${namespace}/${name}`, cached?.metadata.resourceVersion);
  }
  nodesOf(namespace: string, name: string): readonly NodeSummary[] {
    return this.nodeIndex.of(`${namespace}/${name}`);
  }
  /**
   * Whether the node report named so exists (its agent has reported) and is not another config's:
   * an object the identity approver labelled for another config UID is an earlier machine's of
   * the same name, not this config's machine joining.
   */
  nodeReported(name: string, configUid?: string): boolean {
    const node = this.nodes.get('', name);
    return node !== undefined && nodeOfConfig(node, configUid);
  }
  /** The identity approver's oscar.dev/config-uid label on the node object named so. */
  nodeConfigUid(name: string): string | undefined {
    return this.nodes.get('', name)?.metadata.labels?.[CONFIG_UID_LABEL];
  }
  /**
   * Reads the data of the Secrets `spec` references that is not held at the version the watch
   * shows; before a render (here and in the bootstrap controller), so references() has it.
   */
  async loadReferences(namespace: string, spec: OperatingSystemConfigSpec): Promise<void> {
    await this.referenced.load(namespace, referencedObjects(spec).secrets);
  }

  /** The data of the Secrets and ConfigMaps `spec` references, from these caches. */
  references(namespace: string, spec: OperatingSystemConfigSpec): References {
    return referencesFor(spec, namespace, this);
  }
}

export { oscPath };
