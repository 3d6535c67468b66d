/**
 * The bootstrap controller: OscarConfigs → per-machine user data Secrets and bootstrap tokens.
 * It runs in the same process as the OSC controller and shares its caches (OSCs, the Secrets and
 * ConfigMaps they reference, node reports) through the OSC controller's listeners; its own
 * informers, per watched namespace (or once cluster-wide):
 * - OscarConfigs (full: they are small);
 * - the user data Secrets it made (label bootstrap.oscar.dev/config), metadata only: the data
 *   holds a token and is never read back;
 * - Cluster API Machines and Clusters (v1beta2), slimmed to owner, cluster, bootstrap ref, nodeRef
 *   and pause — only when the API server serves cluster.x-k8s.io/v1beta2 at start.
 * It lists nothing in kube-system: tokens are written and deleted by name.
 */
import {
  BOOTSTRAP_API_VERSION,
  CAPI_GROUP,
  CAPI_VERSION,
  LABEL_CONFIG_NAME,
  OSCAR_CONFIG_KIND,
  OSCAR_CONFIG_RESOURCE,
} from '../../api/bootstrap/constants.js';
import type { OscarConfigStatus } from '../../api/bootstrap/schema.js';
import type { References } from '../../api/resolve.js';
import type { OperatingSystemConfigSpec } from '../../api/schema.js';
import { isNotFound, type KubeHttp } from '../../kube/client.js';
import type { Clock } from '../kube/clock.js';
import { keyOf, type Informer } from '../kube/informer.js';
import type { KubeObject, OscObject } from '../kube/types.js';
import type { Logger } from '../../log/logger.js';
import type { ControllerMetrics } from '../runtime/metrics.js';
import { namespaceOfKey, type QueueOptions, type WorkQueue } from '../runtime/queue.js';
import { ControllerRuntime, controllerQueue, RuntimeController } from '../runtime/controller.js';
import { timedHandle, type Reconciled } from '../runtime/handle.js';
import { watchInformer, type InformerContext } from '../runtime/informers.js';
import { OwnWrites } from '../runtime/own-writes.js';
import { NODE_RBAC_SELECTOR, RBAC_API_VERSION } from '../shared/node-rbac.js';
import { consumedKey, type TokenConsumer } from './consumers.js';
import { identityNamespaces } from '../rollout/node-index.js';
import {
  departedOf,
  machineOwner,
  reconcileBootstrap,
  type Departed,
  type BootstrapCaches,
  type BootstrapSettings,
  type BootstrapWriter,
  consumedStatus,
  type BootstrapEvent,
  type TokenConsumed,
  type TokenState,
  type RoleObject,
} from './reconcile.js';
import {
  slimCluster,
  slimMachine,
  type ClusterObject,
  type ConfigObject,
  type MachineObject,
} from './types.js';

/** What the OSC controller shares with this one. */
export interface SharedCaches {
  osc(namespace: string, name: string): OscObject | undefined;
  references(namespace: string, spec: OperatingSystemConfigSpec): References;
  /** Reads the referenced Secrets' data references() returns (a GET of each not yet held). */
  loadReferences(namespace: string, spec: OperatingSystemConfigSpec): Promise<void>;
  nodeReported(name: string, configUid?: string): boolean;
  /** The oscar.dev/config-uid label of the node object named so (the approver's), if any. */
  nodeConfigUid(name: string): string | undefined;
}

export interface BootstrapControllerOptions {
  http: KubeHttp;
  writer: BootstrapWriter;
  shared: SharedCaches;
  settings: BootstrapSettings;
  namespaces: string[];
  log: Logger;
  metrics: ControllerMetrics;
  queue?: Partial<QueueOptions>;
  clock?: Clock;
  watchTimeoutSeconds?: number;
}

interface Informers {
  configs: Informer<ConfigObject>;
  secrets: Informer<KubeObject>;
  /** The machines' Roles the identity approver wrote (node access follows the config). */
  roles: Informer<RoleObject>;
  machines?: Informer<MachineObject>;
  clusters?: Informer<ClusterObject>;
}

