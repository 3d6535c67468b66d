// The node reporter over an in-memory HTTP seam: what its status writes carry, and how many.
import { KubeConfig } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { ApiError, type KubeHttp, type RequestSpec } from '../kube/client.js';
import { InvalidConfigError } from '../api/validate-config.js';
import { ReplacementNeeded } from './apply.js';
import { KubeReporter } from './report.js';

class RecordingHttp implements KubeHttp {
  readonly requests: { method: string; path: string; body: unknown }[] = [];
  /** The node object is not there until POSTed. */
  constructor(private missing = false) {}
  request<T>(method: string, path: string, spec?: RequestSpec): Promise<T> {
    this.requests.push({ method, path, body: spec?.body });
    if (method === 'POST') this.missing = false;
    if (method === 'PATCH' && this.missing) {
      return Promise.reject(new ApiError(404, 'NotFound', 'not found'));
    }
    return Promise.resolve({} as T);
  }
  stream(): Promise<void> {
    return Promise.reject(new Error('no watches here'));
  }
  patches(): { status: Record<string, unknown> }[] {
    return this.requests
      .filter((r) => r.method === 'PATCH')
      .map((r) => r.body as { status: Record<string, unknown> });
  }
}

function reporter(http: RecordingHttp) {
  return new KubeReporter(new KubeConfig(), {
    node: 'n1',
    oscRef: { namespace: 'ns', secretName: 'oscar-web-reconcile' },
    http,
    now: () => new Date('2026-01-01T00:00:00Z'),
  });
}

describe('KubeReporter oscRef', () => {
  it('reports the config named by the source with the desired checksum, in one write', async () => {
    const http = new RecordingHttp();
    const r = reporter(http);
    r.setOscRef({ namespace: 'ns', name: 'web' });
    r.desired('a'.repeat(64));
    await r.flush();
    // the object exists (the identity approver made it): no create is tried
    expect(http.requests.map((q) => `${q.method} ${q.path}`)).toEqual([
      'PATCH /apis/oscar.dev/v1alpha1/operatingsystemconfignodes/n1/status',
    ]);
    expect(http.patches()[0]?.status).toMatchObject({
      oscRef: { namespace: 'ns', name: 'web', secretName: 'oscar-web-reconcile' },
      desiredChecksum: 'a'.repeat(64),
    });
  });

  it('creates its object only when the status write finds none, then writes', async () => {
    const http = new RecordingHttp(true);
    const r = reporter(http);
    r.setOscRef({ namespace: 'ns', name: 'web' });
    await r.flush();
    expect(http.requests.map((q) => `${q.method} ${q.path}`)).toEqual([
      'PATCH /apis/oscar.dev/v1alpha1/operatingsystemconfignodes/n1/status',
      'POST /apis/oscar.dev/v1alpha1/operatingsystemconfignodes',
      'PATCH /apis/oscar.dev/v1alpha1/operatingsystemconfignodes/n1/status',
    ]);
  });

  it('an unchanged oscRef writes nothing; a changed one is written', async () => {
    const http = new RecordingHttp();
    const r = reporter(http);
    r.setOscRef({ namespace: 'ns', name: 'web' });
    await r.flush();
    const before = http.requests.length;
    r.setOscRef({ namespace: 'ns', name: 'web' });
    await r.flush();
    expect(http.requests.length).toBe(before);
    r.setOscRef({ namespace: 'ns', name: 'db' });
    await r.flush();
    expect(http.patches().at(-1)?.status.oscRef).toEqual({
      namespace: 'ns',
      name: 'db',
      secretName: 'oscar-web-reconcile',
    });
  });
});

describe('KubeReporter oscRef after a switch to grant mode', () => {
  it('clears the Secret the node followed before (a merge patch keeps what it omits)', async () => {
    const http = new RecordingHttp();
    const r = new KubeReporter(new KubeConfig(), {
      node: 'n1',
      oscRef: { namespace: 'ns', name: 'web' }, // --osc: no Secret of its own
      http,
    });
    r.desired('b'.repeat(64));
    await r.flush();
    expect(http.patches().at(-1)?.status.oscRef).toEqual({
      namespace: 'ns',
      name: 'web',
      secretName: null,
    });
  });
});

