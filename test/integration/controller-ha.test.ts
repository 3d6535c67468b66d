// Two `oscar controller --leader-elect` processes against the real API server: exactly one
// reconciles; SIGKILL it and the other takes over within the lease duration and converges a
// change made meanwhile; SIGTERM hands the Lease back at once.
import { afterEach, describe, expect, it } from 'vitest';
import type { Lease } from '../../controller/leader.js';
import {
  Api,
  demoSpec,
  spawnController,
  waitFor,
  type ControllerProcess,
} from './controller-support.js';
import { createTestNamespace, skipWithoutCluster, testEnvInfo } from './support/cluster.js';

skipWithoutCluster();

const procs: ControllerProcess[] = [];
afterEach(async () => {
  for (const p of procs.splice(0)) {
    if (p.child.exitCode === null && p.child.signalCode === null) {
      p.child.kill('SIGKILL');
      await p.exited;
    }
  }
});

const LEASE_SECONDS = 3;

function getLease(api: Api, ns: string): Promise<Lease> {
  return api.http.request<Lease>(
    'GET',
    `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/oscar-controller`,
  );
}

describe('controller leader election (real API server, two processes)', () => {
  it('one leader reconciles; SIGKILL → the standby takes over and converges; SIGTERM releases', async () => {
    const ns = await createTestNamespace('ha');
    const api = new Api();
    const args = [
      '--kubeconfig',
      testEnvInfo().kubeconfigPath,
      '--namespace',
      ns,
      '--leader-elect',
      '--lease-namespace',
      ns,
      `--lease-duration=${String(LEASE_SECONDS)}s`,
      '--metrics-addr=0',
      '--log-level=debug',
    ];
    const a = spawnController(args);
    const b = spawnController(args);
    procs.push(a, b);
    const byPid = new Map([
      [a.child.pid, a],
      [b.child.pid, b],
    ]);

    const lease = await waitFor(
      'a leader',
      async () => {
        const l = await getLease(api, ns).catch(() => undefined);
        return l?.spec.holderIdentity ? l : undefined;
      },
      60_000,
    );
    const leaderPid = Number(lease.spec.holderIdentity?.split('-').pop());
    const leader = byPid.get(leaderPid);
    const standby = leader === a ? b : a;
    expect(leader).toBeDefined();
    if (!leader) return;

    await api.applyOsc(ns, 'w', demoSpec('reconcile', 'one\n'));
    const first = await api.waitReady(ns, 'w', 60_000);
    // Give the standby every chance to misbehave, then check it did nothing.
    await new Promise((r) => setTimeout(r, 2 * LEASE_SECONDS * 1000));
    expect(leader.output()).toContain('"msg":"reconciled"');
    expect(standby.output()).not.toContain('"msg":"reconciled"');
    expect(standby.output()).not.toContain('caches synced');

    // Kill the leader without a chance to release; change the OSC while nobody leads.
    leader.child.kill('SIGKILL');
    await leader.exited;
    const killedAt = Date.now();
    await api.applyOsc(ns, 'w', demoSpec('reconcile', 'two\n'));
    const converged = await waitFor(
      'the change converged by the new leader',
      async () => {
        const o = await api.getOsc(ns, 'w');
        return o?.status?.observedGeneration === o?.metadata.generation &&
          o?.status?.checksum !== first.status?.checksum &&
          o?.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True'
          ? o
          : undefined;
      },
      60_000,
    );
    const takeoverMs = Date.now() - killedAt;
    expect(converged.status?.checksum).not.toBe(first.status?.checksum);
    const newLease = await getLease(api, ns);
    expect(newLease.spec.holderIdentity?.endsWith(`-${String(standby.child.pid)}`)).toBe(true);
    expect(newLease.spec.leaseTransitions).toBeGreaterThanOrEqual(1);
    expect(standby.output()).toContain('became leader');
    // Lease duration, plus one retry period, plus cache sync and one reconcile: well under 3×.
    expect(takeoverMs).toBeLessThan(LEASE_SECONDS * 1000 * 3 + 10_000);
    process.stderr.write(
      `[controller-ha] takeover and convergence after SIGKILL: ${String(takeoverMs)} ms (lease ${String(LEASE_SECONDS)} s)\n`,
    );

    // SIGTERM: finishes, releases the Lease, exits 0.
    standby.child.kill('SIGTERM');
    expect(await standby.exited).toBe(0);
    const released = await getLease(api, ns);
    expect(released.spec.holderIdentity).toBe('');
    expect(standby.output()).toContain('released the lease');
  });
});
