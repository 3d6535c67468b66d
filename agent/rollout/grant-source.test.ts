// The grant source against a scripted API: what it fetches, what it refuses, how its watch is
// restarted for the connectivity proof. (The real API server: test/integration/rollout*.test.ts.)
import { describe, expect, it } from 'vitest';
import { ANNOTATION_CHECKSUM, encodeConfigData, LABEL_OSC } from '../../api/secret.js';
import { ApiError, type KubeHttp, type RequestSpec } from '../../kube/client.js';
import { config, desiredOf, file } from '../testing/fixtures.js';
import { GrantSource, type GrantedDesired } from './grant-source.js';

const d1 = desiredOf(config([], [file('/etc/a', '1')]));

function secret(checksum = d1.checksum, osc = 'w', bytes = d1.bytes) {
  return {
    metadata: { labels: { [LABEL_OSC]: osc }, annotations: { [ANNOTATION_CHECKSUM]: checksum } },
    data: Object.fromEntries(
      Object.entries(encodeConfigData(bytes)).map(([k, v]) => [k, v.toString('base64')]),
    ),
  };
}

function nodeObj(rv: number, generation: number, checksum = d1.checksum) {
  return {
    metadata: { name: 'n1', resourceVersion: String(rv), generation },
    spec: {
      revision: {
        namespace: 'ns',
        osc: 'w',
        number: generation,
        secretName: 'oscar-w-rev-0',
        checksum,
        grantedTime: new Date().toISOString(),
      },
    },
  };
}

class Api implements KubeHttp {
  requests: string[] = [];
  node: unknown = nodeObj(10, 1);
  secrets = new Map<string, unknown>([['oscar-w-rev-0', secret()]]);
  private lines: ((line: string) => void)[] = [];
  private ends: (() => void)[] = [];

  request<T>(method: string, path: string, spec?: RequestSpec): Promise<T> {
    this.requests.push(`${method} ${path}${spec?.query?.fieldSelector ? ' (list)' : ''}`);
    if (path.includes('/secrets/') && this.failSecrets > 0) {
      this.failSecrets--;
      return Promise.reject(new Error('socket hang up'));
    }
    if (path.includes('/secrets/')) {
      const s = this.secrets.get(path.slice(path.lastIndexOf('/') + 1));
      return s ? Promise.resolve(s as T) : Promise.reject(new ApiError(404, 'NotFound', 'gone'));
    }
    if (spec?.query?.fieldSelector) {
      return Promise.resolve({ metadata: { resourceVersion: '10' }, items: [this.node] } as T);
    }
    if (this.failGets > 0) {
      this.failGets--;
      return Promise.reject(new Error('socket hang up'));
    }
    return Promise.resolve(this.node as T);
  }

  /** The next GETs of the node object fail (the first read at start, a poll). */
  failGets = 0;
  /** The next watches fail at once (the connection drops). */
  failWatches = 0;
  /** The next revision fetches fail (the connection drops). */
  failSecrets = 0;

  stream(_path: string, spec: RequestSpec, onLine: (line: string) => void): Promise<void> {
    this.requests.push(`WATCH from ${String(spec.query?.resourceVersion)}`);
    if (this.failWatches > 0) {
      this.failWatches--;
      return Promise.reject(new Error('socket hang up'));
    }
    return new Promise((resolve, reject) => {
      this.lines.push(onLine);
      this.ends.push(resolve);
      spec.signal?.addEventListener('abort', () => {
        reject(new Error('aborted'));
      });
    });
  }

  emit(obj: unknown, type = 'MODIFIED'): void {
    for (const l of this.lines) l(JSON.stringify({ type, object: obj }));
  }
}

