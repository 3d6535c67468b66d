// A test-only Cluster API infrastructure provider on systemd-nspawn, in the manner of Cluster API's
// Docker provider (docs/testing.md, "Cluster API on real nodes"). A small controller that polls its
// objects in one namespace:
// - NspawnCluster: the infrastructure is this host, provisioned at once; its control plane endpoint
//   is the test API server's.
// - NspawnControlPlane: the test API server itself, an externally managed control plane (as EKS or
//   AKS are to Cluster API), initialized.
// - NspawnMachine: one nspawn machine per object, booted from its Machine's bootstrap data Secret
//   (oscar's user data) through cloud-init's NoCloud seed; then spec.providerID, the addresses and
//   status.initialization.provisioned. A finalizer holds the object until the machine is stopped
//   and its disk removed.
import type { KubeHttp } from '../../../kube/client.js';
import { CONTENT_MERGE_PATCH, isNotFound } from '../../../kube/client.js';
import { NSPAWN_API, pluralOf, type NspawnKind } from './crds.js';
import {
  FINALIZER,
  machineStep,
  type Address,
  type MachineObject,
  type NspawnMachineObject,
} from './decide.js';

/** A machine this provider runs. */
export interface Booted {
  /** The Cluster API Machine's name: the nspawn machine's and the Node's name. */
  readonly machine: string;
  stop(): Promise<void>;
}

/** Where machines run: the e2e boots nspawn machines (nspawn-host.ts). */
export interface MachineHost<B extends Booted> {
  boot(o: { machine: string; userData: string }): Promise<B>;
}

export interface ProviderOptions<B extends Booted> {
  api: KubeHttp;
  namespace: string;
  host: MachineHost<B>;
  /** The test API server: the control plane endpoint. */
  endpoint: { host: string; port: number };
  /** How often the loop reads its objects. Default 1 s. */
  intervalMs?: number;
}

interface Obj {
  metadata: { name: string };
  spec?: { controlPlaneEndpoint?: { host?: string } };
  status?: Record<string, unknown>;
}

/** Whether `have` holds every value of `want` (key order aside: the API server sorts keys). */
function covers(have: unknown, want: unknown): boolean {
  if (typeof want !== 'object' || want === null) return have === want;
  if (typeof have !== 'object' || have === null) return false;
  const h = have as Record<string, unknown>;
  return Object.entries(want).every(([k, v]) => covers(h[k], v));
}

export class NspawnProvider<B extends Booted> {
  /** By NspawnMachine name; a boot in progress counts. */
  private readonly machines = new Map<string, Promise<B | undefined>>();
  private readonly byMachine = new Map<string, B>();
  private readonly log: string[] = [];
  private stopping = false;
  private loop: Promise<void> | undefined;

  constructor(private readonly o: ProviderOptions<B>) {}

  start(): void {
    this.loop = this.run();
  }

  /** The running machine of Cluster API Machine `machine`. */
  running(machine: string): B | undefined {
    return this.byMachine.get(machine);
  }

  runningCount(): number {
    return this.byMachine.size;
  }

  /** What the provider did and the errors it met, newest last. */
  logs(): string {
    return this.log.slice(-60).join('\n');
  }

