import { describe, expect, it } from 'vitest';
import { config, desiredOf, file, unit } from '../../agent/testing/fixtures.js';
import type { RevisionGrant, RolloutPolicy, RolloutStatus } from '../../api/schema.js';
import {
  ANNOTATION_CHECKSUM,
  ANNOTATION_DISRUPTION,
  encodeConfigData,
  LABEL_OSC,
  LABEL_REVISION,
  revisionSecretName,
} from '../../api/secret.js';
import type { DataObject, KubeObject, OscObject } from '../kube/types.js';
import type { EventInput } from '../osc/reconcile.js';
import type { NodeState } from './planner.js';
import {
  reconcileRollout,
  STATUS_INTERVAL_MS,
  type RolloutCaches,
  type RolloutDeps,
  type RolloutMemo,
} from './reconcile.js';
import type { RolloutWriter } from './writer.js';

const NS = 'ns';
const KEY = `${NS}/w`;

function version(n: number) {
  return desiredOf(
    config(
      [unit('app.service', { filePaths: ['/etc/app.conf'] })],
      [file('/etc/app.conf', `v${String(n)}\n`)],
    ),
  );
}

/** The API server as the rollout reconcile sees it: caches that reflect every write at once. */
class World implements RolloutCaches, RolloutWriter {
  oscObj: OscObject = {
    metadata: { name: 'w', namespace: NS, uid: 'uid-w', generation: 1 },
    spec: { type: 'debian', purpose: 'reconcile' },
  };
  secrets = new Map<string, DataObject>();
  nodes = new Map<string, NodeState>();
  events: EventInput[] = [];
  log: string[] = [];
  rollout: RolloutStatus | undefined;
  time = Date.parse('2026-12-03T10:00:00Z');
  rv = 1;

  constructor(n: number, policy: RolloutPolicy = {}) {
    this.oscObj.spec.rollout = policy;
    for (let i = 0; i < n; i++) {
      const name = `n${String(i)}`;
      this.nodes.set(name, { name, generation: 1, degraded: false });
    }
  }

  render(n: number, data?: Record<string, Buffer>, checksum?: string): void {
    const d = version(n);
    this.secrets.set('oscar-w-reconcile', {
      metadata: {
        name: 'oscar-w-reconcile',
        namespace: NS,
        labels: { [LABEL_OSC]: 'w' },
        annotations: { [ANNOTATION_CHECKSUM]: checksum ?? d.checksum },
      },
      data: Object.fromEntries(
        Object.entries(data ?? encodeConfigData(d.bytes)).map(([k, v]) => [
          k,
          v.toString('base64'),
        ]),
      ),
    });
  }

  // caches
  osc() {
    return this.oscObj;
  }
  ownedSecret(_ns: string, name: string) {
    return this.secrets.get(name);
  }
  ownedSecretsOf(): KubeObject[] {
    return [...this.secrets.values()];
  }
  grantNodesOf() {
    return [...this.nodes.values()];
  }
  rolloutOf() {
    return this.rollout;
  }
  // writer
  readSecret(_ns: string, name: string) {
    this.log.push(`get ${name}`);
    return Promise.resolve(structuredClone(this.secrets.get(name)));
  }
  applyRevision(body: Record<string, unknown>) {
    const s = structuredClone(body) as unknown as DataObject;
    s.metadata.resourceVersion = String(++this.rv);
    this.secrets.set(s.metadata.name, s);
    this.log.push(`apply ${s.metadata.name} r${s.metadata.labels?.[LABEL_REVISION] ?? '?'}`);
    return Promise.resolve(undefined);
  }
  grant(node: string, grant: RevisionGrant) {
    const n = this.nodes.get(node);
    if (n) {
      n.grant = grant;
      n.generation++;
    }
    this.log.push(`grant ${node} r${String(grant.number)}${grant.try ? ' try' : ''}`);
    return Promise.resolve(undefined);
  }
  /** What each pass handed the status writer, due or not (the last one is what rides along). */
  offered: (RolloutStatus | undefined)[] = [];
  offerRolloutStatus(_ns: string, _name: string, rollout: RolloutStatus | undefined) {
    this.offered.push(structuredClone(rollout));
  }
  patchRolloutStatus(_ns: string, _name: string, rollout: RolloutStatus) {
    this.rollout = structuredClone(rollout);
    this.log.push(`status ${rollout.phase}`);
    return Promise.resolve(undefined);
  }
  answer(name: string, phase: 'Confirmed' | 'RolledBack'): void {
    const n = this.nodes.get(name);
    if (!n?.grant) throw new Error('no grant');
    n.report = {
      observedGeneration: n.generation,
      number: n.grant.number,
      checksum: n.grant.checksum,
      phase,
      reason: phase,
      message: '',
      lastTransitionTime: new Date(this.time).toISOString(),
    };
  }
  deps(memo = new Map<string, RolloutMemo>()): RolloutDeps {
    return {
      caches: this,
      writer: this,
      event: (_osc, e) => {
        this.events.push(e);
        return Promise.resolve();
      },
      memo,
      now: () => new Date(this.time),
    };
  }
  take(): string[] {
    return this.log.splice(0);
  }
}

