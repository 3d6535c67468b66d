import { randomBytes } from 'node:crypto';
import { ValidationError } from '../../api/field-error.js';
import { describe, expect, it } from 'vitest';
import {
  decodeConfigData,
  KEY_FORMAT,
  KEY_VALUE,
  LABEL_OSC,
  ANNOTATION_CHECKSUM,
} from '../../api/secret.js';
import { API_VERSION, OSC_KIND, type OperatingSystemConfigStatus } from '../../api/schema.js';
import type { DataObject, KubeObject, OscObject } from '../kube/types.js';
import type { NodeSummary } from './node-index.js';
import { secretUpdatePatch, type JsonPatchOp } from './secret-object.js';
import { registryPipeline } from './pipeline.js';
import {
  FINALIZER,
  reconcile,
  SecretNameTakenError,
  type Caches,
  type EventInput,
  type Memo,
  type Writer,
} from './reconcile.js';

/** RFC 6902 add/replace on a copy, as the API server applies the update patch. */
function applyJsonPatch<T>(target: T, ops: JsonPatchOp[]): T {
  const out = structuredClone(target) as Record<string, unknown>;
  for (const { path, value } of ops) {
    const keys = path
      .split('/')
      .slice(1)
      .map((k) => k.replaceAll('~1', '/').replaceAll('~0', '~'));
    const last = keys.pop() ?? '';
    let node = out;
    for (const k of keys) node = node[k] as Record<string, unknown>;
    if (last === '-' && Array.isArray(node)) (node as unknown[]).push(value);
    else node[last] = structuredClone(value);
  }
  return out as T;
}

/** The API server as far as reconcile can tell: caches that reflect every write at once. */
class World implements Caches, Writer {
  oscs = new Map<string, OscObject>();
  secrets = new Map<string, DataObject>();
  configMaps = new Map<string, DataObject>();
  /** The node summaries per OSC key, as the node informer would index them. */
  nodes = new Map<string, NodeSummary[]>();
  log: string[] = [];
  events: EventInput[] = [];
  rv = 1;
  /** Whether "the watch" has delivered our last OSC write (an in-memory world is never behind). */
  seen = true;

  osc(ns: string, name: string) {
    return this.oscs.get(`${ns}/${name}`);
  }
  ownedSecret(ns: string, name: string) {
    const s = this.secrets.get(`${ns}/${name}`);
    return s?.metadata.labels?.[LABEL_OSC] ? s : undefined;
  }
  ownedSecretsOf(ns: string, osc: string): KubeObject[] {
    return [...this.secrets.values()].filter(
      (s) => s.metadata.namespace === ns && s.metadata.labels?.[LABEL_OSC] === osc,
    );
  }
  secret(ns: string, name: string) {
    const s = this.secrets.get(`${ns}/${name}`);
    return s?.metadata.labels?.[LABEL_OSC] ? undefined : s;
  }
  configMap(ns: string, name: string) {
    return this.configMaps.get(`${ns}/${name}`);
  }
  ownWriteSeen() {
    return this.seen;
  }
  nodesOf(ns: string, name: string) {
    return this.nodes.get(`${ns}/${name}`) ?? [];
  }
  createSecret(body: Record<string, unknown>) {
    const s = structuredClone(body) as unknown as DataObject;
    const key = `${s.metadata.namespace ?? ''}/${s.metadata.name}`;
    if (this.secrets.has(key)) return Promise.resolve('exists' as const);
    s.metadata.resourceVersion = String(++this.rv);
    this.secrets.set(key, s);
    this.log.push(`create ${s.metadata.name}`);
    return Promise.resolve(undefined);
  }
  secretMeta(ns: string, name: string) {
    const s = this.secrets.get(`${ns}/${name}`);
    if (!s) return Promise.reject(new Error(`secret ${name} not found`));
    return Promise.resolve({ metadata: structuredClone(s.metadata) });
  }
  updateSecret(existing: KubeObject, body: Record<string, unknown>) {
    const key = `${existing.metadata.namespace ?? ''}/${existing.metadata.name}`;
    const s = this.secrets.get(key);
    if (!s || s.metadata.resourceVersion !== existing.metadata.resourceVersion) {
      return Promise.reject(new Error(`conflict on ${existing.metadata.name}`));
    }
    const patched = applyJsonPatch(s, secretUpdatePatch(existing, body));
    patched.metadata.resourceVersion = String(++this.rv);
    this.secrets.set(key, patched);
    this.log.push(`update ${existing.metadata.name}`);
    return Promise.resolve(undefined);
  }
  deleteSecret(ns: string, name: string) {
    this.secrets.delete(`${ns}/${name}`);
    this.log.push(`delete ${name}`);
    return Promise.resolve();
  }
  /** What each pass handed the status writer, due or not. */
  offered: OperatingSystemConfigStatus[] = [];
  offerStatus(_ns: string, _name: string, status: OperatingSystemConfigStatus) {
    this.offered.push(structuredClone(status));
  }
  patchStatus(ns: string, name: string, status: OperatingSystemConfigStatus) {
    const o = this.oscs.get(`${ns}/${name}`);
    if (o) o.status = structuredClone(status);
    this.log.push(`status ${name}`);
    return Promise.resolve(undefined);
  }
  setFinalizer(ns: string, name: string, present: boolean) {
    const o = this.oscs.get(`${ns}/${name}`);
    if (o) {
      o.metadata.finalizers = present ? [FINALIZER] : [];
      if (!present && o.metadata.deletionTimestamp) this.oscs.delete(`${ns}/${name}`);
    }
    this.log.push(`finalizer ${name} ${String(present)}`);
    return Promise.resolve(undefined);
  }
  event(_: OscObject, e: EventInput) {
    this.events.push(e);
    this.log.push(`event ${e.reason}`);
    return Promise.resolve();
  }
  put(osc: Omit<OscObject, 'apiVersion' | 'kind'>) {
    const key = `${osc.metadata.namespace ?? ''}/${osc.metadata.name}`;
    const before = this.oscs.get(key);
    const o = structuredClone(osc) as OscObject;
    o.metadata.uid = before?.metadata.uid ?? `uid-${osc.metadata.name}`;
    o.metadata.generation = (before?.metadata.generation ?? 0) + 1;
    o.metadata.finalizers = before?.metadata.finalizers ?? [];
    if (before?.status) o.status = before.status;
    this.oscs.set(key, o);
  }
}

