// The Secret source over an in-memory HTTP seam: which config a payload names (oscar.dev/osc)
// reaches onOscRef before the payload itself, once per change, never from a refused payload;
// after a reported failure, a healthy Secret is announced by delivering the last payload again.
import { KubeConfig } from '@kubernetes/client-node';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ANNOTATION_CHECKSUM, encodeConfigData, LABEL_OSC } from '../api/secret.js';
import type { KubeHttp, RequestSpec } from '../kube/client.js';
import { oscRefOf, SecretSource, type OscRef } from './source-secret.js';
import { config, desiredOf, file, unit } from './testing/fixtures.js';

interface Secret {
  metadata: {
    name: string;
    resourceVersion: string;
    annotations: Record<string, string>;
    labels?: Record<string, string>;
  };
  data: Record<string, string>;
}

function secretFor(
  version: string,
  label: string | undefined,
  checksum?: string,
  path = '/etc/a.conf',
): Secret {
  const d = desiredOf(config([unit('a.service')], [file(path, `v${version}\n`)]));
  const data = Object.fromEntries(
    Object.entries(encodeConfigData(d.bytes)).map(([k, v]) => [k, v.toString('base64')]),
  );
  return {
    metadata: {
      name: 's',
      resourceVersion: version,
      annotations: { [ANNOTATION_CHECKSUM]: checksum ?? d.checksum },
      ...(label ? { labels: { [LABEL_OSC]: label } } : {}),
    },
    data,
  };
}

/** Serves one Secret; the watch delivers what `emit` sends until the source stops. */
class FakeHttp implements KubeHttp {
  private onLine: ((line: string) => void) | undefined;
  /** Watches that fail at once (connection refused) before one stays open. */
  failingStreams = 0;
  constructor(public secret: Secret) {}
  request<T>(_method: string, path: string): Promise<T> {
    if (path.endsWith('/secrets')) {
      return Promise.resolve({ metadata: { resourceVersion: '1' }, items: [this.secret] } as T);
    }
    return Promise.resolve(this.secret as T);
  }
  stream(_path: string, spec: RequestSpec, onLine: (line: string) => void): Promise<void> {
    if (this.failingStreams > 0) {
      this.failingStreams--;
      return Promise.reject(new Error('connect ECONNREFUSED'));
    }
    this.onLine = onLine;
    return new Promise((resolve) =>
      spec.signal?.addEventListener('abort', () => {
        resolve();
      }),
    );
  }
  emit(secret: Secret): void {
    this.secret = secret;
    this.onLine?.(JSON.stringify({ type: 'MODIFIED', object: secret }));
  }
  bookmark(): void {
    this.onLine?.(
      JSON.stringify({ type: 'BOOKMARK', object: { metadata: { resourceVersion: '99' } } }),
    );
  }
  get watching(): boolean {
    return this.onLine !== undefined;
  }
}

const sources: SecretSource[] = [];
afterEach(async () => {
  for (const s of sources.splice(0)) await s.stop();
});

async function follow(first: Secret, failingStreams = 0) {
  const http = new FakeHttp(first);
  http.failingStreams = failingStreams;
  const seen: string[] = [];
  const source = new SecretSource(new KubeConfig(), {
    namespace: 'ns',
    name: 's',
    pollIntervalMs: 3_600_000,
    http,
    backoffBaseMs: 1,
    onOscRef: (r: OscRef) => seen.push(`osc ${r.namespace}/${r.name}`),
  });
  sources.push(source);
  await source.start({
    onDesired: (d) => seen.push(`desired ${d.checksum.slice(0, 6)}`),
    onError: (e) => seen.push(`error ${e.name}`),
  });
  await new Promise((r) => setTimeout(r, 0)); // the watch loop's list
  return { http, seen, source };
}

describe('oscRefOf', () => {
  it('reads the oscar.dev/osc label, in the Secret namespace', () => {
    expect(oscRefOf(secretFor('1', 'web'), 'ns')).toEqual({ namespace: 'ns', name: 'web' });
    expect(oscRefOf(secretFor('1', undefined), 'ns')).toBeUndefined();
    expect(oscRefOf({}, 'ns')).toBeUndefined();
  });
});