/** The parts of a config's metadata whose change needs a pass (not its own status writes). */
function watchedMeta(c: ConfigObject): string {
  const m = c.metadata;
  return JSON.stringify([
    m.uid,
    m.generation,
    m.deletionTimestamp,
    m.ownerReferences,
    m.labels,
    m.annotations,
  ]);
}

function nsPath(ns: string): string {
  return ns ? `/namespaces/${ns}` : '';
}

/** A set-valued index: key → keys. */
class Index {
  private readonly map = new Map<string, Set<string>>();
  private readonly back = new Map<string, string[]>();
  set(owner: string, keys: string[]): void {
    this.remove(owner);
    this.back.set(owner, keys);
    for (const k of keys) {
      let set = this.map.get(k);
      if (!set) this.map.set(k, (set = new Set()));
      set.add(owner);
    }
  }
  remove(owner: string): void {
    for (const k of this.back.get(owner) ?? []) {
      const set = this.map.get(k);
      set?.delete(owner);
      if (set?.size === 0) this.map.delete(k);
    }
    this.back.delete(owner);
  }
  get(key: string): Iterable<string> {
    return this.map.get(key) ?? [];
  }
}

export class BootstrapController extends RuntimeController implements BootstrapCaches {
  readonly queue: WorkQueue;
  readonly tokens = new Map<string, TokenState>();
  /** Tokens the identity approver consumed (controller/identity/), by config key. */
  readonly consumed = new Map<string, TokenConsumed>();
  /** Deleted configs whose machine's node object the delete pass removes. */
  private readonly departed = new Map<string, Departed>();
  private readonly sets = new Map<string, Informers>();
  /** OSC (ns/name) → configs that use it; machine name → configs of that machine. */
  private readonly byOsc = new Index();
  private readonly byMachineName = new Index();
  private capi = false;
  protected readonly runtime: ControllerRuntime;
  private readonly ctx: InformerContext;
  /** Read-your-writes: statuses, user data Secrets and Roles until the watch delivers them. */
  private readonly ownStatus = new OwnWrites<OscarConfigStatus>();
  private readonly ownSecrets = new OwnWrites<KubeObject>();
  private readonly ownRoles = new OwnWrites<RoleObject>();
  private readonly writer: BootstrapWriter;

  constructor(private readonly o: BootstrapControllerOptions) {
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
    this.writer = this.recordingWriter(o.writer);
    this.runtime = new ControllerRuntime({
      queue: this.queue,
      handle: timedHandle((key) => this.reconcile(key), {
        keyField: 'config',
        reconciled: 'reconciled OscarConfig',
        failed: 'OscarConfig reconcile failed; will retry',
        log: o.log,
        queue: () => this.queue,
        timer: () => o.metrics.reconcileDuration.startTimer(),
        count: (result) => {
          o.metrics.reconciles.inc({ result: `bootstrap-${result}` });
        },
        errorResult: () => 'error',
      }),
      log: o.log,
      // Started once the OSC controller's caches are synced; Cluster API's informers only when
      // the API server serves it.
      informers: async () => {
        this.capi = await this.capiServed();
        const scopes = o.namespaces.length === 0 ? [''] : o.namespaces;
        for (const ns of scopes) this.sets.set(ns, this.makeInformers(ns));
        return this.all();
      },
      synced: {
        message: 'bootstrap caches synced; reconciling OscarConfigs',
        fields: () => ({ clusterApi: this.capi, configs: this.countConfigs() }),
      },
    });
  }

  /** Told by the OSC controller: an OSC changed; configs still waiting on it get a pass. */
  oscChanged(namespace: string, name: string): void {
    for (const k of this.byOsc.get(`${namespace}/${name}`)) this.queue.add(k);
  }

  /** Told by the OSC controller: a node report appeared or went; its machine's config gets a pass. */
  nodeChanged(name: string): void {
    for (const k of this.byMachineName.get(name)) this.queue.add(k);
  }