const spec = (content = 'hello\n') => ({
  type: 'ubuntu',
  purpose: 'reconcile' as const,
  files: [{ path: '/etc/demo.conf', permissions: '0644', content: { inline: { data: content } } }],
  units: [
    {
      name: 'demo.service',
      content: '[Unit]\nDescription=demo\n\n[Service]\nExecStart=/bin/true\n',
      filePaths: ['/etc/demo.conf'],
    },
  ],
});

function setup() {
  const world = new World();
  const memo = new Map<string, Memo>();
  let t = Date.parse('2026-01-01T00:00:00Z');
  const deps = {
    caches: world,
    writer: world,
    pipeline: registryPipeline(),
    now: () => new Date((t += 1000)),
    memo,
  };
  return { world, deps };
}

describe('reconcile', () => {
  it('renders a reconcile Secret the agent can decode, sets status, then is idle', async () => {
    const { world, deps } = setup();
    world.put({ metadata: { name: 'a', namespace: 'ns' }, spec: spec() });
    const first = await reconcile('ns/a', deps);
    expect(first.result).toBe('written');
    expect(world.log).toEqual(['finalizer a true', 'create oscar-a-reconcile', 'status a']);
    const secret = world.secrets.get('ns/oscar-a-reconcile');
    const data = Object.fromEntries(
      Object.entries(secret?.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64')]),
    );
    const decoded = decodeConfigData(data, secret?.metadata.annotations?.[ANNOTATION_CHECKSUM]);
    expect(decoded.config.files.map((f) => f.path)).toEqual(['/etc/demo.conf']);
    expect(data[KEY_FORMAT]?.toString()).toBe('cloud-config');
    expect(data[KEY_VALUE]?.toString()).toContain('#cloud-config');
    expect(secret?.metadata.ownerReferences?.[0]).toMatchObject({ uid: 'uid-a', controller: true });
    const status = world.osc('ns', 'a')?.status;
    expect(status?.checksum).toBe(decoded.checksum);
    expect(status?.checksumShort).toBe(decoded.checksum.slice(0, 12));
    expect(status?.observedGeneration).toBe(1);
    expect(status?.conditions?.map((c) => `${c.type}=${c.status}`)).toEqual([
      'Ready=True',
      'Rendered=True',
      'Valid=True',
    ]);

    world.log = [];
    const again = await reconcile('ns/a', deps);
    expect(again).toEqual({ result: 'unchanged', writes: 0, renderBytes: status?.size });
    // Without the memo too: a fresh render of the same input writes nothing.
    const noMemo = await reconcile('ns/a', { ...deps, memo: new Map() });
    expect(noMemo.writes).toBe(0);
    expect(world.log).toEqual([]);
  });

  it('by default (no finalizer, no Rendered Event) a new OSC costs two writes: Secret, status', async () => {
    const { world, deps } = setup();
    world.put({ metadata: { name: 'a', namespace: 'ns' }, spec: spec() });
    const first = await reconcile('ns/a', { ...deps, finalizer: false });
    expect(first).toMatchObject({ result: 'written', writes: 2 });
    expect(world.log).toEqual(['create oscar-a-reconcile', 'status a']);
    // What the Event said is in the status and in the outcome (the controller logs it).
    expect(first.checksum).toBe(world.osc('ns', 'a')?.status?.checksum);
  });

  it('with renderedEvents, every Secret written is a Normal Rendered Event naming its checksum', async () => {
    const { world, deps } = setup();
    world.put({ metadata: { name: 'a', namespace: 'ns' }, spec: spec() });
    const first = await reconcile('ns/a', { ...deps, finalizer: false, renderedEvents: true });
    expect(first).toMatchObject({ result: 'written', writes: 3 });
    expect(world.log).toEqual(['create oscar-a-reconcile', 'status a', 'event Rendered']);
    world.log = [];
    expect(
      (await reconcile('ns/a', { ...deps, finalizer: false, renderedEvents: true })).writes,
    ).toBe(0);
    expect(world.log).toEqual([]);
  });

  it('leaves the status of a new OSC to the next pass while the watch lags behind its finalizer', async () => {
    const { world, deps } = setup();
    world.put({ metadata: { name: 'a', namespace: 'ns' }, spec: spec() });
    world.seen = false;
    const first = await reconcile('ns/a', deps);
    expect(first).toMatchObject({ result: 'written', writes: 2, statusDeferred: true });
    expect(world.log).toEqual(['finalizer a true', 'create oscar-a-reconcile']);
    expect(world.osc('ns', 'a')?.status).toBeUndefined();

    // Only a pass that wrote the finalizer waits: the next one writes the status at once.
    world.log = [];
    const second = await reconcile('ns/a', deps);
    expect(second.statusDeferred).toBeUndefined();
    expect(world.log).toEqual(['status a']);
    expect(world.osc('ns', 'a')?.status?.observedGeneration).toBe(1);
  });

  it('an invalid update keeps the last good Secret byte for byte and explains the field', async () => {
    const { world, deps } = setup();
    world.put({ metadata: { name: 'a', namespace: 'ns' }, spec: spec() });
    await reconcile('ns/a', deps);
    const before = structuredClone(world.secrets.get('ns/oscar-a-reconcile'));
    const bad = spec();
    bad.units[0]!.filePaths = ['/etc/undeclared.conf'];
    world.put({ metadata: { name: 'a', namespace: 'ns' }, spec: bad });
    const out = await reconcile('ns/a', deps);
    expect(out.result).toBe('invalid');
    expect(world.secrets.get('ns/oscar-a-reconcile')).toEqual(before);
    const valid = world.osc('ns', 'a')?.status?.conditions?.find((c) => c.type === 'Valid');
    expect(valid?.status).toBe('False');
    expect(valid?.reason).toBe('ValidationFailed');
    expect(valid?.message).toContain('spec.units[0].filePaths');
    expect(world.osc('ns', 'a')?.status?.observedGeneration).toBe(2);
    expect(world.events.at(-1)).toMatchObject({ type: 'Warning', reason: 'ValidationFailed' });
    // Still invalid on the next pass: no new writes, no repeated Event.
    world.log = [];
    expect((await reconcile('ns/a', deps)).writes).toBe(0);
  });

  it('a missing referenced Secret is ReferenceNotFound until it appears', async () => {
    const { world, deps } = setup();
    world.put({
      metadata: { name: 'a', namespace: 'ns' },
      spec: {
        type: 'ubuntu',
        purpose: 'provision',
        files: [{ path: '/etc/token', content: { secretRef: { name: 'creds', key: 'token' } } }],
      },
    });
    expect((await reconcile('ns/a', deps)).result).toBe('invalid');
    const valid = world.osc('ns', 'a')?.status?.conditions?.find((c) => c.type === 'Valid');
    expect(valid).toMatchObject({ status: 'False', reason: 'ReferenceNotFound' });
    expect(valid?.message).toContain('spec.files[0].content.secretRef');
    expect(world.secrets.has('ns/oscar-a-provision')).toBe(false);
    const lastTransition = valid?.lastTransitionTime;

    world.secrets.set('ns/creds', {
      metadata: { name: 'creds', namespace: 'ns', resourceVersion: '77' },
      data: { token: Buffer.from('s3cr3t').toString('base64') },
    });
    expect((await reconcile('ns/a', deps)).result).toBe('written');
    const secret = world.secrets.get('ns/oscar-a-provision');
    expect(Object.keys(secret?.data ?? {}).sort()).toEqual([KEY_FORMAT, KEY_VALUE]);
    expect(secret?.type).toBe('cluster.x-k8s.io/secret');
    const valid2 = world.osc('ns', 'a')?.status?.conditions?.find((c) => c.type === 'Valid');
    expect(valid2?.status).toBe('True');
    expect(valid2?.lastTransitionTime).not.toBe(lastTransition);

    // A change of the referenced Secret changes the rendering.
    const sum = world.osc('ns', 'a')?.status?.checksum;
    world.secrets.set('ns/creds', {
      metadata: { name: 'creds', namespace: 'ns', resourceVersion: '78' },
      data: { token: Buffer.from('rotated').toString('base64') },
    });
    expect((await reconcile('ns/a', deps)).result).toBe('written');
    expect(world.osc('ns', 'a')?.status?.checksum).not.toBe(sum);
  });

  it('refuses to write a Secret above 1 MiB: Rendered=False TooLarge', async () => {
    const { world, deps } = setup();
    const big = randomBytes(700 * 1024);
    world.put({
      metadata: { name: 'a', namespace: 'ns' },
      spec: {
        type: 'ubuntu',
        purpose: 'reconcile',
        files: [
          {
            path: '/opt/blob',
            content: { inline: { encoding: 'b64', data: big.toString('base64') } },
          },
        ],
      },
    });
    const out = await reconcile('ns/a', deps);
    expect(out.result).toBe('tooLarge');
    expect(world.secrets.size).toBe(0);
    const rendered = world.osc('ns', 'a')?.status?.conditions?.find((c) => c.type === 'Rendered');
    expect(rendered).toMatchObject({ status: 'False', reason: 'TooLarge' });
  });

  it('deletion deletes the owned Secrets, then removes the finalizer', async () => {
    const { world, deps } = setup();
    world.put({ metadata: { name: 'a', namespace: 'ns' }, spec: spec() });
    await reconcile('ns/a', deps);
    const o = world.osc('ns', 'a');
    if (o) o.metadata.deletionTimestamp = '2026-01-01T00:00:00Z';
    world.log = [];
    expect((await reconcile('ns/a', deps)).result).toBe('deleted');
    expect(world.log).toEqual(['delete oscar-a-reconcile', 'finalizer a false']);
    expect(world.secrets.size).toBe(0);
    expect(world.oscs.size).toBe(0);
  });

  it("a Secret that only carries the label oscar.dev/osc of the OSC (an app's, labelled by hand or by a chart) is never deleted with it (red-team round 2)", async () => {
    for (const finalizer of [true, false]) {
      const { world, deps } = setup();
      world.put({ metadata: { name: 'a', namespace: 'ns' }, spec: spec() });
      await reconcile('ns/a', { ...deps, finalizer });
      world.secrets.set('ns/app-creds', {
        metadata: { name: 'app-creds', namespace: 'ns', labels: { [LABEL_OSC]: 'a' } },
        data: { token: Buffer.from('s3cr3t').toString('base64') },
      });
      if (finalizer) {
        const o = world.osc('ns', 'a');
        if (o) o.metadata.deletionTimestamp = '2026-01-01T00:00:00Z';
      } else world.oscs.delete('ns/a'); // gone without a finalizer: its leftovers are removed
      world.log = [];
      expect((await reconcile('ns/a', { ...deps, finalizer })).result).toBe(
        finalizer ? 'deleted' : 'absent',
      );
      expect(world.log.filter((l) => l.startsWith('delete'))).toEqual(['delete oscar-a-reconcile']);
      expect(world.secrets.get('ns/app-creds')?.data?.token).toBe(
        Buffer.from('s3cr3t').toString('base64'),
      );
    }
  });

  it("updates an existing Secret by a conditional patch: data replaced whole, others' metadata kept", async () => {
    const { world, deps } = setup();
    world.put({ metadata: { name: 'a', namespace: 'ns' }, spec: spec() });
    await reconcile('ns/a', deps);
    const stored = world.secrets.get('ns/oscar-a-reconcile');
    if (!stored) throw new Error('no Secret');
    stored.metadata.labels = { ...stored.metadata.labels, team: 'blue' };
    stored.metadata.annotations = { ...stored.metadata.annotations, note: 'kept' };
    stored.data = { ...stored.data, stale: Buffer.from('old').toString('base64') };
    world.put({ metadata: { name: 'a', namespace: 'ns' }, spec: spec('v2\n') });
    world.log = [];
    expect(await reconcile('ns/a', deps)).toMatchObject({ result: 'written', writes: 2 });
    expect(world.log).toEqual(['update oscar-a-reconcile', 'status a']);
    const after = world.secrets.get('ns/oscar-a-reconcile');
    expect(after?.metadata.labels).toMatchObject({ team: 'blue', [LABEL_OSC]: 'a' });
    expect(after?.metadata.annotations?.note).toBe('kept');
    expect(after?.metadata.annotations?.[ANNOTATION_CHECKSUM]).toBe(
      world.osc('ns', 'a')?.status?.checksum,
    );
    expect(Object.keys(after?.data ?? {})).not.toContain('stale');
    expect(after?.metadata.ownerReferences).toHaveLength(1);
  });

  it('an oscar Secret of its name that the cache does not hold (labels lost) is found by the create and updated', async () => {
    const { world, deps } = setup();
    world.put({ metadata: { name: 'a', namespace: 'ns' }, spec: spec() });
    world.secrets.set('ns/oscar-a-reconcile', {
      metadata: {
        name: 'oscar-a-reconcile',
        namespace: 'ns',
        resourceVersion: '7',
        labels: { x: 'y' },
        ownerReferences: [
          { apiVersion: API_VERSION, kind: OSC_KIND, name: 'a', uid: 'uid-a', controller: true },
        ],
      },
      data: { old: 'b2xk' },
    });
    expect(await reconcile('ns/a', deps)).toMatchObject({ result: 'written', writes: 4 });
    // finalizer, the create that found it, the update, the status
    expect(world.log).toEqual(['finalizer a true', 'update oscar-a-reconcile', 'status a']);
    const after = world.secrets.get('ns/oscar-a-reconcile');
    expect(after?.metadata.labels).toMatchObject({ x: 'y', [LABEL_OSC]: 'a' });
    expect(after?.data?.old).toBeUndefined();
    expect(world.ownedSecret('ns', 'oscar-a-reconcile')).toBeDefined();
    expect(
      secretUpdatePatch(after!, {
        metadata: { labels: {}, annotations: {}, ownerReferences: [] },
        data: {},
      })[0],
    ).toEqual({
      op: 'replace',
      path: '/metadata/resourceVersion',
      value: after?.metadata.resourceVersion,
    });
  });

  it("never modifies a Secret of its name that is not oscar's: SecretNameTaken, then writes its own once it is gone (issue 28)", async () => {
    const { world, deps } = setup();
    world.put({ metadata: { name: 'a', namespace: 'ns' }, spec: spec() });
    const foreign = {
      metadata: {
        name: 'oscar-a-reconcile',
        namespace: 'ns',
        resourceVersion: '7',
        labels: { app: 'db' },
        ownerReferences: [
          { apiVersion: 'apps/v1', kind: 'Deployment', name: 'a', uid: 'd', controller: true },
        ],
      },
      data: { password: 'aHVudGVyMg==' },
    };
    world.secrets.set('ns/oscar-a-reconcile', structuredClone(foreign));
    await expect(reconcile('ns/a', deps)).rejects.toThrow(SecretNameTakenError);
    expect(world.secrets.get('ns/oscar-a-reconcile')).toEqual(foreign);
    expect(world.log).not.toContain('update oscar-a-reconcile');
    const ready = world.osc('ns', 'a')?.status?.conditions?.find((c) => c.type === 'Ready');
    expect(ready).toMatchObject({ status: 'False', reason: 'SecretNameTaken' });
    expect(ready?.message).toContain('oscar-a-reconcile');
    expect(ready?.message).toContain('Rename the OperatingSystemConfig');
    expect(world.events.at(-1)).toMatchObject({ type: 'Warning', reason: 'SecretNameTaken' });
    // Positive control: once the foreign Secret is gone, the retry writes oscar's own.
    world.secrets.delete('ns/oscar-a-reconcile');
    expect(await reconcile('ns/a', deps)).toMatchObject({ result: 'written' });
    expect(world.ownedSecret('ns', 'oscar-a-reconcile')).toBeDefined();
  });

  it('hands the Secret of an OSC deleted and created again under its name to the new one', async () => {
    const { world, deps } = setup();
    world.put({ metadata: { name: 'a', namespace: 'ns' }, spec: spec() });
    await reconcile('ns/a', deps);
    const stored = world.secrets.get('ns/oscar-a-reconcile');
    const foreign = { apiVersion: 'v1', kind: 'ConfigMap', name: 'x', uid: 'other' };
    stored?.metadata.ownerReferences?.push(foreign);
    const again = world.osc('ns', 'a');
    if (!again) throw new Error('no OSC');
    again.metadata.uid = 'uid-2';
    world.log = [];
    await reconcile('ns/a', deps);
    expect(world.log[0]).toBe('update oscar-a-reconcile');
    const refs = world.secrets.get('ns/oscar-a-reconcile')?.metadata.ownerReferences ?? [];
    expect(refs.filter((r) => r.controller === true).map((r) => r.uid)).toEqual(['uid-2']);
    expect(refs.map((r) => r.uid)).toContain('other');
  });

  it('rewrites a Secret someone deleted', async () => {
    const { world, deps } = setup();
    world.put({ metadata: { name: 'a', namespace: 'ns' }, spec: spec() });
    await reconcile('ns/a', deps);
    world.secrets.delete('ns/oscar-a-reconcile');
    expect((await reconcile('ns/a', deps)).result).toBe('written');
    expect(world.secrets.has('ns/oscar-a-reconcile')).toBe(true);
  });

  it('counts the nodes that follow the OSC against its current checksum, writing only on change', async () => {
    const { world, deps } = setup();
    world.put({ metadata: { name: 'a', namespace: 'ns' }, spec: spec() });
    await reconcile('ns/a', deps);
    // A reconcile OSC shows its (zero) nodes from the start.
    expect(world.osc('ns', 'a')?.status?.nodes).toEqual({
      total: 0,
      updated: 0,
      degraded: 0,
      drifted: 0,
    });
    const v1 = world.osc('ns', 'a')?.status?.checksum ?? '';

    world.nodes.set('ns/a', [
      { osc: 'ns/a', applied: v1, degraded: false },
      { osc: 'ns/a', applied: 'old', degraded: false },
      { osc: 'ns/a', degraded: true },
    ]);
    world.log = [];
    expect((await reconcile('ns/a', deps)).writes).toBe(1);
    expect(world.log).toEqual(['status a']);
    expect(world.osc('ns', 'a')?.status?.nodes).toEqual({
      total: 3,
      updated: 1,
      degraded: 1,
      drifted: 0,
    });
    world.log = [];
    expect((await reconcile('ns/a', deps)).writes).toBe(0);

    // A new rendering: nobody has applied it yet; the same pass writes the new counts.
    world.put({ metadata: { name: 'a', namespace: 'ns' }, spec: spec('v2\n') });
    await reconcile('ns/a', deps);
    expect(world.osc('ns', 'a')?.status?.checksum).not.toBe(v1);
    expect(world.osc('ns', 'a')?.status?.nodes).toEqual({
      total: 3,
      updated: 0,
      degraded: 1,
      drifted: 0,
    });

    // An invalid update keeps the last good checksum, and counts against it.
    const v2 = world.osc('ns', 'a')?.status?.checksum ?? '';
    world.nodes.set('ns/a', [{ osc: 'ns/a', applied: v2, degraded: false }]);
    const bad = spec('v3\n');
    bad.units[0]!.filePaths = ['/etc/undeclared.conf'];
    world.put({ metadata: { name: 'a', namespace: 'ns' }, spec: bad });
    expect((await reconcile('ns/a', deps)).result).toBe('invalid');
    expect(world.osc('ns', 'a')?.status?.nodes).toEqual({
      total: 1,
      updated: 1,
      degraded: 0,
      drifted: 0,
    });
  });

  it('under a rollout, counts the nodes at its target: after an undo, the stable revision', async () => {
    const { world, deps } = setup();
    world.put({ metadata: { name: 'a', namespace: 'ns' }, spec: spec() });
    await reconcile('ns/a', deps);
    const v1 = world.osc('ns', 'a')?.status?.checksum ?? '';
    world.put({ metadata: { name: 'a', namespace: 'ns' }, spec: spec('v2\n') });
    await reconcile('ns/a', deps);
    world.nodes.set('ns/a', [
      { osc: 'ns/a', applied: v1, degraded: false },
      { osc: 'ns/a', applied: v1, degraded: false },
    ]);
    // the rollout controller's field after `oscar rollout undo`: the target is revision 1 again
    const stored = world.osc('ns', 'a');
    if (!stored?.status) throw new Error('no status');
    stored.status.rollout = { revision: 1, checksum: v1, phase: 'Complete' } as never;
    await reconcile('ns/a', deps);
    expect(world.osc('ns', 'a')?.status?.checksum).not.toBe(v1);
    expect(world.osc('ns', 'a')?.status?.nodes).toMatchObject({ total: 2, updated: 2 });
  });

  it('a provision OSC has no node counts unless some node says it follows it', async () => {
    const { world, deps } = setup();
    const provision = { ...spec(), purpose: 'provision' as const };
    world.put({ metadata: { name: 'p', namespace: 'ns' }, spec: provision });
    await reconcile('ns/p', deps);
    expect(world.osc('ns', 'p')?.status).not.toHaveProperty('nodes');
    world.nodes.set('ns/p', [{ osc: 'ns/p', degraded: true }]);
    await reconcile('ns/p', deps);
    expect(world.osc('ns', 'p')?.status?.nodes).toEqual({
      total: 1,
      updated: 0,
      degraded: 1,
      drifted: 0,
    });
    world.nodes.delete('ns/p');
    await reconcile('ns/p', deps);
    expect(world.osc('ns', 'p')?.status).not.toHaveProperty('nodes');
  });

  it('paces status writes that only move node counts: one a second per OSC, the latest counts', async () => {
    const { world, deps } = setup();
    let clock = Date.parse('2026-01-01T00:00:00Z');
    const paced = {
      ...deps,
      now: () => new Date(clock),
      nodeCounts: { last: new Map<string, number>() },
    };
    world.put({ metadata: { name: 'a', namespace: 'ns' }, spec: spec() });
    await reconcile('ns/a', paced);
    const v1 = world.osc('ns', 'a')?.status?.checksum ?? '';
    const node = { osc: 'ns/a', applied: v1, degraded: false };

    // 200 reports within the second after the status write: none written, each told when.
    world.log = [];
    for (let i = 1; i <= 200; i++) {
      clock += 4;
      world.nodes.set(
        'ns/a',
        Array.from({ length: i }, () => node),
      );
      const out = await reconcile('ns/a', paced);
      expect(out.writes).toBe(0);
      expect(out.nodesDueInMs).toBe(1000 - 4 * i);
      // not written, but handed over: another write of the OSC's status carries the counts
      expect(world.offered.at(-1)?.nodes?.total).toBe(i);
    }
    expect(world.log).toEqual([]);
    // Its second is up: one write with the latest counts, and the next second starts.
    clock += 200;
    const due = await reconcile('ns/a', paced);
    expect(due).toMatchObject({ writes: 1 });
    expect(due.nodesDueInMs).toBeUndefined();
    expect(world.osc('ns', 'a')?.status?.nodes).toMatchObject({ total: 200, updated: 200 });
    world.nodes.set('ns/a', [node]);
    expect((await reconcile('ns/a', paced)).nodesDueInMs).toBe(1000);

    // Anything beyond the counts (a new rendering) is written at once, counts included.
    world.put({ metadata: { name: 'a', namespace: 'ns' }, spec: spec('v2\n') });
    world.log = [];
    await reconcile('ns/a', paced);
    expect(world.log).toEqual(['update oscar-a-reconcile', 'status a']);
    expect(world.osc('ns', 'a')?.status?.nodes).toMatchObject({ total: 1, updated: 0 });
  });
});

describe('amplification through references (red-team round 3)', () => {
  const MiB = 1024 * 1024;

  /** One 1 MiB Secret and an OSC of `count` files that all name it. */
  function manyRefs(count: number) {
    const { world, deps } = setup();
    world.secrets.set('ns/big', {
      metadata: { name: 'big', namespace: 'ns', resourceVersion: '5' },
      data: { blob: Buffer.alloc(MiB, 'a').toString('base64') },
    });
    const files = Array.from({ length: count }, (_, i) => ({
      path: `/opt/copy-${String(i)}`,
      content: { secretRef: { name: 'big', key: 'blob' } },
    }));
    world.put({
      metadata: { name: 'a', namespace: 'ns' },
      spec: { type: 'ubuntu', purpose: 'reconcile', files },
    });
    // What reached the renderer, in bytes of file contents: the materialising step.
    const rendered: number[] = [];
    const pipeline = {
      render: (
        config: Parameters<typeof deps.pipeline.render>[0],
        target: { name: string; namespace: string },
      ) => {
        rendered.push(config.files.reduce((n, f) => n + f.content.length, 0));
        if (rendered.at(-1)! > 32 * MiB)
          throw new Error('the renderer was handed the whole amplification');
        return deps.pipeline.render(config, target);
      },
    };
    return { world, deps: { ...deps, pipeline }, rendered };
  }

  it('1,024 files naming one 1 MiB Secret (1 GiB resolved) are refused before anything renders, naming the limit', async () => {
    const { world, deps, rendered } = manyRefs(1024);
    const out = await reconcile('ns/a', deps);
    expect(out.result).toBe('invalid');
    expect(rendered).toEqual([]);
    expect(world.secrets.has('ns/oscar-a-reconcile')).toBe(false);
    const valid = world.osc('ns', 'a')?.status?.conditions?.find((c) => c.type === 'Valid');
    expect(valid).toMatchObject({ status: 'False', reason: 'ValidationFailed' });
    // The first file past the budget (32 files of 1 MiB fit), the limit and the fix.
    expect(valid?.message).toContain('spec.files[32].content');
    expect(valid?.message).toContain('Secret "big"');
    expect(valid?.message).toContain('above the 32.0 MiB all files of one OSC may hold together');
    expect(world.events.at(-1)).toMatchObject({ type: 'Warning', reason: 'ValidationFailed' });
  });

  it('positive control: 2 files naming the same 1 MiB Secret resolve, render and are written', async () => {
    const { deps, rendered } = manyRefs(2);
    const out = await reconcile('ns/a', deps);
    // Repetitive contents compress into the Secret: within every limit.
    expect(out.result).toBe('written');
    expect(rendered).toEqual([2 * MiB]);
  });
});

describe('OSC names too long for the names derived from them (red-team round 3)', () => {
  it('a 64-character name is Valid=False naming metadata.name and the limit; nothing is written', async () => {
    const { world, deps } = setup();
    const name = 'a'.repeat(64);
    world.put({ metadata: { name, namespace: 'ns' }, spec: spec() });
    const out = await reconcile(`ns/${name}`, deps);
    expect(out.result).toBe('invalid');
    expect(world.secrets.size).toBe(0);
    const valid = world.osc('ns', name)?.status?.conditions?.find((c) => c.type === 'Valid');
    expect(valid).toMatchObject({ status: 'False', reason: 'ValidationFailed' });
    expect(valid?.message).toContain('metadata.name: must be at most 63 characters');
  });

  it('positive control: a 63-character name renders; its Secret name and label value fit', async () => {
    const { world, deps } = setup();
    const name = 'a'.repeat(63);
    world.put({ metadata: { name, namespace: 'ns' }, spec: spec() });
    expect((await reconcile(`ns/${name}`, deps)).result).toBe('written');
    const secret = world.secrets.get(`ns/oscar-${name}-reconcile`);
    expect(secret?.metadata.labels?.[LABEL_OSC]).toBe(name);
    expect(secret?.metadata.name.length).toBeLessThanOrEqual(253);
  });
});

describe("a referenced Secret's data never reaches status, Events or warnings (red-team round 3)", () => {
  const PASSWORD = 'hunter2-very-secret';
  const content = `user=admin\npassword=${PASSWORD}\n`;

  /** A renderer that echoes every file it was sent into its error (or its warnings). */
  function echoing(where: 'error' | 'warning' | 'fieldError') {
    const { world, deps } = setup();
    world.secrets.set('ns/creds', {
      metadata: { name: 'creds', namespace: 'ns', resourceVersion: '7' },
      data: { conf: Buffer.from(content).toString('base64') },
    });
    const echo = (config: Parameters<typeof deps.pipeline.render>[0]) =>
      config.files
        .map(
          (f) =>
            `${f.path}: cannot parse ${f.content.toString()} (base64 ${f.content.toString('base64')})`,
        )
        .join('; ');
    const pipeline = {
      render: async (
        config: Parameters<typeof deps.pipeline.render>[0],
        target: { name: string; namespace: string },
      ) => {
        if (where === 'error') throw new Error(echo(config));
        if (where === 'fieldError') {
          throw new ValidationError([{ path: 'spec.files[0].content', message: echo(config) }]);
        }
        const out = await deps.pipeline.render(config, target);
        return { ...out, result: { ...out.result, warnings: [echo(config)] } };
      },
    };
    return { world, deps: { ...deps, pipeline } };
  }

  const visible = (world: World) => JSON.stringify([world.osc('ns', 'a')?.status, world.events]);

  it.each(['error', 'warning', 'fieldError'] as const)(
    "a renderer's %s echoing a secretRef'd file: the Secret's lines and base64 are redacted",
    async (where) => {
      const { world, deps } = echoing(where);
      world.put({
        metadata: { name: 'a', namespace: 'ns' },
        spec: {
          type: 'ubuntu',
          purpose: 'reconcile',
          files: [
            { path: '/etc/app.conf', content: { secretRef: { name: 'creds', key: 'conf' } } },
            { path: '/etc/motd', content: { inline: { data: 'welcome to the machine\n' } } },
          ],
        },
      });
      await reconcile('ns/a', deps).catch(() => undefined);
      const seen = visible(world);
      expect(seen).not.toContain(PASSWORD);
      expect(seen).not.toContain(Buffer.from(content).toString('base64'));
      expect(seen).toContain('[redacted: data of a referenced Secret]');
      // Positive control: inline content (the OSC's own, readable by the same reader) stays.
      expect(seen).toContain('welcome to the machine');
      expect(seen).toContain('/etc/app.conf');
    },
  );
});