describe('KubeReporter Degraded', () => {
  const c1 = '1'.repeat(64);
  const applied = { checksum: c1, actions: [], resumed: false, touchedUnits: [] };

  it('a source failure is over when the source delivers what is applied: Degraded=False', async () => {
    const http = new RecordingHttp();
    const r = reporter(http);
    r.desired(c1);
    r.applied(applied);
    r.sourceFailed(new Error('connect ECONNREFUSED'));
    await r.flush();
    const degraded = (): unknown =>
      (http.patches().at(-1)?.status.conditions as { type: string; status: string }[]).find(
        (c) => c.type === 'Degraded',
      )?.status;
    expect(degraded()).toBe('True');
    expect(http.patches().at(-1)?.status.lastError).toMatchObject({
      message: 'connect ECONNREFUSED',
    });

    r.desired(c1);
    await r.flush();
    expect(degraded()).toBe('False');
    expect(http.patches().at(-1)?.status.lastError).toBeNull(); // merge patch: removed
  });

  it('grant mode: the source answering again after that very error ends its Degraded; another error since does not', async () => {
    const http = new RecordingHttp();
    const r = reporter(http);
    const degraded = () =>
      (
        http.patches().at(-1)?.status.conditions as {
          type: string;
          status: string;
          reason: string;
        }[]
      ).find((c) => c.type === 'Degraded');
    r.desired(c1);
    r.applied(applied);
    const hangUp = new Error('socket hang up');
    r.sourceFailed(hangUp);
    await r.flush();
    expect(degraded()).toMatchObject({ status: 'True', reason: 'SourceUnavailable' });
    r.sourceRecovered(hangUp);
    await r.flush();
    expect(degraded()).toMatchObject({ status: 'False', reason: 'SourceAvailable' });
    expect(http.patches().at(-1)?.status.lastError).toBeNull();

    // a refused grant came after the watch failure: the recovery of the watch does not hide it
    r.sourceFailed(hangUp);
    r.sourceFailed(new Error('refusing the grant of node n1: bad'));
    r.sourceRecovered(hangUp);
    await r.flush();
    expect(degraded()).toMatchObject({
      status: 'True',
      message: 'refusing the grant of node n1: bad',
    });
  });

  it('a different payload, or an apply failure, stays Degraded until an apply says otherwise', async () => {
    const http = new RecordingHttp();
    const r = reporter(http);
    r.desired(c1);
    r.applied(applied);
    r.sourceFailed(new Error('connect ECONNREFUSED'));
    r.desired('2'.repeat(64));
    r.failed('2'.repeat(64), new Error('disk full'));
    r.desired(c1); // back to the applied one, but the failure was an apply's
    await r.flush();
    const status = http.patches().at(-1)?.status;
    const d = (status?.conditions as { type: string; status: string; reason: string }[]).find(
      (c) => c.type === 'Degraded',
    );
    expect(d).toMatchObject({ status: 'True', reason: 'ApplyFailed' });
  });

  it('a state the node cannot take in place is reported as ReplacementNeeded', async () => {
    const http = new RecordingHttp();
    const r = reporter(http);
    r.desired(c1);
    r.failed(c1, new ReplacementNeeded('spec.type changed from "debian" to "flatcar"'));
    await r.flush();
    const conditions = http.patches().at(-1)?.status.conditions as {
      type: string;
      status: string;
      reason: string;
      message: string;
    }[];
    expect(conditions.find((c) => c.type === 'Degraded')).toMatchObject({
      status: 'True',
      reason: 'ReplacementNeeded',
      message: 'spec.type changed from "debian" to "flatcar"',
    });
    expect(conditions.find((c) => c.type === 'Applied')).toMatchObject({
      status: 'False',
      reason: 'ReplacementNeeded',
    });
    expect(http.patches().at(-1)?.status.needsReplacement).toBe(true);
  });

  it('needsReplacement is set only for a state the node cannot take in place, and cleared by the next apply', async () => {
    const http = new RecordingHttp();
    const r = reporter(http);
    r.desired(c1);
    r.failed(c1, new Error('unit kubelet.service failed'));
    await r.flush();
    expect(http.patches().at(-1)?.status).not.toHaveProperty('needsReplacement');
    r.failed(c1, new ReplacementNeeded('spec.type changed from "debian" to "flatcar"'));
    await r.flush();
    expect(http.patches().at(-1)?.status.needsReplacement).toBe(true);
    r.desired(c1);
    r.applied(applied);
    await r.flush();
    // a merge patch: null removes the field from the stored status
    expect(http.patches().at(-1)?.status.needsReplacement).toBeNull();
  });
});

