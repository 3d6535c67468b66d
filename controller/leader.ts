/**
 * Leader election on a coordination.k8s.io/v1 Lease, by hand: every write is guarded by the
 * resourceVersion the decision was based on (create fails if someone created it first, update
 * fails with 409 if someone wrote in between), so two replicas can never both believe they hold
 * it. Expiry is judged on this process's own clock from when it last SAW the lease change (as
 * client-go does), not from the renewTime written by another machine whose clock may differ.
 */
import { realClock, sleep, type Clock } from './kube/clock.js';
import { isConflict, isNotFound, ApiError, type KubeHttp } from '../kube/client.js';
import { errorFields, type Logger } from '../log/logger.js';

export interface LeaseSpec {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
}

export interface Lease {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; namespace: string; resourceVersion?: string };
  spec: LeaseSpec;
}

export interface LeaseStore {
  get(): Promise<Lease | undefined>;
  /** Fails (409 AlreadyExists) if the lease exists. */
  create(lease: Lease): Promise<Lease>;
  /** Fails (409 Conflict) if lease.metadata.resourceVersion is not the current one. */
  update(lease: Lease): Promise<Lease>;
}

export interface LeaderOptions {
  store: LeaseStore;
  identity: string;
  namespace: string;
  name: string;
  leaseDurationMs: number;
  /** How often to try to acquire or renew. */
  retryPeriodMs: number;
  /** A leader that could not renew for this long steps down (< leaseDurationMs). */
  renewDeadlineMs: number;
  clock?: Clock;
  log: Logger;
}

/** RFC 3339 with microseconds: the MicroTime format of Lease times. */
export function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

export class LeaderElector {
  private readonly clock: Clock;
  private observed: { key: string; at: number } | undefined;
  private current: Lease | undefined;
  private leading = false;
  private stopped = false;
  private lastRenew = 0;

  constructor(private readonly o: LeaderOptions) {
    this.clock = o.clock ?? realClock;
    if (o.renewDeadlineMs >= o.leaseDurationMs) {
      throw new Error('renewDeadline must be shorter than the lease duration');
    }
  }

  /** A method so the compiler does not narrow the field across awaits. */
  private isStopped(): boolean {
    return this.stopped;
  }

  get isLeader(): boolean {
    return this.leading;
  }

  private durationSeconds(): number {
    return Math.max(1, Math.ceil(this.o.leaseDurationMs / 1000));
  }

  /**
   * One attempt: true if this process holds the lease afterwards. Never throws for the ordinary
   * outcomes (held by another, lost a race); API errors count as "not renewed".
   */
  async tryAcquireOrRenew(): Promise<boolean> {
    const now = this.clock.now();
    const { identity } = this.o;
    let lease: Lease | undefined;
    try {
      lease = await this.o.store.get();
      if (!lease) {
        this.current = await this.o.store.create({
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: { name: this.o.name, namespace: this.o.namespace },
          spec: {
            holderIdentity: identity,
            leaseDurationSeconds: this.durationSeconds(),
            acquireTime: microTime(now),
            renewTime: microTime(now),
            leaseTransitions: 0,
          },
        });
        this.observe(this.current, now);
        return true;
      }
      this.observe(lease, now);
      const holder = lease.spec.holderIdentity ?? '';
      const observedAt = this.observed?.at ?? now;
      const durationMs = (lease.spec.leaseDurationSeconds ?? this.durationSeconds()) * 1000;
      if (holder !== '' && holder !== identity && observedAt + durationMs > now) return false;
      const spec: LeaseSpec = {
        ...lease.spec,
        holderIdentity: identity,
        leaseDurationSeconds: this.durationSeconds(),
        renewTime: microTime(now),
      };
      if (holder !== identity) {
        spec.acquireTime = microTime(now);
        spec.leaseTransitions = (lease.spec.leaseTransitions ?? 0) + 1;
      }
      this.current = await this.o.store.update({ ...lease, spec });
      this.observe(this.current, now);
      return true;
    } catch (error) {
      if (!(isConflict(error) || (error instanceof ApiError && error.status === 409))) {
        this.o.log.warn({ lease: this.o.name, ...errorFields(error) }, 'lease request failed');
      }
      return false;
    }
  }

  private observe(lease: Lease, now: number): void {
    const key = `${lease.metadata.resourceVersion ?? ''}|${lease.spec.holderIdentity ?? ''}|${lease.spec.renewTime ?? ''}`;
    if (this.observed?.key !== key) this.observed = { key, at: now };
  }

  /**
   * Runs until stop(): waits to acquire, calls onLead once it holds the lease, keeps renewing;
   * calls onLost (and returns) if it fails to renew within the renew deadline.
   */
  async run(hooks: { onLead: () => void; onLost: () => void }): Promise<void> {
    while (!this.stopped) {
      const ok = await this.tryAcquireOrRenew();
      const now = this.clock.now();
      if (ok) {
        this.lastRenew = now;
        if (!this.leading && !this.isStopped()) {
          this.leading = true;
          this.o.log.info({ lease: this.o.name, identity: this.o.identity }, 'became leader');
          hooks.onLead();
        }
      } else if (this.leading && now - this.lastRenew > this.o.renewDeadlineMs) {
        this.leading = false;
        this.o.log.error({ lease: this.o.name }, 'lost the lease: could not renew in time');
        hooks.onLost();
        return;
      }
      if (this.isStopped()) break;
      await sleep(this.clock, this.o.retryPeriodMs);
    }
  }

  /** Stops the loop; when leading, hands the lease back so a standby takes over at once. */
  async release(): Promise<void> {
    this.stopped = true;
    if (!this.leading || !this.current) return;
    this.leading = false;
    try {
      const now = this.clock.now();
      await this.o.store.update({
        ...this.current,
        spec: {
          ...this.current.spec,
          holderIdentity: '',
          leaseDurationSeconds: 1,
          renewTime: microTime(now),
        },
      });
      this.o.log.info({ lease: this.o.name }, 'released the lease');
    } catch (error) {
      this.o.log.warn({ lease: this.o.name, ...errorFields(error) }, 'could not release the lease');
    }
  }
}

export function httpLeaseStore(http: KubeHttp, namespace: string, name: string): LeaseStore {
  const base = `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases`;
  return {
    async get() {
      try {
        return await http.request<Lease>('GET', `${base}/${name}`);
      } catch (error) {
        if (isNotFound(error)) return undefined;
        throw error;
      }
    },
    create: (lease) => http.request<Lease>('POST', base, { body: lease }),
    update: (lease) => http.request<Lease>('PUT', `${base}/${name}`, { body: lease }),
  };
}
