import { describe, expect, it } from 'vitest';
import type { OperatingSystemConfigStatus, RolloutStatus } from '../../api/schema.js';
import { FakeClock } from '../kube/clock.js';
import type { KubeObject } from '../kube/types.js';
import {
  composeStatus,
  GATHER_MAX_MS,
  LEGACY_ROLLOUT_MANAGER,
  OscStatusWriter,
  type StatusApi,
} from './status-writer.js';

const KEY = 'ns/w';

const flush = async (): Promise<void> => {
  for (let i = 0; i < 10; i++) await Promise.resolve();
};

/** The API server's copy of one OSC's status; applies answer when the test lets them. */
class Server implements StatusApi {
  status: OperatingSystemConfigStatus | undefined = { observedGeneration: 1 };
  rv = 10;
  applied: OperatingSystemConfigStatus[] = [];
  released: string[] = [];
  /** Managers owning status fields, as the answer's managedFields list them. */
  managers = ['oscar-controller'];
  /** When set, applies wait until release() (a write in flight). */
  hold = false;
  fail: Error | undefined;
  private held: (() => void)[] = [];
  /** Whether the watch has delivered the last write (the cache the writer reads). */
  delivered = true;
  private cachedStatus = this.status;
  private cachedRv = this.rv;

  cached = (): { status?: OperatingSystemConfigStatus; resourceVersion: string } => ({
    ...(this.cachedStatus ? { status: this.cachedStatus } : {}),
    resourceVersion: String(this.cachedRv),
  });

  private answer(): KubeObject {
    return {
      metadata: {
        name: 'w',
        namespace: 'ns',
        resourceVersion: String(this.rv),
        managedFields: this.managers.map((manager) => ({ manager, subresource: 'status' })),
      } as KubeObject['metadata'],
    };
  }

  private store(status: OperatingSystemConfigStatus | undefined): void {
    this.status = structuredClone(status);
    this.rv++;
    if (this.delivered) {
      this.cachedStatus = this.status;
      this.cachedRv = this.rv;
    }
  }

  async patchStatus(_ns: string, _name: string, status: OperatingSystemConfigStatus) {
    this.applied.push(structuredClone(status));
    if (this.hold) await new Promise<void>((r) => this.held.push(r));
    if (this.fail) throw this.fail;
    this.store(status);
    return this.answer();
  }

  releaseStatus(_ns: string, _name: string, manager: string) {
    this.released.push(manager);
    this.managers = this.managers.filter((m) => m !== manager);
    this.store(this.status);
    return Promise.resolve(this.answer());
  }

  release(): void {
    for (const r of this.held.splice(0)) r();
  }
}

function setup() {
  const server = new Server();
  const clock = new FakeClock();
  const writer = new OscStatusWriter({ api: server, cached: server.cached, clock });
  const pending = { osc: false, rollout: false };
  writer.producer('osc', { pending: () => pending.osc });
  writer.producer('rollout', { pending: () => pending.rollout });
  const written: OperatingSystemConfigStatus[] = [];
  writer.onWritten((_k, s) => written.push(s));
  return { server, clock, writer, pending, written };
}

const nodes = (updated: number): OperatingSystemConfigStatus => ({
  observedGeneration: 1,
  nodes: { total: 2, updated, degraded: 0, drifted: 0 },
});
const rollout = (updated: number, phase = 'Progressing'): RolloutStatus =>
  ({ revision: 2, checksum: 'c2', phase, nodes: { total: 2, updated } }) as RolloutStatus;

