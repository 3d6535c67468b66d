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
import type { Clock } from '../clock.js';
import { dropManagedFields, httpSource, Informer, keyOf } from '../kube/informer.js';
import type { KubeObject, OscObject } from '../kube/types.js';
import { errorFields, type Logger } from '../../log/logger.js';
import type { ControllerMetrics } from '../metrics.js';
import { WorkQueue, type HandlerResult, type QueueOptions } from '../queue.js';
import { NODE_RBAC_SELECTOR, RBAC_API_VERSION } from '../identity/rbac.js';
import { consumedKey, type TokenConsumer } from './consumers.js';
import {
  machineOwner,
  reconcileBootstrap,
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
  nodeReported(name: string): boolean;
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

export class BootstrapController implements BootstrapCaches {
  readonly queue: WorkQueue;
  readonly tokens = new Map<string, TokenState>();
  /** Tokens the identity approver consumed (controller/identity/), by config key. */
  readonly consumed = new Map<string, TokenConsumed>();
  private readonly sets = new Map<string, Informers>();
  /** OSC (ns/name) → configs that use it; machine name → configs of that machine. */
  private readonly byOsc = new Index();
  private readonly byMachineName = new Index();
  private capi = false;
  private started = false;
  private readonly statusOverlay = new Map<string, { rv: string; status: OscarConfigStatus }>();
  private readonly secretOverlay = new Map<string, KubeObject>();
  private readonly roleOverlay = new Map<string, RoleObject>();
  private readonly writer: BootstrapWriter;

  constructor(private readonly o: BootstrapControllerOptions) {
    this.queue = new WorkQueue({
      concurrency: 16,
      baseDelayMs: 200,
      maxDelayMs: 60_000,
      ...o.queue,
      ...(o.clock ? { clock: o.clock } : {}),
    });
    this.writer = this.recordingWriter(o.writer);
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
    const { http, log, metrics } = this.o;
    const nsPath = ns ? `/namespaces/${ns}` : '';
    const scope = ns || '*';
    const timeout =
      this.o.watchTimeoutSeconds === undefined
        ? {}
        : { watchTimeoutSeconds: this.o.watchTimeoutSeconds };
    const common = (name: string, transform: (o: unknown) => void = dropManagedFields) => ({
      name,
      transform,
      ...(this.o.clock ? { clock: this.o.clock } : {}),
      onError: (error: unknown, attempt: number) => {
        metrics.watchErrors.inc({ informer: name, namespace: ns });
        log.warn({ informer: name, attempt, ...errorFields(error) }, 'list/watch failed; retrying');
      },
    });
    const index = (c: ConfigObject): void => {
      const k = keyOf(c);
      const ns2 = c.metadata.namespace ?? '';
      this.byOsc.set(k, [
        `${ns2}/${c.spec.provisionRef.name}`,
        `${ns2}/${c.spec.reconcileRef.name}`,
      ]);
      this.byMachineName.set(k, [machineOwner(c)?.name ?? c.metadata.name]);
    };
    const configs = new Informer<ConfigObject>(
      httpSource(http, {
        path: `/apis/${BOOTSTRAP_API_VERSION}${nsPath}/${OSCAR_CONFIG_RESOURCE}`,
        ...timeout,
      }),
      {
        onAdd: (c) => {
          index(c);
          this.queue.add(keyOf(c));
        },
        onUpdate: (before, after) => {
          index(after);
          if (watchedMeta(before) !== watchedMeta(after)) this.queue.add(keyOf(after));
        },
        onDelete: (c) => {
          const k = keyOf(c);
          this.byOsc.remove(k);
          this.byMachineName.remove(k);
          this.statusOverlay.delete(k);
          this.consumed.delete(k);
          this.consumed.delete(consumedKey(k, 'kubelet'));
          // Remember its token so the delete pass can remove it, also after a restart.
          const id = c.status?.bootstrapTokenID;
          const live =
            c.status?.conditions?.find((x) => x.type === 'BootstrapTokenAvailable')?.status ===
            'True';
          if (id && live && !this.tokens.has(k)) {
            this.tokens.set(k, { uid: c.metadata.uid ?? '', id, expiresAt: new Date(0) });
          }
          this.queue.add(k);
        },
      },
      common(`oscarconfigs(${scope})`),
    );
    const configOf = (s: KubeObject): string | undefined => {
      const name = s.metadata.labels?.[LABEL_CONFIG_NAME];
      return name ? `${s.metadata.namespace ?? ''}/${name}` : undefined;
    };
    const secrets = new Informer<KubeObject>(
      httpSource(http, {
        path: `/api/v1${nsPath}/secrets`,
        labelSelector: LABEL_CONFIG_NAME,
        metadataOnly: true,
        ...timeout,
      }),
      {
        onAdd: (s) => {
          this.secretOverlay.delete(keyOf(s));
          const k = configOf(s);
          if (k) this.queue.add(k);
        },
        onUpdate: (_, s) => {
          this.secretOverlay.delete(keyOf(s));
        },
        onDelete: (s) => {
          this.secretOverlay.delete(keyOf(s));
          const k = configOf(s);
          if (k) this.queue.add(k);
        },
      },
      common(`secrets(${scope}, user data)`),
    );
    const configOfRole = (r: RoleObject): string | undefined => {
      const ref = r.metadata.ownerReferences?.find((o) => o.kind === OSCAR_CONFIG_KIND);
      return ref ? `${r.metadata.namespace ?? ''}/${ref.name}` : undefined;
    };
    const touchRole = (r: RoleObject): void => {
      const k = configOfRole(r);
      if (k) this.queue.add(k);
    };
    const roles = new Informer<RoleObject>(
      httpSource(http, {
        path: `/apis/${RBAC_API_VERSION}${nsPath}/roles`,
        labelSelector: NODE_RBAC_SELECTOR,
        ...timeout,
      }),
      {
        onAdd: touchRole,
        onUpdate: (before, after) => {
          this.roleOverlay.delete(keyOf(after));
          if (JSON.stringify(before.rules) !== JSON.stringify(after.rules)) touchRole(after);
        },
        onDelete: (r) => {
          this.roleOverlay.delete(keyOf(r));
        },
      },
      common(`roles(${scope}, node access)`),
    );
    const set: Informers = { configs, secrets, roles };
    if (this.capi) {
      const configKeyOf = (m: MachineObject): string | undefined => {
        const ref = m.spec?.bootstrap?.configRef;
        return ref?.kind === OSCAR_CONFIG_KIND && ref.name
          ? `${m.metadata.namespace ?? ''}/${ref.name}`
          : undefined;
      };
      const touchMachine = (m: MachineObject): void => {
        const k = configKeyOf(m);
        if (k) this.queue.add(k);
      };
      set.machines = new Informer<MachineObject>(
        httpSource(http, {
          path: `/apis/${CAPI_GROUP}/${CAPI_VERSION}${nsPath}/machines`,
          ...timeout,
        }),
        {
          onAdd: touchMachine,
          onUpdate: (before, after) => {
            if (
              JSON.stringify([before.spec, before.status]) !==
              JSON.stringify([after.spec, after.status])
            ) {
              touchMachine(after);
            }
          },
          onDelete: touchMachine,
        },
        common(`machines(${scope})`, slimMachine),
      );
      const machines = set.machines;
      const touchCluster = (c: ClusterObject): void => {
        for (const m of machines.list()) {
          if (
            m.metadata.namespace === c.metadata.namespace &&
            m.spec?.clusterName === c.metadata.name
          ) {
            touchMachine(m);
          }
        }
      };
      set.clusters = new Informer<ClusterObject>(
        httpSource(http, {
          path: `/apis/${CAPI_GROUP}/${CAPI_VERSION}${nsPath}/clusters`,
          ...timeout,
        }),
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
        common(`clusters(${scope})`, slimCluster),
      );
    }
    return set;
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

  get synced(): boolean {
    return this.started && this.all().every((i) => i.synced);
  }

  get capiEnabled(): boolean {
    return this.capi;
  }

  /** Starts the informers (call once the OSC controller's caches are synced), then the workers. */
  async start(): Promise<void> {
    const t0 = Date.now();
    this.capi = await this.capiServed();
    const scopes = this.o.namespaces.length === 0 ? [''] : this.o.namespaces;
    for (const ns of scopes) this.sets.set(ns, this.makeInformers(ns));
    for (const i of this.all()) i.start();
    await Promise.all(this.all().map((i) => i.waitForSync()));
    this.o.log.info(
      { ms: Date.now() - t0, clusterApi: this.capi, configs: this.countConfigs() },
      'bootstrap caches synced; reconciling OscarConfigs',
    );
    this.started = true;
    this.queue.start((key) => this.handle(key));
  }

  async stop(): Promise<void> {
    await this.queue.shutdown();
    await Promise.all(this.all().map((i) => i.stop()));
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

  private async handle(key: string): Promise<HandlerResult | undefined> {
    const { metrics, log } = this.o;
    const end = metrics.reconcileDuration.startTimer();
    try {
      const out = await reconcileBootstrap(key, {
        caches: this,
        writer: this.writer,
        settings: this.o.settings,
        tokens: this.tokens,
        consumed: this.consumed,
        now: () => new Date(),
      });
      metrics.reconciles.inc({ result: `bootstrap-${out.result}` });
      if (out.writes > 0) {
        log.info({ config: key, result: out.result, writes: out.writes }, 'reconciled OscarConfig');
      } else {
        log.debug({ config: key, result: out.result }, 'reconciled OscarConfig; nothing to write');
      }
      return out.requeueAfterMs === undefined ? undefined : { requeueAfterMs: out.requeueAfterMs };
    } catch (error) {
      metrics.reconciles.inc({ result: 'bootstrap-error' });
      log.warn(
        { config: key, retryInMs: this.queue.backoffFor(key), ...errorFields(error) },
        'OscarConfig reconcile failed; will retry',
      );
      throw error;
    } finally {
      end();
    }
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
    return this.configsForMachine(machine)
      .filter((c) => {
        if (this.consumed.has(keyOf(c))) return true;
        const t = c.status?.conditions?.find((x) => x.type === 'BootstrapTokenAvailable');
        return t?.status === 'False' && t.reason === 'IdentityIssued';
      })
      .map((c) => c.metadata.namespace ?? '');
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
      if (stored) this.secretOverlay.set(keyOf(stored), { metadata: stored.metadata });
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
          this.statusOverlay.set(`${namespace}/${name}`, {
            rv: stored.metadata.resourceVersion,
            status,
          });
        }
        return stored;
      },
      event: (c, e) => {
        count('events', 'create');
        return inner.event(c, e);
      },
      applyNodeRole: async (b) => {
        count('roles', 'apply');
        const stored = await inner.applyNodeRole(b);
        if (stored) {
          this.roleOverlay.set(keyOf(stored), {
            ...stored,
            rules: (b as { rules?: unknown }).rules,
          });
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
    const own = this.statusOverlay.get(`${namespace}/${name}`);
    if (!cached || !own) return cached;
    const a = Number(cached.metadata.resourceVersion ?? 0);
    const b = Number(own.rv);
    if (Number.isFinite(a) && Number.isFinite(b) && a < b) return { ...cached, status: own.status };
    this.statusOverlay.delete(`${namespace}/${name}`);
    return cached;
  }
  dataSecret(namespace: string, name: string): KubeObject | undefined {
    return (
      this.setFor(namespace)?.secrets.get(namespace, name) ??
      this.secretOverlay.get(`${namespace}/${name}`)
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
  nodeReported(name: string): boolean {
    return this.o.shared.nodeReported(name);
  }
  nodeRole(namespace: string, name: string): RoleObject | undefined {
    const cached = this.setFor(namespace)?.roles.get(namespace, name);
    const own = this.roleOverlay.get(`${namespace}/${name}`);
    if (!cached || !own) return cached;
    const a = Number(cached.metadata.resourceVersion ?? 0);
    const b = Number(own.metadata.resourceVersion ?? 0);
    if (Number.isFinite(a) && Number.isFinite(b) && a < b) return own;
    this.roleOverlay.delete(`${namespace}/${name}`);
    return cached;
  }
}