describe('KubeReporter rebootRequired', () => {
  it('is written when it changes, and cleared (null) when the node no longer asks', async () => {
    const http = new RecordingHttp();
    const r = reporter(http);
    r.setRebootRequired(false);
    await r.flush();
    expect(http.patches()).toHaveLength(0); // nothing new to say
    r.setRebootRequired(true);
    await r.flush();
    expect(http.patches().at(-1)?.status.rebootRequired).toBe(true);
    const writes = http.patches().length;
    r.setRebootRequired(true);
    await r.flush();
    expect(http.patches()).toHaveLength(writes);
    r.setRebootRequired(false);
    await r.flush();
    expect(http.patches().at(-1)?.status.rebootRequired).toBeNull();
  });
});

describe('KubeReporter InvalidConfig', () => {
  it('a refused config is Degraded with reason InvalidConfig, from the source or from an apply', async () => {
    const c1 = '1'.repeat(64);
    const invalid = new InvalidConfigError('Secret ns/s', [
      { path: 'spec.files[0].path', message: 'must not contain ".." segments' },
    ]);
    for (const report of [
      (r: KubeReporter) => {
        r.sourceFailed(invalid);
      },
      (r: KubeReporter) => {
        r.failed(c1, invalid);
      },
    ]) {
      const http = new RecordingHttp();
      const r = reporter(http);
      r.desired(c1);
      report(r);
      await r.flush();
      const status = http.patches().at(-1)?.status;
      const degraded = (
        status?.conditions as { type: string; reason: string; message: string }[]
      ).find((c) => c.type === 'Degraded');
      expect(degraded).toMatchObject({ status: 'True', reason: 'InvalidConfig' });
      expect(degraded?.message).toMatch(/spec\.files\[0\]\.path: must not contain/);
    }
  });
});

describe('KubeReporter after an agent restart', () => {
  const c1 = '1'.repeat(64);

  it('reports the restored checksum, and Applied when the source delivers that same state', async () => {
    const http = new RecordingHttp();
    const r = reporter(http);
    r.restored(c1);
    r.desired(c1); // equal to what is applied: the agent will not apply it again
    await r.flush();
    const status = http.patches().at(-1)?.status;
    expect(status).toMatchObject({ appliedChecksum: c1, desiredChecksum: c1 });
    const conditions = status?.conditions as { type: string; status: string }[];
    expect(conditions.map((c) => `${c.type}=${c.status}`)).toEqual([
      'Applied=True',
      'Degraded=False',
    ]);
  });

  it('a different desired state after a restore says nothing about Applied until it is applied', async () => {
    const http = new RecordingHttp();
    const r = reporter(http);
    r.restored(c1);
    r.desired('2'.repeat(64));
    await r.flush();
    const status = http.patches().at(-1)?.status;
    expect(status).toMatchObject({ appliedChecksum: c1, desiredChecksum: '2'.repeat(64) });
    expect(status?.conditions).toBeUndefined();
  });
});