  /** Stops the loop, then every machine it still runs. */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.loop;
    for (const [name, m] of this.machines) {
      this.machines.delete(name);
      await (await m.catch(() => undefined))?.stop().catch(() => undefined);
    }
    this.byMachine.clear();
  }

  /** A method, not the field: it flips while the loop awaits. */
  private isStopping(): boolean {
    return this.stopping;
  }

  private note(line: string): void {
    this.log.push(`${new Date().toISOString()} ${line}`);
  }

  private async run(): Promise<void> {
    while (!this.stopping) {
      try {
        await this.reconcileCluster('NspawnCluster', {
          initialization: { provisioned: true },
        });
        await this.reconcileCluster('NspawnControlPlane', {
          initialization: { controlPlaneInitialized: true },
          externalManagedControlPlane: true,
        });
        await this.reconcileMachines();
      } catch (error) {
        if (!this.isStopping()) this.note(`error: ${(error as Error).message}`);
      }
      await new Promise((r) => setTimeout(r, this.o.intervalMs ?? 1000));
    }
  }

  private path(kind: NspawnKind, name?: string, sub?: string): string {
    const base = `/apis/${NSPAWN_API}/namespaces/${this.o.namespace}/${pluralOf(kind)}`;
    return [base, name, sub].filter((p) => p !== undefined).join('/');
  }

  private async list<T>(kind: NspawnKind): Promise<T[]> {
    return (await this.o.api.request<{ items: T[] }>('GET', this.path(kind))).items;
  }

  private patch(path: string, body: Record<string, unknown>): Promise<unknown> {
    return this.o.api.request('PATCH', path, { contentType: CONTENT_MERGE_PATCH, body });
  }

  /** A cluster-level object: the endpoint in spec, `status` once. */
  private async reconcileCluster(kind: NspawnKind, status: Record<string, unknown>): Promise<void> {
    for (const obj of await this.list<Obj>(kind)) {
      if (!obj.spec?.controlPlaneEndpoint?.host) {
        await this.patch(this.path(kind, obj.metadata.name), {
          spec: { controlPlaneEndpoint: this.o.endpoint },
        });
      }
      const want = JSON.stringify(status);
      if (!covers(obj.status ?? {}, status)) {
        await this.patch(this.path(kind, obj.metadata.name, 'status'), { status });
        this.note(`${kind} ${obj.metadata.name}: status ${want}`);
      }
    }
  }

  private async machineOf(infra: NspawnMachineObject): Promise<MachineObject | undefined> {
    const owner = infra.metadata.ownerReferences?.find((r) => r.kind === 'Machine');
    if (!owner) return undefined;
    try {
      return await this.o.api.request<MachineObject>(
        'GET',
        `/apis/cluster.x-k8s.io/v1beta2/namespaces/${this.o.namespace}/machines/${owner.name}`,
      );
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
  }

  private async reconcileMachines(): Promise<void> {
    for (const infra of await this.list<NspawnMachineObject>('NspawnMachine')) {
      const name = infra.metadata.name;
      const step = machineStep(infra, await this.machineOf(infra), this.machines.has(name));
      switch (step.kind) {
        case 'release':
          await this.release(infra);
          break;
        case 'claim':
          await this.patch(this.path('NspawnMachine', name), {
            metadata: { finalizers: [...(infra.metadata.finalizers ?? []), FINALIZER] },
          });
          break;
        case 'boot':
          this.boot(name, step.machine, step.secret);
          break;
        case 'report':
          await this.report(name, step.providerID, step.addresses);
          break;
        case 'wait':
        case 'none':
          break;
      }
    }
  }

  /** Boots in the background: the loop keeps serving the other machines meanwhile. */
  private boot(name: string, machine: string, secret: string): void {
    const booting = (async () => {
      const s = await this.o.api.request<{ data?: { value?: string } }>(
        'GET',
        `/api/v1/namespaces/${this.o.namespace}/secrets/${secret}`,
      );
      const userData = Buffer.from(s.data?.value ?? '', 'base64').toString('utf8');
      if (!userData) throw new Error(`Secret ${secret} has no value`);
      const booted = await this.o.host.boot({ machine, userData });
      this.byMachine.set(machine, booted);
      this.note(`NspawnMachine ${name}: booted ${machine} from Secret ${secret}`);
      return booted;
    })().catch((error: unknown) => {
      this.note(`NspawnMachine ${name}: boot failed: ${(error as Error).message}`);
      this.machines.delete(name);
      return undefined;
    });
    this.machines.set(name, booting);
  }

  private async report(name: string, providerID: string, addresses: Address[]): Promise<void> {
    if (!(await this.machines.get(name))) return;
    await this.patch(this.path('NspawnMachine', name), { spec: { providerID } });
    await this.patch(this.path('NspawnMachine', name, 'status'), {
      status: { initialization: { provisioned: true }, addresses },
    });
    this.note(`NspawnMachine ${name}: provisioned as ${providerID}`);
  }

  /** Stops and removes the machine, then lets the object go. */
  private async release(infra: NspawnMachineObject): Promise<void> {
    const name = infra.metadata.name;
    const booted = await this.machines.get(name);
    if (booted) {
      await booted.stop();
      this.byMachine.delete(booted.machine);
      this.note(`NspawnMachine ${name}: stopped and removed ${booted.machine}`);
    }
    this.machines.delete(name);
    const finalizers = (infra.metadata.finalizers ?? []).filter((f) => f !== FINALIZER);
    await this.patch(this.path('NspawnMachine', name), {
      metadata: { finalizers: finalizers.length > 0 ? finalizers : null },
    });
  }
}
