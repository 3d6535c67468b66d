import { describe, expect, it } from 'vitest';
import { FakeClock } from './kube/clock.js';
import { ApiError } from '../kube/client.js';
import { LeaderElector, type Lease, type LeaseStore } from './leader.js';
import { createLogger } from '../log/logger.js';

/** A lease store with the API server's optimistic concurrency: stale writes get 409. */
class MemoryLeaseStore implements LeaseStore {
  lease: Lease | undefined;
  private rv = 0;
  writes = 0;
  get() {
    return Promise.resolve(this.lease ? structuredClone(this.lease) : undefined);
  }
  create(lease: Lease) {
    if (this.lease) return Promise.reject(new ApiError(409, 'AlreadyExists', 'exists'));
    this.lease = {
      ...structuredClone(lease),
      metadata: { ...lease.metadata, resourceVersion: String(++this.rv) },
    };
    this.writes++;
    return this.get() as Promise<Lease>;
  }
  update(lease: Lease) {
    if (lease.metadata.resourceVersion !== this.lease?.metadata.resourceVersion) {
      return Promise.reject(new ApiError(409, 'Conflict', 'conflict'));
    }
    this.lease = {
      ...structuredClone(lease),
      metadata: { ...lease.metadata, resourceVersion: String(++this.rv) },
    };
    this.writes++;
    return this.get() as Promise<Lease>;
  }
}

const log = createLogger({ component: 'controller', level: 'silent' });
const elector = (store: LeaseStore, identity: string, clock: FakeClock) =>
  new LeaderElector({
    store,
    identity,
    namespace: 'ns',
    name: 'oscar-controller',
    leaseDurationMs: 3000,
    retryPeriodMs: 500,
    renewDeadlineMs: 2000,
    clock,
    log,
  });

describe('LeaderElector', () => {
  it('exactly one of two candidates acquires; the other waits while the lease is renewed', async () => {
    const clock = new FakeClock();
    const store = new MemoryLeaseStore();
    const a = elector(store, 'a', clock);
    const b = elector(store, 'b', clock);
    expect(await a.tryAcquireOrRenew()).toBe(true);
    expect(await b.tryAcquireOrRenew()).toBe(false);
    for (let i = 0; i < 10; i++) {
      clock.advance(1000);
      expect(await a.tryAcquireOrRenew()).toBe(true);
      expect(await b.tryAcquireOrRenew()).toBe(false);
    }
    expect(store.lease?.spec.holderIdentity).toBe('a');
  });

  it('takes over once the holder stops renewing for the lease duration', async () => {
    const clock = new FakeClock();
    const store = new MemoryLeaseStore();
    const a = elector(store, 'a', clock);
    const b = elector(store, 'b', clock);
    await a.tryAcquireOrRenew();
    expect(await b.tryAcquireOrRenew()).toBe(false); // b observes the lease now
    clock.advance(2999);
    expect(await b.tryAcquireOrRenew()).toBe(false);
    clock.advance(2);
    expect(await b.tryAcquireOrRenew()).toBe(true);
    expect(store.lease?.spec.holderIdentity).toBe('b');
    expect(store.lease?.spec.leaseTransitions).toBe(1);
    // The old holder, back from a pause, cannot take it back while b renews.
    expect(await a.tryAcquireOrRenew()).toBe(false);
  });

  it('of two candidates racing for an expired lease, the resourceVersion lets only one win', async () => {
    const clock = new FakeClock();
    const store = new MemoryLeaseStore();
    const a = elector(store, 'a', clock);
    await a.tryAcquireOrRenew();
    const b = elector(store, 'b', clock);
    const c = elector(store, 'c', clock);
    await b.tryAcquireOrRenew();
    await c.tryAcquireOrRenew();
    clock.advance(3500);
    const results = await Promise.all([b.tryAcquireOrRenew(), c.tryAcquireOrRenew()]);
    expect(results.filter(Boolean)).toHaveLength(1);
  });

  it('release hands the lease over at once', async () => {
    const clock = new FakeClock();
    const store = new MemoryLeaseStore();
    const a = elector(store, 'a', clock);
    const b = elector(store, 'b', clock);
    let led = false;
    const running = a.run({ onLead: () => (led = true), onLost: () => undefined });
    for (let i = 0; i < 5; i++) await Promise.resolve();
    expect(led).toBe(true);
    expect(await b.tryAcquireOrRenew()).toBe(false);
    await a.release();
    clock.advance(500);
    await running;
    expect(store.lease?.spec.holderIdentity).toBe('');
    expect(await b.tryAcquireOrRenew()).toBe(true);
  });
});