describe('KubeReporter drift', () => {
  const item = (n: number, policy: 'Report' | 'Revert' = 'Report') => ({
    key: `path:/etc/f${String(n)}`,
    path: `/etc/f${String(n)}`,
    reason: 'content',
    expected: 'sha256:aaaaaaaaaaaa 0644 root:root',
    found: 'sha256:bbbbbbbbbbbb 0644 root:root',
    policy,
    since: new Date('2026-01-01T00:00:00.123Z'),
  });
  const events = (http: RecordingHttp) =>
    http.requests
      .filter((q) => q.path.includes('/events'))
      .map((q) => ({ path: q.path, body: q.body as Record<string, unknown> }));

  it('Drifted=True naming what differs, a bounded list in status.drift, a Warning Event regarding the OSC', async () => {
    const http = new RecordingHttp();
    const r = reporter(http);
    r.setOscRef({ namespace: 'ns', name: 'web' });
    const items = Array.from({ length: 20 }, (_, i) => item(i));
    r.drift({ items, added: items, resolved: [], trigger: 'watch', reverted: false });
    await r.flush();
    const status = http.patches().at(-1)?.status as {
      drift: { count: number; items: unknown[] };
      conditions: { type: string; status: string; reason: string; message: string }[];
    };
    expect(status.drift.count).toBe(20);
    expect(status.drift.items).toHaveLength(16);
    expect(status.drift.items[0]).toEqual({
      path: '/etc/f0',
      reason: 'content',
      expected: 'sha256:aaaaaaaaaaaa 0644 root:root',
      found: 'sha256:bbbbbbbbbbbb 0644 root:root',
      policy: 'Report',
      since: '2026-01-01T00:00:00Z',
    });
    const drifted = status.conditions.find((c) => c.type === 'Drifted');
    expect(drifted).toMatchObject({ status: 'True', reason: 'DriftDetected' });
    expect(drifted?.message).toMatch(
      /^20 path\(s\) and unit\(s\) differ from what was applied: \/etc\/f0: content \(expected sha256:a+ 0644 root:root, found sha256:b+ 0644 root:root; Report\); /,
    );
    expect(drifted?.message).toMatch(/; and 10 more$/);
    const [e] = events(http);
    expect(e?.path).toBe('/apis/events.k8s.io/v1/namespaces/ns/events');
    expect(e?.body).toMatchObject({
      type: 'Warning',
      reason: 'DriftDetected',
      action: 'Detect',
      reportingController: 'oscar.dev/agent',
      reportingInstance: 'n1',
      regarding: {
        apiVersion: 'oscar.dev/v1alpha1',
        kind: 'OperatingSystemConfig',
        namespace: 'ns',
        name: 'web',
      },
      related: { kind: 'OperatingSystemConfigNode', name: 'n1' },
      eventTime: '2026-01-01T00:00:00.000000Z',
      metadata: { name: expect.stringMatching(/^n1\.[0-9a-f]+$/) as string, namespace: 'ns' },
    });
    expect(Buffer.byteLength(String(e?.body.note))).toBeLessThanOrEqual(1024);
  });

  it('a revert: Drifted=False Reverted, a Normal Event; nothing drifted at all: NoDrift and an empty list', async () => {
    const http = new RecordingHttp();
    const r = reporter(http);
    const a = item(1, 'Revert');
    r.drift({ items: [a], added: [a], resolved: [], trigger: 'watch', reverted: false });
    r.drift({ items: [], added: [], resolved: [a], trigger: 'revert', reverted: true });
    await r.flush();
    const last = http.patches().at(-1)?.status as {
      drift: unknown;
      conditions: { type: string; status: string; reason: string; message: string }[];
    };
    expect(last.drift).toEqual({ count: 0, items: [] }); // a merge patch replaces the list
    expect(last.conditions.find((c) => c.type === 'Drifted')).toMatchObject({
      status: 'False',
      reason: 'Reverted',
      message: 'reverted: /etc/f1',
    });
    expect(events(http).map((e) => e.body.reason)).toEqual(['DriftDetected', 'DriftReverted']);
    // while every item is about to be reverted, the reason says so
    r.drift({ items: [a], added: [a], resolved: [], trigger: 'watch', reverted: false });
    await r.flush();
    expect(
      (http.patches().at(-1)?.status.conditions as { type: string; reason: string }[]).find(
        (c) => c.type === 'Drifted',
      )?.reason,
    ).toBe('Reverting');
    r.drift({ items: [], added: [], resolved: [], trigger: 'start', reverted: false });
    await r.flush();
    expect(
      (http.patches().at(-1)?.status.conditions as { type: string; reason: string }[]).find(
        (c) => c.type === 'Drifted',
      )?.reason,
    ).toBe('NoDrift');
  });

  it('sends at most 12 Events a minute: flapping drift cannot flood the API server', async () => {
    const http = new RecordingHttp();
    const r = reporter(http);
    for (let i = 0; i < 30; i++) {
      const a = item(i);
      r.drift({ items: [a], added: [a], resolved: [], trigger: 'watch', reverted: false });
    }
    await r.flush();
    expect(events(http)).toHaveLength(12);
  });

  // red-team round 3: a local user rewriting a declared file in /tmp makes a drift check every
  // debounce interval, each with another found hash
  it('drift that keeps changing writes the status once, then once per interval with the newest state', async () => {
    const http = new RecordingHttp();
    const r = reporter(http);
    const settle = () => new Promise((resolve) => setImmediate(resolve));
    for (let i = 0; i < 50; i++) {
      const a = item(i);
      r.drift({ items: [a], added: [a], resolved: [], trigger: 'watch', reverted: false });
      await settle(); // each write has completed before the next drift, as on a node
      await settle();
    }
    expect(http.patches()).toHaveLength(1);
    await r.flush();
    expect(http.patches()).toHaveLength(2);
    const status = http.patches().at(-1)?.status as { drift: { items: { path: string }[] } };
    expect(status.drift.items[0]?.path).toBe('/etc/f49');
    r.stop();
  });

  it('a node found clean again goes out at once; drift flapping with clean stays at two writes an interval', async () => {
    const http = new RecordingHttp();
    const r = reporter(http);
    const settle = async () => {
      await new Promise((resolve) => setImmediate(resolve));
      await new Promise((resolve) => setImmediate(resolve));
    };
    const drifted = (n: number) => {
      const a = item(n);
      r.drift({ items: [a], added: [a], resolved: [], trigger: 'watch', reverted: false });
    };
    const clean = () => {
      r.drift({ items: [], added: [], resolved: [], trigger: 'watch', reverted: true });
    };
    drifted(1);
    await settle();
    clean(); // the revert's report: not held back behind the interval
    await settle();
    expect(http.patches()).toHaveLength(2);
    expect(http.patches().at(-1)?.status).toMatchObject({ drift: { count: 0 } });
    // a Revert storm: drifted, reverted, drifted, reverted … within one interval
    for (let i = 2; i < 40; i++) {
      drifted(i);
      await settle();
      clean();
      await settle();
    }
    expect(http.patches()).toHaveLength(2);
    await r.flush();
    expect(http.patches()).toHaveLength(3);
    expect(http.patches().at(-1)?.status).toMatchObject({ drift: { count: 0 } });
    r.stop();
  });

  it('another write meanwhile carries the waiting drift (no write is held back behind it)', async () => {
    const http = new RecordingHttp();
    const r = reporter(http);
    const settle = () => new Promise((resolve) => setImmediate(resolve));
    for (const n of [1, 2]) {
      const a = item(n);
      r.drift({ items: [a], added: [a], resolved: [], trigger: 'watch', reverted: false });
      await settle();
      await settle();
    }
    r.desired('c'.repeat(64));
    await settle();
    await settle();
    expect(http.patches()).toHaveLength(2);
    expect(http.patches().at(-1)?.status).toMatchObject({
      desiredChecksum: 'c'.repeat(64),
      drift: { items: [{ path: '/etc/f2' }] },
    });
    r.stop();
  });
});