describe('OscStatusWriter', () => {
  it("one event's two parts go out as one write: the OSC's write waits for the rollout pass queued for it", async () => {
    const { server, writer, pending } = setup();
    pending.rollout = true; // the same node report queued the rollout controller
    const a = writer.write(KEY, 'osc', nodes(1));
    await flush();
    expect(server.applied).toEqual([]);
    const b = writer.write(KEY, 'rollout', rollout(1));
    await Promise.all([a, b]);
    expect(server.applied).toEqual([{ ...nodes(1), rollout: rollout(1) }]);
    expect(server.status).toEqual({ ...nodes(1), rollout: rollout(1) });
  });

  it('a rollout pass that ends with nothing to say lets the waiting write go', async () => {
    const { server, writer, pending } = setup();
    pending.rollout = true;
    const a = writer.write(KEY, 'osc', nodes(1));
    await flush();
    expect(server.applied).toHaveLength(0);
    writer.passDone('rollout', KEY);
    await a;
    expect(server.applied).toEqual([nodes(1)]);
  });

  it('a rollout pass whose part equals the stored one lets the waiting write go at once', async () => {
    const { server, writer, pending } = setup();
    pending.rollout = true;
    const a = writer.write(KEY, 'osc', nodes(1));
    await flush();
    writer.offer(KEY, 'rollout', undefined);
    await a;
    expect(server.applied).toEqual([nodes(1)]);
  });

  it('waits for the other pass at most GATHER_MAX_MS', async () => {
    const { server, writer, pending, clock } = setup();
    pending.rollout = true;
    const a = writer.write(KEY, 'osc', nodes(1));
    clock.advance(GATHER_MAX_MS - 1);
    await flush();
    expect(server.applied).toHaveLength(0);
    clock.advance(1);
    await a;
    expect(server.applied).toEqual([nodes(1)]);
  });

  it('writes at once when the other controller has no pass of the OSC queued', async () => {
    const { server, writer } = setup();
    await writer.write(KEY, 'rollout', rollout(0));
    expect(server.applied).toEqual([{ observedGeneration: 1, rollout: rollout(0) }]);
  });

  it('an offered part is no write by itself and rides along with the next one', async () => {
    const { server, writer } = setup();
    writer.offer(KEY, 'rollout', rollout(1));
    await flush();
    expect(server.applied).toEqual([]);
    await writer.write(KEY, 'osc', nodes(1));
    expect(server.applied).toEqual([{ ...nodes(1), rollout: rollout(1) }]);
    // nothing left over: the same parts again are no write
    writer.offer(KEY, 'rollout', rollout(1));
    await writer.write(KEY, 'osc', nodes(1));
    expect(server.applied).toHaveLength(1);
  });

  it('never resends what is stored: a due part equal to the stored status is no request', async () => {
    const { server, writer } = setup();
    await expect(writer.write(KEY, 'osc', { observedGeneration: 1 })).resolves.toBeUndefined();
    expect(server.applied).toEqual([]);
  });

  it('reads its own writes before the watch delivers them: the other part is not rolled back', async () => {
    const { server, writer } = setup();
    server.delivered = false; // the watch lags behind every write
    await writer.write(KEY, 'rollout', rollout(1, 'Progressing'));
    await writer.write(KEY, 'osc', nodes(2));
    expect(server.applied.at(-1)).toEqual({ ...nodes(2), rollout: rollout(1) });
  });

  it('a change handed over while a write is in flight goes out next, never lost', async () => {
    const { server, writer } = setup();
    server.hold = true;
    const first = writer.write(KEY, 'osc', nodes(1));
    await flush();
    expect(server.applied).toHaveLength(1);
    // the rollout's count changes and nodes go back meanwhile: offered only, no one waits
    writer.offer(KEY, 'rollout', rollout(1));
    writer.offer(KEY, 'osc', { observedGeneration: 1 });
    server.hold = false;
    server.release();
    await first;
    await flush();
    expect(server.applied).toEqual([nodes(1), { observedGeneration: 1, rollout: rollout(1) }]);
    expect(server.status).toEqual({ observedGeneration: 1, rollout: rollout(1) });
  });

  it('a paced part handed over during a write is not forced out after it: it waits for its interval', async () => {
    const { server, writer } = setup();
    server.hold = true;
    const first = writer.write(KEY, 'osc', nodes(1));
    await flush();
    writer.offer(KEY, 'osc', nodes(2)); // counts moved again within their second
    server.hold = false;
    server.release();
    await first;
    await flush();
    expect(server.applied).toEqual([nodes(1)]);
    // its controller comes back when the second is up; or another write carries it first
    await writer.write(KEY, 'rollout', rollout(1));
    expect(server.applied.at(-1)).toEqual({ ...nodes(2), rollout: rollout(1) });
  });

  it('one write at a time: passes due during a write share the next one', async () => {
    const { server, writer } = setup();
    server.hold = true;
    const first = writer.write(KEY, 'osc', nodes(1));
    await flush();
    const second = writer.write(KEY, 'osc', nodes(2));
    const third = writer.write(KEY, 'rollout', rollout(2));
    await flush();
    expect(server.applied).toHaveLength(1);
    server.hold = false;
    server.release();
    await Promise.all([first, second, third]);
    expect(server.applied).toEqual([nodes(1), { ...nodes(2), rollout: rollout(2) }]);
  });

  it('a failed write fails the passes that waited; their parts go with the next write', async () => {
    const { server, writer } = setup();
    server.fail = new Error('boom');
    await expect(writer.write(KEY, 'osc', nodes(1))).rejects.toThrow('boom');
    server.fail = undefined;
    await writer.write(KEY, 'rollout', rollout(1));
    expect(server.status).toEqual({ ...nodes(1), rollout: rollout(1) });
  });

  it('a failed write nobody waited for is tried again later', async () => {
    const { server, writer, clock } = setup();
    server.hold = true;
    const first = writer.write(KEY, 'osc', nodes(1));
    await flush();
    writer.offer(KEY, 'rollout', rollout(1)); // left differing: written next, no one waits
    server.fail = new Error('boom');
    server.hold = false;
    server.release();
    await expect(first).rejects.toThrow('boom');
    await flush();
    expect(server.applied).toHaveLength(1);
    server.fail = undefined;
    clock.advance(1000);
    await flush();
    expect(server.status).toEqual({ ...nodes(1), rollout: rollout(1) });
  });

  it('upgrade: releases the legacy rollout manager once, when a write shows it still owning status fields', async () => {
    const { server, writer } = setup();
    server.managers = ['oscar-controller', LEGACY_ROLLOUT_MANAGER];
    await writer.write(KEY, 'rollout', rollout(1));
    expect(server.released).toEqual([LEGACY_ROLLOUT_MANAGER]);
    await writer.write(KEY, 'rollout', rollout(2));
    expect(server.released).toEqual([LEGACY_ROLLOUT_MANAGER]);
    expect(server.applied).toHaveLength(2);
  });

  it('forget drops what an OSC that is gone had pending', async () => {
    const { server, writer } = setup();
    writer.offer(KEY, 'rollout', rollout(1));
    writer.forget(KEY);
    await writer.write(KEY, 'osc', nodes(1));
    expect(server.applied).toEqual([nodes(1)]);
  });
});

describe('composeStatus', () => {
  it('lays the parts over the stored status; the OSC part never carries a rollout of its own', () => {
    const known = { ...nodes(0), rollout: rollout(0) };
    expect(composeStatus(known, {})).toEqual(known);
    expect(composeStatus(known, { osc: { ...nodes(1), rollout: rollout(9) } })).toEqual({
      ...nodes(1),
      rollout: rollout(0),
    });
    expect(composeStatus(undefined, { rollout: rollout(1) })).toEqual({ rollout: rollout(1) });
  });
});
