// The controller against the real API server: OSCs of both purposes become Secrets with
// the contract's keys, labels, owner and checksum; status converges; updates, invalid updates,
// referenced Secrets, deletion; and an idle controller writes nothing.
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it, onTestFinished } from 'vitest';
import { sha256Hex } from '../../api/canonical.js';
import {
  ANNOTATION_CHECKSUM,
  decodeConfigData,
  KEY_CONFIG,
  KEY_CONFIG_GZIP,
  KEY_FORMAT,
  KEY_VALUE,
  LABEL_OSC,
  LABEL_PURPOSE,
  secretNameFor,
} from '../../api/secret.js';
import { FINALIZER } from '../../controller/osc/reconcile.js';
import { CONTENT_MERGE_PATCH } from '../../kube/client.js';
import {
  Api,
  demoSpec,
  secretData,
  sleep,
  startController,
  waitFor,
} from './controller-support.js';
import { createTestNamespace, skipWithoutCluster } from './support/cluster.js';

skipWithoutCluster();

const stops: (() => Promise<void>)[] = [];
const logs: string[][] = [];
afterEach(async (ctx) => {
  for (const stop of stops.splice(0)) await stop();
  // On failure, the controller's log is the first thing one wants to read.
  if (ctx.task.result?.state === 'fail') process.stderr.write(logs.flat().join(''));
  logs.length = 0;
});

async function withController(ns: string) {
  const c = await startController([ns]);
  stops.push(c.stop);
  logs.push(c.logs);
  return c;
}