  private async capiServed(): Promise<boolean> {
    try {
      await this.o.http.request('GET', `/apis/${CAPI_GROUP}/${CAPI_VERSION}`);
      return true;
    } catch (error) {
      if (isNotFound(error)) return false;
      throw error;
    }
  }

  private makeInformers(ns: string): Informers {
    const set: Informers = {
      configs: this.configInformer(ns),
      secrets: this.dataSecretInformer(ns),
      roles: this.roleInformer(ns),
    };
    if (this.capi) {
      set.machines = this.machineInformer(ns);
      set.clusters = this.clusterInformer(ns, set.machines);
    }
    return set;
  }

  /** Keeps the OSC → configs and machine → configs indexes of one config. */
  private index(c: ConfigObject): void {
    const k = keyOf(c);
    const ns = c.metadata.namespace ?? '';
    this.byOsc.set(k, [`${ns}/${c.spec.provisionRef.name}`, `${ns}/${c.spec.reconcileRef.name}`]);
    this.byMachineName.set(k, [machineOwner(c)?.name ?? c.metadata.name]);
  }

  /** A deleted config: forget it, but remember its token so the delete pass removes it. */
  private configDeleted(c: ConfigObject): void {
    const k = keyOf(c);
    this.byOsc.remove(k);
    this.byMachineName.remove(k);
    this.ownStatus.forget(k);
    this.consumed.delete(k);
    this.consumed.delete(consumedKey(k, 'kubelet'));
    // Remember its token so the delete pass can remove it, also after a restart.
    const id = c.status?.bootstrapTokenID;
    const live =
      c.status?.conditions?.find((x) => x.type === 'BootstrapTokenAvailable')?.status === 'True';
    if (id && live && !this.tokens.has(k)) {
      this.tokens.set(k, { uid: c.metadata.uid ?? '', id, expiresAt: new Date(0) });
    }
    const departed = departedOf(c);
    if (departed) this.departed.set(k, departed);
    this.queue.add(k);
  }

  /** OscarConfigs, full: a change other than our own status writes needs a pass. */
  private configInformer(ns: string): Informer<ConfigObject> {
    return watchInformer<ConfigObject>(
      this.ctx,
      {
        name: `oscarconfigs(${ns || '*'})`,
        namespace: ns,
        source: { path: `/apis/${BOOTSTRAP_API_VERSION}${nsPath(ns)}/${OSCAR_CONFIG_RESOURCE}` },
      },
      {
        onAdd: (c) => {
          this.index(c);
          this.queue.add(keyOf(c));
        },
        onUpdate: (before, after) => {
          this.index(after);
          if (watchedMeta(before) !== watchedMeta(after)) this.queue.add(keyOf(after));
        },
        onDelete: (c) => {
          this.configDeleted(c);
        },
      },
    );
  }

  /** The user data Secrets it made, metadata only (their data holds a token). */
  private dataSecretInformer(ns: string): Informer<KubeObject> {
    // The config is the Secret's controller owner; the label's value is shortened for names over
    // 63 characters (configLabelValue), so it is only the fallback.
    const configOf = (s: KubeObject): string | undefined => {
      const owner = s.metadata.ownerReferences?.find(
        (o) => o.controller === true && o.kind === OSCAR_CONFIG_KIND,
      );
      const name = owner?.name ?? s.metadata.labels?.[LABEL_CONFIG_NAME];
      return name ? `${s.metadata.namespace ?? ''}/${name}` : undefined;
    };
    return watchInformer<KubeObject>(
      this.ctx,
      {
        name: `secrets(${ns || '*'}, user data)`,
        namespace: ns,
        source: {
          path: `/api/v1${nsPath(ns)}/secrets`,
          labelSelector: LABEL_CONFIG_NAME,
          metadataOnly: true,
        },
      },
      {
        onAdd: (s) => {
          this.ownSecrets.forget(keyOf(s));
          const k = configOf(s);
          if (k) this.queue.add(k);
        },
        onUpdate: (_, s) => {
          this.ownSecrets.forget(keyOf(s));
        },
        onDelete: (s) => {
          this.ownSecrets.forget(keyOf(s));
          const k = configOf(s);
          if (k) this.queue.add(k);
        },
      },
    );
  }