describe('SecretSource oscRef', () => {
  it('names the config before delivering its payload, once per change', async () => {
    const v1 = secretFor('1', 'web');
    const { http, seen, source } = await follow(v1);
    const c1 = v1.metadata.annotations[ANNOTATION_CHECKSUM]?.slice(0, 6) ?? '';
    expect(seen).toEqual(['osc ns/web', `desired ${c1}`]);
    expect(source.oscRef).toEqual({ namespace: 'ns', name: 'web' });

    const v2 = secretFor('2', 'web');
    http.emit(v2);
    const c2 = v2.metadata.annotations[ANNOTATION_CHECKSUM]?.slice(0, 6) ?? '';
    expect(seen.slice(2)).toEqual([`desired ${c2}`]); // same config: not named again

    const v3 = secretFor('3', 'db');
    http.emit(v3);
    expect(seen.slice(3, 4)).toEqual(['osc ns/db']);
  });

  it('a refused payload names nothing; a Secret without the label names nothing', async () => {
    const { http, seen, source } = await follow(secretFor('1', 'web', 'f'.repeat(64)));
    expect(seen).toEqual(['error CorruptPayloadError']);
    expect(source.oscRef).toBeUndefined();
    http.emit(secretFor('2', undefined));
    expect(seen).toHaveLength(2);
    expect(seen[1]).toMatch(/^desired /);
    expect(source.oscRef).toBeUndefined();
  });
});

describe('SecretSource and what a Secret says', () => {
  it('an intact Secret whose config oscar validate would refuse is refused as InvalidConfig, naming the field', async () => {
    const errors: Error[] = [];
    const http = new FakeHttp(secretFor('1', 'web', undefined, '/../../etc/cron.d/x'));
    const source = new SecretSource(new KubeConfig(), {
      namespace: 'ns',
      name: 's',
      pollIntervalMs: 3_600_000,
      http,
      backoffBaseMs: 1,
    });
    sources.push(source);
    const delivered: string[] = [];
    await source.start({
      onDesired: (d) => delivered.push(d.checksum),
      onError: (e) => errors.push(e),
    });
    await new Promise((r) => setTimeout(r, 0));
    expect(delivered).toEqual([]);
    expect(errors.map((e) => e.name)).toEqual(['InvalidConfigError']);
    expect(errors[0]?.message).toMatch(
      /the config from Secret ns\/s is invalid, so it is not applied .*\n {2}spec\.files\[0\]\.path: must not contain "\.\." segments/,
    );
    // a good one afterwards is delivered as usual
    http.emit(secretFor('2', 'web'));
    expect(delivered).toHaveLength(1);
  });
});

describe('SecretSource after a failure', () => {
  const sum = (s: Secret): string => s.metadata.annotations[ANNOTATION_CHECKSUM]?.slice(0, 6) ?? '';

  it('a refused Secret repaired to the same good payload: that payload is delivered again', async () => {
    const v1 = secretFor('1', 'web');
    const { http, seen } = await follow(v1);
    const bad = secretFor('2', 'web', 'f'.repeat(64));
    http.emit(bad);
    http.bookmark(); // the watch works, but the Secret is still bad: nothing to announce
    expect(seen.slice(2)).toEqual(['error CorruptPayloadError']);
    http.emit({ ...v1, metadata: { ...v1.metadata, resourceVersion: '3' } });
    expect(seen.slice(3)).toEqual([`desired ${sum(v1)}`]);
    http.bookmark(); // once only
    expect(seen).toHaveLength(4);
  });

  it('a broken watch: once it works again (a bookmark), the last payload is delivered again', async () => {
    const v1 = secretFor('1', 'web');
    const { http, seen } = await follow(v1, 1);
    await vi.waitFor(() => {
      expect(http.watching).toBe(true);
    });
    expect(seen).toEqual(['osc ns/web', `desired ${sum(v1)}`, 'error Error']);
    http.bookmark();
    expect(seen.slice(3)).toEqual([`desired ${sum(v1)}`]);
    http.bookmark();
    expect(seen).toHaveLength(4);
  });
});