describe('controller lifecycle (real API server)', () => {
  for (const purpose of ['provision', 'reconcile'] as const) {
    it(`create, update, delete a ${purpose} OSC`, async () => {
      const ns = await createTestNamespace('ctl');
      const api = new Api();
      await withController(ns);
      await api.applyOsc(ns, 'worker', demoSpec(purpose, 'v1\n'));
      const osc = await api.waitReady(ns, 'worker');
      const name = secretNameFor('worker', purpose);
      const secret = await waitFor('the Secret', () => api.getSecret(ns, name));

      // Keys, labels, owner reference, checksum.
      const data = secretData(secret);
      const keys = Object.keys(data).sort();
      expect(keys).toEqual(
        purpose === 'provision' ? [KEY_FORMAT, KEY_VALUE] : [KEY_CONFIG, KEY_FORMAT, KEY_VALUE],
      );
      expect(data[KEY_FORMAT]?.toString()).toBe('cloud-config');
      expect(data[KEY_VALUE]?.toString()).toContain('/etc/demo/app.conf');
      expect(secret.metadata.labels).toMatchObject({
        [LABEL_OSC]: 'worker',
        [LABEL_PURPOSE]: purpose,
      });
      expect(secret.metadata.ownerReferences).toEqual([
        expect.objectContaining({
          kind: 'OperatingSystemConfig',
          name: 'worker',
          uid: osc.metadata.uid,
          controller: true,
        }),
      ]);
      const checksum = secret.metadata.annotations?.[ANNOTATION_CHECKSUM];
      expect(checksum).toMatch(/^[0-9a-f]{64}$/);
      if (purpose === 'reconcile') {
        // The agent's decoder accepts it: checksum verified, files and units as declared.
        const decoded = decodeConfigData(data, checksum);
        expect(decoded.config.files.map((f) => [f.path, f.mode, f.content.toString()])).toEqual([
          ['/etc/demo/app.conf', 0o640, 'v1\n'],
        ]);
        expect(sha256Hex(decoded.bytes)).toBe(checksum);
      }

      // Status.
      // No finalizer by default: the owner reference's garbage collection deletes the Secret.
      expect(osc.metadata.finalizers ?? []).not.toContain(FINALIZER);
      expect(osc.status).toMatchObject({
        observedGeneration: osc.metadata.generation,
        secretRef: { name },
        checksum,
        checksumShort: checksum?.slice(0, 12),
        format: 'cloud-config',
      });
      expect(osc.status?.size).toBeGreaterThan(0);
      expect(osc.status?.conditions?.map((c) => [c.type, c.status, c.reason])).toEqual([
        ['Ready', 'True', 'Rendered'],
        ['Rendered', 'True', 'Rendered'],
        ['Valid', 'True', 'Valid'],
      ]);

      // Update: the Secret follows, status converges on the new generation.
      await api.applyOsc(ns, 'worker', demoSpec(purpose, 'v2\n'));
      const updated = await waitFor('the new checksum in status', async () => {
        const o = await api.waitReady(ns, 'worker');
        return o.status?.checksum !== checksum ? o : undefined;
      });
      expect(updated.metadata.generation).toBe((osc.metadata.generation ?? 0) + 1);
      const after = await api.getSecret(ns, name);
      expect(after?.metadata.annotations?.[ANNOTATION_CHECKSUM]).toBe(updated.status?.checksum);
      expect(secretData(after)[KEY_VALUE]?.toString()).toContain('v2');
      // Ready did not flap: its transition time is the first one.
      const readyBefore = osc.status?.conditions?.find((c) => c.type === 'Ready');
      const readyAfter = updated.status?.conditions?.find((c) => c.type === 'Ready');
      expect(readyAfter?.lastTransitionTime).toBe(readyBefore?.lastTransitionTime);

      // Delete: the finalizer removes the Secret (this cluster has no garbage collector).
      await api.deleteOsc(ns, 'worker');
      await waitFor(
        'the Secret to be deleted',
        async () => (await api.getSecret(ns, name)) === undefined,
      );
      await waitFor(
        'the OSC to be gone',
        async () => (await api.getOsc(ns, 'worker')) === undefined,
      );
    });
  }

  it('re-renders when a referenced Secret changes; a missing one is Valid=False until it appears', async () => {
    const ns = await createTestNamespace('ctl');
    const api = new Api();
    const { logs } = await withController(ns);
    const token = `tok-${randomBytes(12).toString('hex')}`;
    await api.applyOsc(ns, 'joiner', {
      type: 'ubuntu',
      purpose: 'reconcile',
      files: [
        {
          path: '/etc/kubernetes/token',
          permissions: '0600',
          content: { secretRef: { name: 'join', key: 'token' } },
        },
      ],
    });
    const invalid = await api.waitCondition(ns, 'joiner', 'Valid', 'False');
    const valid = invalid.status?.conditions?.find((c) => c.type === 'Valid');
    expect(valid?.reason).toBe('ReferenceNotFound');
    expect(valid?.message).toContain('spec.files[0].content.secretRef');
    expect(valid?.message).toContain('Secret "join" not found');
    expect(await api.getSecret(ns, secretNameFor('joiner', 'reconcile'))).toBeUndefined();
    const events = await waitFor('a Warning Event', async () => {
      const list = await api.listEvents(ns);
      return list.some((e) => e.type === 'Warning' && e.reason === 'ReferenceNotFound')
        ? list
        : undefined;
    });
    expect(events.find((e) => e.reason === 'ReferenceNotFound')?.involvedObject.name).toBe(
      'joiner',
    );

    // It appears: rendered.
    await api.putSecret(ns, 'join', { token });
    const ready = await api.waitReady(ns, 'joiner');
    const secretName = secretNameFor('joiner', 'reconcile');
    const s1 = await api.getSecret(ns, secretName);
    const d1 = decodeConfigData(secretData(s1), s1?.metadata.annotations?.[ANNOTATION_CHECKSUM]);
    expect(d1.config.files[0]?.content.toString()).toBe(token);

    // It changes: re-rendered.
    const rotated = `rot-${randomBytes(12).toString('hex')}`;
    await api.putSecret(ns, 'join', { token: rotated });
    await waitFor('the rotated token in the rendered Secret', async () => {
      const s = await api.getSecret(ns, secretName);
      const d = decodeConfigData(secretData(s), s?.metadata.annotations?.[ANNOTATION_CHECKSUM]);
      return d.config.files[0]?.content.toString() === rotated;
    });
    // The generation stays the same (only the reference changed), so the status
    // is written after the Secret: wait for its checksum to follow.
    const after = await waitFor('the status checksum to follow the rotated Secret', async () => {
      const o = await api.waitReady(ns, 'joiner');
      return o.status?.checksum !== ready.status?.checksum ? o : undefined;
    });
    const s2 = await api.getSecret(ns, secretName);
    expect(after.status?.checksum).toBe(s2?.metadata.annotations?.[ANNOTATION_CHECKSUM]);

    // Secrets never reach the logs.
    const text = logs.join('');
    expect(text).toContain('reconciled');
    expect(text).not.toContain(token);
    expect(text).not.toContain(rotated);
    expect(text).not.toContain(Buffer.from(token).toString('base64'));
  });

  it('an unrelated Secret changing renders nothing and is never read; a referenced one is read once per version', async () => {
    const ns = await createTestNamespace('ctl');
    const api = new Api();
    const { handle, logs } = await withController(ns);
    await api.putSecret(ns, 'ref', { k: 'v1' });
    await api.putSecret(ns, 'unrelated', { k: 'u0' });
    await api.applyOsc(ns, 'user', {
      type: 'ubuntu',
      purpose: 'reconcile',
      files: [{ path: '/etc/ref', content: { secretRef: { name: 'ref', key: 'k' } } }],
    });
    await api.applyOsc(ns, 'wrong-key', {
      type: 'ubuntu',
      purpose: 'reconcile',
      files: [{ path: '/etc/ref', content: { secretRef: { name: 'ref', key: 'nope' } } }],
    });
    await api.waitReady(ns, 'user');
    const wrong = await waitFor('wrong-key to name the missing key', async () => {
      const o = await api.waitCondition(ns, 'wrong-key', 'Valid', 'False');
      const c = o.status?.conditions?.find((x) => x.type === 'Valid');
      return c?.message.includes('has no key') ? c : undefined;
    });
    expect(wrong.reason).toBe('ReferenceNotFound');
    expect(wrong.message).toContain('spec.files[0].content.secretRef.key');
    expect(wrong.message).toContain('Secret "ref" has no key "nope" (it has: k)');
    const reads = async (): Promise<number> =>
      (await handle.metrics.referencedSecretReads.get()).values.reduce((n, v) => n + v.value, 0);
    expect(await reads()).toBe(1); // both OSCs rendered from one GET
    // The passes of each OSC, from the controller's log (errors, retried, left out).
    const passes = (from: number): string[] =>
      logs
        .slice(from)
        .join('')
        .split('\n')
        .filter((l) => l.includes('"msg":"reconciled'))
        .map((l) => JSON.parse(l) as { osc: string; result: string })
        .filter((e) => e.result !== 'error')
        .map((e) => `${e.osc.slice(ns.length + 1)} ${e.result}`);
    // Settled: the pass the rendered Secret's own watch event causes has run.
    await waitFor('the pass after the write', () => {
      const mine = passes(0).filter((p) => p.startsWith('user '));
      return mine.length > mine.indexOf('user written') + 1;
    });
    const mark = logs.length;

    for (const v of ['u1', 'u2', 'u3']) await api.putSecret(ns, 'unrelated', { k: v });
    // The referenced Secret changes after them: one watch stream, in order, so once its change
    // is rendered (and that write's own echo has run) the unrelated ones have been seen.
    await api.putSecret(ns, 'ref', { k: 'v2' });
    const secretName = secretNameFor('user', 'reconcile');
    await waitFor('the changed value in the rendered Secret', async () => {
      const s = await api.getSecret(ns, secretName);
      const d = decodeConfigData(secretData(s), s?.metadata.annotations?.[ANNOTATION_CHECKSUM]);
      return d.config.files[0]?.content.toString() === 'v2';
    });
    await waitFor('the pass after the write', () => passes(mark).includes('user unchanged'));
    expect(passes(mark).sort()).toEqual(['user unchanged', 'user written', 'wrong-key invalid']);
    expect(await reads()).toBe(2);
    const readLines = logs
      .join('')
      .split('\n')
      .filter((l) => l.includes('read a referenced Secret'))
      .map((l) => (JSON.parse(l) as { secret: string }).secret);
    expect(readLines).toEqual(['ref', 'ref']);
  });

  it('an invalid update (passes the CRD, fails deep validation) leaves the Secret byte for byte', async () => {
    const ns = await createTestNamespace('ctl');
    const api = new Api();
    await withController(ns);
    await api.applyOsc(ns, 'w', demoSpec('reconcile'));
    await api.waitReady(ns, 'w');
    const name = secretNameFor('w', 'reconcile');
    const before = await api.getSecret(ns, name);

    // filePaths naming a file that is not declared.
    const badRef = demoSpec('reconcile', 'changed\n');
    badRef.units = [{ ...badRef.units![0]!, filePaths: ['/etc/demo/undeclared.conf'] }];
    await api.applyOsc(ns, 'w', badRef);
    const o1 = await api.waitCondition(ns, 'w', 'Valid', 'False');
    const c1 = o1.status?.conditions?.find((c) => c.type === 'Valid');
    expect(c1?.reason).toBe('ValidationFailed');
    expect(c1?.message).toContain('spec.units[0].filePaths[0]');
    expect(o1.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('False');
    // The last good rendering is still what the status points at.
    expect(o1.status?.checksum).toBe(before?.metadata.annotations?.[ANNOTATION_CHECKSUM]);

    // Bad unit-file syntax in content.
    const badUnit = demoSpec('reconcile', 'changed again\n');
    badUnit.units = [{ ...badUnit.units![0]!, content: '[Service\nExecStart=/bin/true\n' }];
    await api.applyOsc(ns, 'w', badUnit);
    const o2 = await waitFor('generation 3 observed', async () => {
      const o = await api.getOsc(ns, 'w');
      return o?.status?.observedGeneration === 3 ? o : undefined;
    });
    const c2 = o2.status?.conditions?.find((c) => c.type === 'Valid');
    expect(c2?.status).toBe('False');
    expect(c2?.message).toContain('spec.units[0].content');

    // A file where a directory of another declared file must be: each path is valid, both
    // together can never be written on a node.
    const nested = demoSpec('reconcile', 'changed a third time\n');
    nested.files = [
      { path: '/etc/demo', content: { inline: { data: 'x' } } },
      ...(nested.files ?? []),
    ];
    await api.applyOsc(ns, 'w', nested);
    const o3 = await waitFor('generation 4 observed', async () => {
      const o = await api.getOsc(ns, 'w');
      return o?.status?.observedGeneration === 4 ? o : undefined;
    });
    const c3 = o3.status?.conditions?.find((c) => c.type === 'Valid');
    expect(c3?.status).toBe('False');
    expect(c3?.message).toContain(
      'spec.files[0].path: "/etc/demo" is written as a file, but spec.files[1].path ("/etc/demo/app.conf") needs it to be a directory',
    );

    const after = await api.getSecret(ns, name);
    expect(after?.metadata.resourceVersion).toBe(before?.metadata.resourceVersion);
    expect(after?.data).toEqual(before?.data);

    // Fixing it renders again.
    await api.applyOsc(ns, 'w', demoSpec('reconcile', 'fixed\n'));
    await api.waitReady(ns, 'w');
    expect((await api.getSecret(ns, name))?.metadata.resourceVersion).not.toBe(
      before?.metadata.resourceVersion,
    );
  });

  it('a Secret above 1 MiB is not written: Rendered=False TooLarge', async () => {
    const ns = await createTestNamespace('ctl');
    const api = new Api();
    await withController(ns);
    await api.applyOsc(ns, 'big', {
      type: 'ubuntu',
      purpose: 'reconcile',
      files: [
        {
          path: '/opt/blob',
          content: {
            inline: { encoding: 'b64', data: randomBytes(700 * 1024).toString('base64') },
          },
        },
      ],
    });
    const o = await api.waitCondition(ns, 'big', 'Rendered', 'False');
    expect(o.status?.conditions?.find((c) => c.type === 'Rendered')?.reason).toBe('TooLarge');
    expect(await api.getSecret(ns, secretNameFor('big', 'reconcile'))).toBeUndefined();
  });

  it('a new OSC costs two writes, its Secret and its status; the Rendered Event only when asked for', async () => {
    const api = new Api();
    const writesOf = async (handle: { metrics: { writes: { get(): Promise<unknown> } } }) => {
      const m = (await handle.metrics.writes.get()) as {
        values: { labels: Record<string, string | number>; value: number }[];
      };
      return Object.fromEntries(
        m.values
          .filter((v) => v.value > 0)
          .map((v) => [`${String(v.labels.verb)} ${String(v.labels.resource)}`, v.value]),
      );
    };
    const normalEvents = async (ns: string) =>
      (await api.listEvents(ns))
        .filter((e) => e.type === 'Normal')
        .map((e) => `${e.reason} ${e.involvedObject.name}`);

    const ns = await createTestNamespace('ctl');
    const { handle } = await withController(ns);
    await api.applyOsc(ns, 'two', demoSpec('reconcile', 'w\n'));
    await api.waitReady(ns, 'two');
    await waitFor('the Secret', () => api.getSecret(ns, secretNameFor('two', 'reconcile')));
    await sleep(1000); // a late third write would show here
    expect(await writesOf(handle)).toEqual({
      'create secrets': 1,
      'apply operatingsystemconfigs/status': 1,
    });
    expect(await normalEvents(ns)).toEqual([]);

    const ns2 = await createTestNamespace('ctl');
    const c = await startController([ns2], { oscRenderedEvents: true });
    stops.push(c.stop);
    await api.applyOsc(ns2, 'three', demoSpec('reconcile', 'w\n'));
    await api.waitReady(ns2, 'three');
    expect(
      await waitFor('the Rendered Event', async () => {
        const e = await normalEvents(ns2);
        return e.length > 0 ? e : undefined;
      }),
    ).toEqual(['Rendered three']);
  });

  it('an update patches the Secret: a key no longer rendered goes, labels others set stay', async () => {
    const api = new Api();
    const ns = await createTestNamespace('ctl');
    const { handle } = await withController(ns);
    const name = secretNameFor('big', 'reconcile');
    await api.applyOsc(ns, 'big', demoSpec('reconcile', 'small\n'));
    await api.waitReady(ns, 'big');
    const first = await waitFor('the Secret', () => api.getSecret(ns, name));
    expect(Object.keys(secretData(first))).toContain(KEY_CONFIG);
    await api.http.request('PATCH', `/api/v1/namespaces/${ns}/secrets/${name}`, {
      contentType: CONTENT_MERGE_PATCH,
      body: { metadata: { labels: { team: 'blue' }, annotations: { note: 'kept' } } },
    });

    // Above 64 KiB the canonical config is gzipped: config.json.gz replaces config.json.
    await api.applyOsc(ns, 'big', demoSpec('reconcile', `${'x'.repeat(70_000)}\n`));
    const updated = await waitFor('the gzipped Secret', async () => {
      const s = await api.getSecret(ns, name);
      return s && Object.keys(secretData(s)).includes(KEY_CONFIG_GZIP) ? s : undefined;
    });
    expect(Object.keys(secretData(updated))).not.toContain(KEY_CONFIG);
    expect(updated.metadata.labels).toMatchObject({ team: 'blue', [LABEL_OSC]: 'big' });
    expect(updated.metadata.annotations?.note).toBe('kept');
    const osc = await api.waitReady(ns, 'big');
    expect(updated.metadata.annotations?.[ANNOTATION_CHECKSUM]).toBe(osc.status?.checksum);
    expect(decodeConfigData(secretData(updated), osc.status?.checksum).checksum).toBe(
      osc.status?.checksum,
    );
    const m = await handle.metrics.writes.get();
    const secretWrites = m.values
      .filter((v) => v.labels.resource === 'secrets' && v.value > 0)
      .map((v) => `${String(v.labels.verb)} ${String(v.value)}`);
    expect(secretWrites.sort()).toEqual(['create 1', 'patch 1']);
  });

  it('writes nothing at steady state (a node report that moves no count included): a watch sees no events for 10 s', async () => {
    const ns = await createTestNamespace('ctl');
    const api = new Api();
    const { handle } = await withController(ns);
    await api.putSecret(ns, 'ref', { k: 'v' });
    for (const [i, purpose] of (['provision', 'reconcile', 'reconcile'] as const).entries()) {
      await api.applyOsc(ns, `osc-${String(i)}`, demoSpec(purpose, `n${String(i)}\n`));
    }
    await api.applyOsc(ns, 'with-ref', {
      type: 'ubuntu',
      purpose: 'reconcile',
      files: [{ path: '/etc/ref', content: { secretRef: { name: 'ref', key: 'k' } } }],
    });
    for (const n of ['osc-0', 'osc-1', 'osc-2', 'with-ref']) await api.waitReady(ns, n);
    // A node that follows osc-1 and applied it: counted once, then quiet.
    const node = `steady-${ns}`;
    const nodePath = `/apis/oscar.dev/v1alpha1/operatingsystemconfignodes/${node}`;
    const T = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    await api.http.request('POST', '/apis/oscar.dev/v1alpha1/operatingsystemconfignodes', {
      body: {
        apiVersion: 'oscar.dev/v1alpha1',
        kind: 'OperatingSystemConfigNode',
        metadata: { name: node },
      },
    });
    onTestFinished(async () => {
      await api.http.request('DELETE', nodePath);
    });
    const report = (lastAppliedTime: string, checksum: string) =>
      api.http.request('PATCH', `${nodePath}/status`, {
        contentType: CONTENT_MERGE_PATCH,
        body: {
          status: {
            oscRef: { namespace: ns, name: 'osc-1' },
            appliedChecksum: checksum,
            lastAppliedTime,
            conditions: [
              {
                type: 'Degraded',
                status: 'False',
                reason: 'Applied',
                message: 'ok',
                lastTransitionTime: T,
              },
            ],
          },
        },
      });
    const sum1 = (await api.getOsc(ns, 'osc-1'))?.status?.checksum ?? '';
    await report(T, sum1);
    await waitFor('osc-1 counts its node', async () => {
      const n = (await api.getOsc(ns, 'osc-1'))?.status?.nodes;
      return n?.total === 1 && n.updated === 1 && n.degraded === 0;
    });
    await sleep(1000); // let the echoes of our own writes settle

    const events: string[] = [];
    const abort = new AbortController();
    const watch = (path: string): Promise<void> =>
      api.http
        .stream(
          path,
          { query: { watch: 1, resourceVersion: '0' }, signal: abort.signal },
          (line) => {
            const e = JSON.parse(line) as { type: string; object: { metadata: { name: string } } };
            // resourceVersion=0 starts with ADDED for what exists; anything after is a write.
            events.push(`${e.type} ${e.object.metadata.name}`);
          },
        )
        .catch(() => undefined);
    const writesBefore = await handle.metrics.writes.get();
    const initial = { n: 0 };
    const w1 = watch(`/api/v1/namespaces/${ns}/secrets`);
    const w2 = watch(`/apis/oscar.dev/v1alpha1/namespaces/${ns}/operatingsystemconfigs`);
    await sleep(500);
    initial.n = events.length;
    expect(events.slice(0, initial.n).every((e) => e.startsWith('ADDED'))).toBe(true);
    // A report that moves nothing the counts read (a later lastAppliedTime) writes nothing.
    await sleep(2_000);
    await report(new Date(Date.now() + 60_000).toISOString().replace(/\.\d+Z$/, 'Z'), sum1);
    await sleep(8_000);
    abort.abort();
    await Promise.all([w1, w2]);
    expect(events.slice(initial.n)).toEqual([]);
    const writesAfter = await handle.metrics.writes.get();
    expect(writesAfter.values.reduce((a, v) => a + v.value, 0)).toBe(
      writesBefore.values.reduce((a, v) => a + v.value, 0),
    );
  });
});