  /** The machines' Roles the identity approver wrote (node access follows the config). */
  private roleInformer(ns: string): Informer<RoleObject> {
    const touchRole = (r: RoleObject): void => {
      const ref = r.metadata.ownerReferences?.find((o) => o.kind === OSCAR_CONFIG_KIND);
      if (ref) this.queue.add(`${r.metadata.namespace ?? ''}/${ref.name}`);
    };
    return watchInformer<RoleObject>(
      this.ctx,
      {
        name: `roles(${ns || '*'}, node access)`,
        namespace: ns,
        source: {
          path: `/apis/${RBAC_API_VERSION}${nsPath(ns)}/roles`,
          labelSelector: NODE_RBAC_SELECTOR,
        },
      },
      {
        onAdd: touchRole,
        onUpdate: (before, after) => {
          this.ownRoles.seen(keyOf(after), after.metadata.resourceVersion);
          if (JSON.stringify(before.rules) !== JSON.stringify(after.rules)) touchRole(after);
        },
        onDelete: (r) => {
          this.ownRoles.forget(keyOf(r));
        },
      },
    );
  }

  /** A Machine whose bootstrap ref names an OscarConfig: its spec or status moved. */
  private touchMachine(m: MachineObject): void {
    const ref = m.spec?.bootstrap?.configRef;
    if (ref?.kind === OSCAR_CONFIG_KIND && ref.name) {
      this.queue.add(`${m.metadata.namespace ?? ''}/${ref.name}`);
    }
  }

  /** Cluster API Machines, slimmed to owner, cluster, bootstrap ref, nodeRef and pause. */
  private machineInformer(ns: string): Informer<MachineObject> {
    return watchInformer<MachineObject>(
      this.ctx,
      {
        name: `machines(${ns || '*'})`,
        namespace: ns,
        source: { path: `/apis/${CAPI_GROUP}/${CAPI_VERSION}${nsPath(ns)}/machines` },
        transform: slimMachine,
      },
      {
        onAdd: (m) => {
          this.touchMachine(m);
        },
        onUpdate: (before, after) => {
          if (
            JSON.stringify([before.spec, before.status]) !==
            JSON.stringify([after.spec, after.status])
          ) {
            this.touchMachine(after);
          }
        },
        onDelete: (m) => {
          this.touchMachine(m);
        },
      },
    );
  }

  /** Cluster API Clusters: a change touches every Machine of the cluster. */
  private clusterInformer(ns: string, machines: Informer<MachineObject>): Informer<ClusterObject> {
    const touchCluster = (c: ClusterObject): void => {
      for (const m of machines.list()) {
        if (
          m.metadata.namespace === c.metadata.namespace &&
          m.spec?.clusterName === c.metadata.name
        ) {
          this.touchMachine(m);
        }
      }
    };
    return watchInformer<ClusterObject>(
      this.ctx,
      {
        name: `clusters(${ns || '*'})`,
        namespace: ns,
        source: { path: `/apis/${CAPI_GROUP}/${CAPI_VERSION}${nsPath(ns)}/clusters` },
        transform: slimCluster,
      },
      {
        onAdd: touchCluster,
        onUpdate: (before, after) => {
          if (
            JSON.stringify([before.spec, before.metadata.annotations]) !==
            JSON.stringify([after.spec, after.metadata.annotations])
          ) {
            touchCluster(after);
          }
        },
        onDelete: touchCluster,
      },
    );
  }

  private all(): Informer<KubeObject>[] {
    return [...this.sets.values()].flatMap((s): Informer<KubeObject>[] => [
      s.configs,
      s.secrets,
      s.roles,
      ...(s.machines ? [s.machines] : []),
      ...(s.clusters ? [s.clusters] : []),
    ]);
  }

