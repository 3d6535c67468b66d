import { describe, expect, it } from 'vitest';
import type { DataObject, KubeObject } from '../kube/types.js';
import { ReferencedSecrets } from './referenced-secrets.js';

function secret(name: string, uid: string, rv: string, value: string): DataObject {
  return {
    metadata: { name, namespace: 'ns', uid, resourceVersion: rv },
    data: { k: Buffer.from(value).toString('base64') },
  };
}

/** A stand-in API: the stored Secrets, the watched metadata, the OSCs' references, the GETs. */
function setup() {
  const stored = new Map<string, DataObject>();
  const watched = new Map<string, KubeObject>();
  const used = new Set<string>();
  const reads: string[] = [];
  const refs = new ReferencedSecrets({
    reader: {
      read: (_ns, name) => {
        reads.push(name);
        return Promise.resolve(stored.get(name));
      },
    },
    meta: (_ns, name) => watched.get(name),
    used: (_ns, name) => used.has(name),
  });
  const put = (s: DataObject): void => {
    stored.set(s.metadata.name, s);
    watched.set(s.metadata.name, { metadata: s.metadata });
  };
  return { stored, watched, used, reads, refs, put };
}

const valueOf = (s: DataObject | undefined): string | undefined =>
  s?.data?.k === undefined ? undefined : Buffer.from(s.data.k, 'base64').toString();

describe('ReferencedSecrets', () => {
  it('reads a referenced Secret once per version the watch shows', async () => {
    const { refs, reads, used, put } = setup();
    used.add('join');
    put(secret('join', 'u1', '1', 'one'));
    await refs.load('ns', ['join']);
    await refs.load('ns', ['join']);
    expect(valueOf(refs.get('ns', 'join'))).toBe('one');
    expect(reads).toEqual(['join']);
    put(secret('join', 'u1', '2', 'two'));
    await refs.load('ns', ['join']);
    expect(valueOf(refs.get('ns', 'join'))).toBe('two');
    expect(refs.get('ns', 'join')?.metadata.resourceVersion).toBe('2');
    expect(reads).toEqual(['join', 'join']);
  });

  it('a Secret the watch has not shown is missing and not read', async () => {
    const { refs, reads, used, stored } = setup();
    used.add('late');
    stored.set('late', secret('late', 'u1', '1', 'x'));
    await refs.load('ns', ['late']);
    expect(refs.get('ns', 'late')).toBeUndefined();
    expect(reads).toEqual([]);
  });

  it('a Secret deleted and made again (new uid) is not served from the old read', async () => {
    const { refs, watched, used, put } = setup();
    used.add('s');
    put(secret('s', 'u1', '1', 'old'));
    await refs.load('ns', ['s']);
    watched.set('s', { metadata: { name: 's', namespace: 'ns', uid: 'u2', resourceVersion: '5' } });
    expect(refs.get('ns', 's')).toBeUndefined();
    put(secret('s', 'u2', '5', 'new'));
    await refs.load('ns', ['s']);
    expect(valueOf(refs.get('ns', 's'))).toBe('new');
  });

  it('a GET that finds nothing (deleted meanwhile) leaves the Secret missing', async () => {
    const { refs, stored, used, put } = setup();
    used.add('gone');
    put(secret('gone', 'u1', '1', 'x'));
    stored.delete('gone');
    await refs.load('ns', ['gone']);
    expect(refs.get('ns', 'gone')).toBeUndefined();
  });

  it('shares one GET among renders at once; keeps nothing no OSC references', async () => {
    const { refs, reads, used, put } = setup();
    put(secret('a', 'u1', '1', 'x'));
    used.add('a');
    await Promise.all([refs.load('ns', ['a']), refs.load('ns', ['a'])]);
    expect(reads).toEqual(['a']);
    expect(refs.size).toBe(1);
    refs.drop('ns', 'a');
    expect(refs.size).toBe(0);
    used.delete('a');
    await refs.load('ns', ['a']);
    expect(refs.size).toBe(0);
  });

  it('a failed GET rejects (the reconcile retries) and keeps nothing', async () => {
    const refs = new ReferencedSecrets({
      reader: { read: () => Promise.reject(new Error('503')) },
      meta: () => ({ metadata: { name: 'a', uid: 'u', resourceVersion: '1' } }),
      used: () => true,
    });
    await expect(refs.load('ns', ['a'])).rejects.toThrow('503');
    expect(refs.size).toBe(0);
  });
});