describe('reconcileRollout', () => {
  it('keeps the first rendering as revision 1 and grants it to every node that joins', async () => {
    const w = new World(2);
    w.render(1);
    const memo = new Map<string, RolloutMemo>();
    const out = await reconcileRollout(KEY, w.deps(memo));
    expect(w.take()).toEqual([
      'get oscar-w-reconcile',
      'get oscar-w-rev-0',
      'apply oscar-w-rev-0 r1',
      'grant n0 r1',
      'grant n1 r1',
      'status Progressing',
    ]);
    expect(out.grants).toBe(2);
    const rev = w.secrets.get('oscar-w-rev-0');
    expect(rev?.metadata.annotations?.[ANNOTATION_CHECKSUM]).toBe(version(1).checksum);
    expect(rev?.metadata.annotations?.[ANNOTATION_DISRUPTION]).toMatch(/^[0-9a-f]{64}$/);
    expect(Object.keys(rev?.data ?? {})).toEqual(['config.json']); // the config only
    expect(w.events.map((e) => e.reason)).toEqual(['RevisionCreated']);
    // nothing changed: nothing written
    await reconcileRollout(KEY, w.deps(memo));
    expect(w.take()).toEqual([]);
  });

  it("never applies a revision over a Secret of the slot's name that is not oscar's (issue 28)", async () => {
    const w = new World(1);
    w.render(1);
    const foreign: DataObject = {
      metadata: {
        name: 'oscar-w-rev-0',
        namespace: 'ns',
        resourceVersion: '5',
        labels: { a: 'b' },
      },
      data: { token: 'c2VjcmV0' },
    };
    w.secrets.set('oscar-w-rev-0', structuredClone(foreign));
    const memo = new Map<string, RolloutMemo>();
    await expect(reconcileRollout(KEY, w.deps(memo))).rejects.toThrow(
      /oscar-w-rev-0.*left untouched/,
    );
    expect(w.secrets.get('oscar-w-rev-0')).toEqual(foreign);
    expect(w.take()).not.toContain('apply oscar-w-rev-0 r1');
    expect(w.events.at(-1)).toMatchObject({ type: 'Warning', reason: 'SecretNameTaken' });
    // Positive control: with the foreign Secret gone, the revision is written.
    w.secrets.delete('oscar-w-rev-0');
    await reconcileRollout(KEY, w.deps(memo));
    expect(w.take()).toContain('apply oscar-w-rev-0 r1');
  });

  it('a new rendering becomes revision 2 in the next slot and goes to nodes in try mode', async () => {
    const w = new World(3, { maxUnavailable: 1 });
    w.render(1);
    const memo = new Map<string, RolloutMemo>();
    await reconcileRollout(KEY, w.deps(memo));
    for (const n of w.nodes.keys()) w.answer(n, 'Confirmed');
    w.time += STATUS_INTERVAL_MS;
    await reconcileRollout(KEY, w.deps(memo));
    expect(w.rollout?.phase).toBe('Complete');
    w.take();
    w.render(2);
    w.time += STATUS_INTERVAL_MS;
    await reconcileRollout(KEY, w.deps(memo));
    expect(w.take()).toEqual([
      'get oscar-w-reconcile',
      'get oscar-w-rev-1',
      'apply oscar-w-rev-1 r2',
      'grant n0 r2 try',
      'status Progressing',
    ]);
    expect(w.rollout).toMatchObject({ revision: 2, stableRevision: 1 });
  });

  it('recycles the oldest revision nothing pins once every slot is taken', async () => {
    const w = new World(1, { maxUnavailable: 1 });
    const memo = new Map<string, RolloutMemo>();
    for (let v = 1; v <= 6; v++) {
      w.render(v);
      await reconcileRollout(KEY, w.deps(memo));
      w.answer('n0', 'Confirmed');
      w.time += STATUS_INTERVAL_MS;
      await reconcileRollout(KEY, w.deps(memo));
      expect(w.rollout).toMatchObject({ revision: v, stableRevision: v, phase: 'Complete' });
      w.time += STATUS_INTERVAL_MS;
    }
    // revision 6 took slot 0, where revision 1 was
    expect(w.secrets.get(revisionSecretName('w', 0))?.metadata.labels?.[LABEL_REVISION]).toBe('6');
    expect(w.rollout?.revisions?.map((r) => r.revision)).toEqual([6, 5, 4, 3, 2]);
  });

  it('does nothing at all for an OSC no grant-mode node follows', async () => {
    const w = new World(0);
    w.render(1);
    expect(await reconcileRollout(KEY, w.deps())).toEqual({ writes: 0, grants: 0 });
    expect(w.take()).toEqual([]);
    expect(w.rollout).toBeUndefined();
  });

  it('refuses a reconcile Secret whose data does not match its checksum, writing nothing', async () => {
    const w = new World(1);
    w.render(1, undefined, 'f'.repeat(64));
    await expect(reconcileRollout(KEY, w.deps())).rejects.toThrow(/checksum mismatch/);
    expect(w.take()).toEqual(['get oscar-w-reconcile']);
  });

  it('writes counts at most every STATUS_INTERVAL_MS, a phase change at once', async () => {
    const w = new World(4, { maxUnavailable: 4 });
    w.render(1);
    const memo = new Map<string, RolloutMemo>();
    await reconcileRollout(KEY, w.deps(memo));
    w.take();
    w.answer('n0', 'Confirmed');
    w.time += 100;
    const early = await reconcileRollout(KEY, w.deps(memo));
    expect(w.take()).toEqual([]); // only a count moved
    expect(early.requeueAfterMs).toBe(STATUS_INTERVAL_MS - 100);
    // ... handed over all the same: it goes out with the OSC's next status write, whoever's
    expect(w.offered.at(-1)?.nodes.updated).toBe(1);
    expect(w.rollout?.nodes.updated).toBe(0);
    for (const n of ['n1', 'n2', 'n3']) w.answer(n, 'Confirmed');
    w.time += 100;
    await reconcileRollout(KEY, w.deps(memo));
    expect(w.take()).toEqual(['status Complete']); // the phase changed: at once
  });

  it('says why when every revision slot is pinned', async () => {
    const w = new World(5, { paused: true });
    const memo = new Map<string, RolloutMemo>();
    for (let v = 1; v <= 5; v++) {
      w.render(v);
      await reconcileRollout(KEY, w.deps(memo));
    }
    // each node is (say, from earlier rollouts) granted another of the five kept revisions
    let i = 0;
    for (const n of w.nodes.values()) {
      const slot = w.secrets.get(revisionSecretName('w', i++));
      const number = Number(slot?.metadata.labels?.[LABEL_REVISION]);
      n.grant = { ...(n.grant as RevisionGrant), number };
    }
    w.render(6);
    w.take();
    await expect(reconcileRollout(KEY, w.deps(memo))).rejects.toThrow(
      /every revision Secret holds a revision that nodes or the rollout still use/,
    );
    expect(w.take().filter((l) => l.startsWith('apply'))).toEqual([]);
  });
});
