import { describe, expect, it } from 'vitest';
import { ApiError } from '../../kube/client.js';
import { Informer, type ListPage, type ListWatchSource, type WatchEvent } from './informer.js';
import type { KubeObject } from './types.js';

const obj = (name: string, rv: string): KubeObject => ({
  metadata: { name, namespace: 'ns', resourceVersion: rv },
});

/** A scripted source: each watch call takes the next script step. */
function scripted(
  lists: ListPage<KubeObject>[],
  watches: ((emit: (e: WatchEvent<KubeObject>) => void) => Promise<void>)[],
) {
  const watchedFrom: string[] = [];
  let listCalls = 0;
  const source: ListWatchSource<KubeObject> = {
    list: () => {
      const page = lists[Math.min(listCalls, lists.length - 1)];
      listCalls++;
      if (!page) throw new Error('no list scripted');
      return Promise.resolve(page);
    },
    watch: async (rv, onEvent, signal) => {
      watchedFrom.push(rv);
      const step = watches.shift();
      if (!step) {
        // Block until stopped.
        await new Promise<void>((resolve) => {
          signal.addEventListener('abort', () => {
            resolve();
          });
        });
        return;
      }
      await step(onEvent);
    },
  };
  return { source, watchedFrom, listCalls: () => listCalls };
}

function recorder() {
  const events: string[] = [];
  return {
    events,
    handlers: {
      onAdd: (o: KubeObject) =>
        events.push(`add ${o.metadata.name}@${o.metadata.resourceVersion ?? ''}`),
      onUpdate: (_: KubeObject, o: KubeObject) =>
        events.push(`update ${o.metadata.name}@${o.metadata.resourceVersion ?? ''}`),
      onDelete: (o: KubeObject) => events.push(`delete ${o.metadata.name}`),
    },
  };
}

const until = async (cond: () => boolean): Promise<void> => {
  for (let i = 0; i < 200 && !cond(); i++) await new Promise((r) => setTimeout(r, 5));
  expect(cond()).toBe(true);
};

describe('Informer', () => {
  it('lists, then watches from the list resourceVersion, following bookmarks', async () => {
    const s = scripted(
      [{ items: [obj('a', '1')], metadata: { resourceVersion: '10' } }],
      [
        (emit) => {
          emit({ type: 'ADDED', object: obj('b', '11') });
          emit({ type: 'MODIFIED', object: obj('a', '12') });
          emit({ type: 'BOOKMARK', object: obj('', '20') });
          return Promise.resolve();
        },
      ],
    );
    const r = recorder();
    const inf = new Informer(s.source, r.handlers, { name: 't', backoffBaseMs: 1 });
    inf.start();
    await inf.waitForSync();
    await until(() => s.watchedFrom.length === 2);
    expect(s.watchedFrom).toEqual(['10', '20']);
    expect(r.events).toEqual(['add a@1', 'add b@11', 'update a@12']);
    expect(inf.get('ns', 'a')?.metadata.resourceVersion).toBe('12');
    await inf.stop();
  });

  it('relists on 410 Gone and reports what changed while it was away', async () => {
    const s = scripted(
      [
        { items: [obj('a', '1'), obj('b', '2')], metadata: { resourceVersion: '10' } },
        { items: [obj('a', '1'), obj('c', '30')], metadata: { resourceVersion: '31' } },
      ],
      [
        (emit) => {
          emit({
            type: 'ERROR',
            object: { code: 410, metadata: { name: '' } } as unknown as KubeObject,
          });
          return Promise.resolve();
        },
      ],
    );
    const r = recorder();
    const inf = new Informer(s.source, r.handlers, { name: 't', backoffBaseMs: 1 });
    inf.start();
    await until(() => s.watchedFrom.length === 2);
    expect(s.listCalls()).toBe(2);
    expect(s.watchedFrom).toEqual(['10', '31']);
    expect(r.events).toEqual(['add a@1', 'add b@2', 'add c@30', 'delete b']);
    expect(
      inf
        .list()
        .map((o) => o.metadata.name)
        .sort(),
    ).toEqual(['a', 'c']);
    await inf.stop();
  });

  it('reconnects with backoff after connection errors, resuming from the last resourceVersion', async () => {
    const errors: number[] = [];
    const s = scripted(
      [{ items: [], metadata: { resourceVersion: '5' } }],
      [
        () => Promise.reject(new Error('ECONNREFUSED')),
        () => Promise.reject(new Error('ECONNREFUSED')),
        (emit) => {
          emit({ type: 'ADDED', object: obj('x', '6') });
          return Promise.resolve();
        },
      ],
    );
    const r = recorder();
    const inf = new Informer(s.source, r.handlers, {
      name: 't',
      backoffBaseMs: 1,
      onError: (_, attempt) => errors.push(attempt),
    });
    inf.start();
    await until(() => s.watchedFrom.length === 4);
    expect(errors).toEqual([1, 2]);
    expect(s.listCalls()).toBe(1);
    expect(s.watchedFrom).toEqual(['5', '5', '5', '6']);
    expect(r.events).toEqual(['add x@6']);
    await inf.stop();
  });

  it('treats a 410 answer to the watch request itself as a relist', async () => {
    const s = scripted(
      [{ items: [], metadata: { resourceVersion: '5' } }],
      [() => Promise.reject(new ApiError(410, 'Expired', 'too old'))],
    );
    const inf = new Informer(s.source, {}, { name: 't', backoffBaseMs: 1 });
    inf.start();
    await until(() => s.listCalls() === 2);
    await inf.stop();
  });
});