async function until<T>(f: () => T | undefined, what: string): Promise<T> {
  const t = Date.now() + 3000;
  for (;;) {
    const v = f();
    if (v !== undefined) return v;
    if (Date.now() > t) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

function start(api: Api) {
  const got: GrantedDesired[] = [];
  const errors: string[] = [];
  const recovered: string[] = [];
  const source = new GrantSource({
    namespace: 'ns',
    osc: 'w',
    node: 'n1',
    http: api,
    pollIntervalMs: 60_000,
    backoffBaseMs: 20,
  });
  const started = source.start({
    onGrant: (g) => got.push(g),
    onError: (e) => errors.push(e.message),
    onRecovered: (e) => recovered.push(e.message),
  });
  return { source, got, errors, recovered, started };
}

describe('GrantSource', () => {
  it('a watch that failed and answers again says so once, with the error it reported (issue 25: a Degraded left behind held a rollout place)', async () => {
    const api = new Api();
    api.failWatches = 2;
    const { source, got, errors, recovered, started } = start(api);
    await started;
    await until(() => got[0], 'the grant');
    await until(() => errors[0], 'the watch failure');
    expect(errors).toEqual(['socket hang up']); // reported once, however often it failed
    expect(recovered).toEqual([]);
    await until(
      () => (api.requests.filter((r) => r.startsWith('WATCH')).length >= 3 ? true : undefined),
      'the watch reopened',
    );
    api.emit({ metadata: { resourceVersion: '12' } }, 'BOOKMARK');
    await until(() => recovered[0], 'the recovery');
    api.emit({ metadata: { resourceVersion: '13' } }, 'BOOKMARK');
    expect(recovered).toEqual(['socket hang up']);
    expect(got).toHaveLength(1); // the same grant, not fetched again
    await source.stop();
  });

  it('a first read at start that failed, then a watch that answers: the recovery is said (seen in the e2e: a socket hang up right after a reboot left the node Degraded, which held the rollout)', async () => {
    const api = new Api();
    api.failGets = 1;
    const { source, got, errors, recovered, started } = start(api);
    await started;
    expect(errors).toEqual(['socket hang up']);
    await until(() => got[0], 'the grant, from the watch');
    await until(() => recovered[0], 'the recovery');
    expect(recovered).toEqual(['socket hang up']);
    await source.stop();
  });

  it('fetches the granted revision once, verified; an unchanged grant fetches nothing', async () => {
    const api = new Api();
    const { source, got, started } = start(api);
    await started;
    await until(() => got[0], 'the grant');
    expect(got[0]?.desired.checksum).toBe(d1.checksum);
    expect(got[0]?.grant.generation).toBe(1);
    api.emit({ ...nodeObj(11, 1), status: { phase: 'x' } }); // our own status write: same grant
    await new Promise((r) => setTimeout(r, 50));
    expect(got).toHaveLength(1);
    expect(api.requests.filter((r) => r.includes('/secrets/'))).toHaveLength(1);
    await source.stop();
  });

  it('the list that (re)starts the watch counts as seen: a status write at or before its version is proven without a watch event', async () => {
    const api = new Api(); // the list answers at resourceVersion 10
    const { source, started } = start(api);
    await started;
    let proven = false;
    void source.waitForVersion('10').then(() => {
      proven = true;
    });
    await until(() => (proven ? true : undefined), 'the write at 10 seen through the list');
    let later = false;
    void source.waitForVersion('11').then(() => {
      later = true;
    });
    await new Promise((r) => setTimeout(r, 50));
    expect(later).toBe(false); // a write after the list needs the watch
    api.emit(nodeObj(11, 1));
    await until(() => (later ? true : undefined), 'the write at 11 through the watch');
    await source.stop();
  });

  it('a revision fetch that failed and then succeeded says so, with the last error it reported', async () => {
    const api = new Api();
    api.failSecrets = 1;
    const { source, got, errors, recovered, started } = start(api);
    await started;
    await until(() => got[0], 'the grant, fetched on the retry');
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/^revision 1 \(oscar-w-rev-0\): socket hang up; retrying in/);
    expect(recovered).toEqual(errors);
    await source.stop();
  });

  it('refuses a revision Secret that is not the granted one, and retries while the grant holds', async () => {
    const api = new Api();
    api.secrets.set('oscar-w-rev-0', secret('b'.repeat(64)));
    const { source, got, errors, started } = start(api);
    await started;
    await until(() => errors.find((e) => e.includes('the slot was reused')), 'the refusal');
    api.secrets.set('oscar-w-rev-0', secret('c'.repeat(64), 'other'));
    await until(
      () => errors.find((e) => e.includes('is not a revision of w')),
      'the label refusal',
    );
    api.secrets.set('oscar-w-rev-0', secret());
    await until(() => got[0], 'the grant after the fix');
    await source.stop();
  });

  it("refuses an intact revision that breaks oscar validate's rules, as InvalidConfig, once", async () => {
    // correctly checksummed, but a path oscar validate refuses: whoever wrote the Secret
    const bad = desiredOf(config([], [file('/etc/../root/.ssh/authorized_keys', 'k')]));
    const api = new Api();
    api.node = nodeObj(10, 1, bad.checksum);
    api.secrets.set('oscar-w-rev-0', secret(bad.checksum, 'w', bad.bytes));
    const errors: Error[] = [];
    const got: GrantedDesired[] = [];
    const source = new GrantSource({
      namespace: 'ns',
      osc: 'w',
      node: 'n1',
      http: api,
      pollIntervalMs: 60_000,
      backoffBaseMs: 20,
    });
    await source.start({ onGrant: (g) => got.push(g), onError: (e) => errors.push(e) });
    await until(() => errors[0], 'the refusal');
    await new Promise((r) => setTimeout(r, 200)); // a retry would come within 20-40 ms
    expect(errors).toHaveLength(1);
    expect(errors[0]?.name).toBe('InvalidConfigError');
    expect(errors[0]?.message).toMatch(
      /the config from revision 1 \(oscar-w-rev-0\) is invalid, so it is not applied[\s\S]*spec\.files\[0\]\.path/,
    );
    expect(got).toEqual([]);
    expect(api.requests.filter((r) => r.includes('/secrets/'))).toHaveLength(1);
    await source.stop();
  });

  it('refuses a grant for another namespace once, and fetches nothing for it', async () => {
    const api = new Api();
    api.node = {
      ...nodeObj(10, 2),
      spec: { revision: { ...nodeObj(10, 2).spec.revision, namespace: 'x' } },
    };
    const { source, got, errors, started } = start(api);
    await started;
    await until(() => errors[0], 'the refusal');
    expect(errors[0]).toMatch(/refusing the grant of node n1: spec.revision names namespace x/);
    expect(got).toEqual([]);
    expect(api.requests.some((r) => r.includes('/secrets/'))).toBe(false);
    await source.stop();
  });

  it('restartWatch reopens the watch at once from the last version; waitForVersion waits for an event', async () => {
    const api = new Api();
    const { source, started } = start(api);
    await started;
    await until(() => api.requests.find((r) => r.startsWith('WATCH')), 'the watch');
    api.emit(nodeObj(12, 1));
    source.restartWatch();
    await until(
      () => api.requests.filter((r) => r.startsWith('WATCH')).length === 2 || undefined,
      'a second watch',
    );
    expect(api.requests.filter((r) => r.startsWith('WATCH'))).toEqual([
      'WATCH from 10',
      'WATCH from 12',
    ]);
    let seen = false;
    void source.waitForVersion('15').then(() => (seen = true));
    await new Promise((r) => setTimeout(r, 30));
    expect(seen).toBe(false);
    api.emit(nodeObj(15, 1));
    await until(() => (seen ? true : undefined), 'the event');
    await source.stop();
  });
});