  get capiEnabled(): boolean {
    return this.capi;
  }

  /** Every cached OscarConfig (the controller's metrics count their conditions). */
  allConfigs(): ConfigObject[] {
    return [...this.sets.values()].flatMap((s) => s.configs.list());
  }

  countConfigs(): number {
    let n = 0;
    for (const s of this.sets.values()) n += s.configs.size;
    return n;
  }

  private async reconcile(key: string): Promise<Reconciled> {
    await this.loadReferences(key);
    const out = await reconcileBootstrap(key, {
      caches: this,
      writer: this.writer,
      settings: this.o.settings,
      tokens: this.tokens,
      consumed: this.consumed,
      departed: this.departed,
      now: () => new Date(),
    });
    return {
      result: out.result,
      writes: out.writes,
      ...(out.requeueAfterMs === undefined ? {} : { requeueAfterMs: out.requeueAfterMs }),
    };
  }

  /** The data of the Secrets the config's provision OSC references, before it renders. */
  private async loadReferences(key: string): Promise<void> {
    const slash = key.indexOf('/');
    const ns = key.slice(0, slash);
    const provision = this.config(ns, key.slice(slash + 1))?.spec.provisionRef.name;
    const osc = provision === undefined ? undefined : this.o.shared.osc(ns, provision);
    if (osc) await this.o.shared.loadReferences(ns, osc.spec);
  }

  /** The config whose current bootstrap token has this id (its status names it), if any. */
  configForToken(id: string): ConfigObject | undefined {
    for (const set of this.sets.values()) {
      for (const c of set.configs.list()) {
        if (c.status?.bootstrapTokenID === id && !c.metadata.deletionTimestamp) return c;
      }
    }
    return undefined;
  }

  /**
   * The live configs that name a machine (its Machine's name, or the config's own): one, unless
   * configs in two namespaces name the same machine (the approver then issues no identity).
   */
  configsForMachine(machine: string): ConfigObject[] {
    const out: ConfigObject[] = [];
    for (const k of this.byMachineName.get(machine)) {
      const [namespace = '', name = ''] = k.split('/');
      const c = this.config(namespace, name);
      if (c && !c.metadata.deletionTimestamp) out.push(c);
    }
    return out;
  }

  /**
   * The namespaces whose live config naming `machine` had its identity issued (its token traded
   * for the node's certificate): where that node belongs (docs/identity.md, "Tenancy"). Empty for
   * a node oscar issued no identity to (an agent run with other credentials).
   */
  issuedNamespaces(machine: string): string[] {
    const issued = this.configsForMachine(machine)
      .filter((c) => {
        if (this.consumed.has(keyOf(c))) return true;
        const t = c.status?.conditions?.find((x) => x.type === 'BootstrapTokenAvailable');
        return t?.status === 'False' && t.reason === 'IdentityIssued';
      })
      .map((c) => ({ namespace: c.metadata.namespace ?? '', uid: c.metadata.uid ?? '' }));
    return identityNamespaces(issued, this.o.shared.nodeConfigUid(machine));
  }

  /**
   * The identity approver used this config's token: say so in its status (before the token is
   * deleted), and never refresh or re-issue it from now on, whatever a stale cache says.
   */
  async tokenConsumed(
    key: string,
    consumed: TokenConsumed,
    consumer: TokenConsumer = 'agent',
  ): Promise<void> {
    const { namespace, name } = {
      namespace: key.split('/')[0] ?? '',
      name: key.split('/')[1] ?? '',
    };
    const config = this.config(namespace, name);
    if (!config) throw new Error(`OscarConfig ${key} is not in the cache`);
    const status = consumedStatus(config, consumed, new Date(), consumer, this.consumed);
    this.consumed.set(consumedKey(key, consumer), consumed);
    await this.writer.patchStatus(namespace, name, status);
  }

  /** An Event on a config (the identity approver's decisions). */
  event(config: ConfigObject, e: BootstrapEvent): Promise<void> {
    return this.writer.event(config, e);
  }

  /** Read-your-writes: a pass before the watch delivers our write must not write again. */
  private recordingWriter(inner: BootstrapWriter): BootstrapWriter {
    const record = (stored: KubeObject | undefined): void => {
      if (stored) {
        this.ownSecrets.record(
          keyOf(stored),
          { metadata: stored.metadata },
          stored.metadata.resourceVersion,
        );
      }
    };
    // every write request, by what it writes and how (oscar_controller_api_writes_total)
    const count = (resource: string, verb: string): void => {
      this.o.metrics.writes.inc({ resource, verb });
    };
    return {
      applyToken: (b) => {
        count('secrets', 'apply');
        return inner.applyToken(b);
      },
      refreshToken: (id, e) => {
        count('secrets', 'patch'); // a merge patch of its expiration
        return inner.refreshToken(id, e);
      },
      deleteToken: (id) => {
        count('secrets', 'delete');
        return inner.deleteToken(id);
      },
      createDataSecret: async (b) => {
        count('secrets', 'create');
        const stored = await inner.createDataSecret(b);
        record(stored);
        return stored;
      },
      replaceDataSecret: async (b) => {
        count('secrets', 'update');
        const stored = await inner.replaceDataSecret(b);
        record(stored);
        return stored;
      },
      patchStatus: async (namespace, name, status) => {
        count('oscarconfigs/status', 'apply');
        const stored = await inner.patchStatus(namespace, name, status);
        if (stored?.metadata.resourceVersion) {
          this.ownStatus.record(`${namespace}/${name}`, status, stored.metadata.resourceVersion);
        }
        return stored;
      },
      event: (c, e) => {
        count('events', 'create');
        return inner.event(c, e);
      },
      deleteNode: async (machine, uid) => {
        const deleted = await inner.deleteNode(machine, uid);
        if (deleted) count('operatingsystemconfignodes', 'delete');
        return deleted;
      },
      applyNodeRole: async (b) => {
        count('roles', 'apply');
        const stored = await inner.applyNodeRole(b);
        if (stored) {
          const role = { ...stored, rules: (b as { rules?: unknown }).rules };
          this.ownRoles.record(keyOf(stored), role, stored.metadata.resourceVersion);
        }
        return stored;
      },
    };
  }

  private setFor(namespace: string): Informers | undefined {
    return this.sets.get(namespace) ?? this.sets.get('');
  }

  // BootstrapCaches
  config(namespace: string, name: string): ConfigObject | undefined {
    const cached = this.setFor(namespace)?.configs.get(namespace, name);
    if (!cached) return undefined;
    const own = this.ownStatus.newerThan(`${namespace}/${name}`, cached.metadata.resourceVersion);
    return own ? { ...cached, status: own } : cached;
  }
  dataSecret(namespace: string, name: string): KubeObject | undefined {
    const cached = this.setFor(namespace)?.secrets.get(namespace, name);
    return (
      this.ownSecrets.newerThan(`${namespace}/${name}`, cached?.metadata.resourceVersion) ?? cached
    );
  }
  osc(namespace: string, name: string): OscObject | undefined {
    return this.o.shared.osc(namespace, name);
  }
  references(namespace: string, spec: OperatingSystemConfigSpec): References {
    return this.o.shared.references(namespace, spec);
  }
  machine(namespace: string, name: string): MachineObject | undefined {
    return this.setFor(namespace)?.machines?.get(namespace, name);
  }
  cluster(namespace: string, name: string): ClusterObject | undefined {
    return this.setFor(namespace)?.clusters?.get(namespace, name);
  }
  nodeReported(name: string, configUid?: string): boolean {
    return this.o.shared.nodeReported(name, configUid);
  }
  nodeRole(namespace: string, name: string): RoleObject | undefined {
    const cached = this.setFor(namespace)?.roles.get(namespace, name);
    if (!cached) return undefined;
    return (
      this.ownRoles.newerThan(`${namespace}/${name}`, cached.metadata.resourceVersion) ?? cached
    );
  }
}
