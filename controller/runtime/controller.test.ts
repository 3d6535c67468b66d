import { describe, expect, it } from 'vitest';
import { createLogger } from '../../log/logger.js';
import { Informer, type ListPage, type ListWatchSource } from '../kube/informer.js';
import type { KubeObject } from '../kube/types.js';
import { ControllerRuntime, controllerQueue } from './controller.js';

/** A source whose list answers when `release` is called; its watch waits until stopped. */
function gatedSource(items: KubeObject[]) {
  let release: () => void = () => undefined;
  const listed = new Promise<void>((r) => (release = r));
  const source: ListWatchSource<KubeObject> = {
    list: async (): Promise<ListPage<KubeObject>> => {
      await listed;
      return { items, metadata: { resourceVersion: '1' } };
    },
    watch: (_rv, _on, signal) =>
      new Promise<void>((resolve) => {
        signal.addEventListener('abort', () => {
          resolve();
        });
      }),
  };
  return { source, release };
}

const silent = createLogger({ component: 'test', level: 'silent' });

describe('ControllerRuntime', () => {
  it('runs no reconcile before every cache is synced, then works the queue; stop ends both', async () => {
    const a = gatedSource([{ metadata: { name: 'a', namespace: 'ns', resourceVersion: '1' } }]);
    const b = gatedSource([]);
    const handled: string[] = [];
    const queue = controllerQueue(
      { concurrency: 2, baseDelayMs: 10, maxDelayMs: 100 },
      {},
      undefined,
    );
    const informers = [
      new Informer(
        a.source,
        {
          onAdd: (o) => {
            queue.add(o.metadata.name);
          },
        },
        { name: 'a' },
      ),
      new Informer(b.source, {}, { name: 'b' }),
    ];
    const runtime = new ControllerRuntime({
      queue,
      handle: (key) => {
        handled.push(key);
        return Promise.resolve(undefined);
      },
      log: silent,
      informers: () => informers,
    });
    const started = runtime.start();
    a.release();
    await informers[0]?.waitForSync();
    await new Promise((r) => setTimeout(r, 20));
    expect(runtime.synced).toBe(false);
    expect(handled).toEqual([]); // queued, but b is not listed yet
    b.release();
    await started;
    expect(runtime.synced).toBe(true);
    await queue.idle();
    expect(handled).toEqual(['a']);
    await runtime.stop();
    queue.add('after-stop');
    await queue.idle();
    expect(handled).toEqual(['a']);
  });

  it("with no informers of its own (reading another controller's caches) is synced at start", async () => {
    const queue = controllerQueue(
      { concurrency: 1, baseDelayMs: 10, maxDelayMs: 100 },
      {},
      undefined,
    );
    const runtime = new ControllerRuntime({
      queue,
      handle: () => Promise.resolve(undefined),
      log: silent,
      informers: () => [],
    });
    expect(runtime.synced).toBe(false);
    await runtime.start();
    expect(runtime.synced).toBe(true);
    await runtime.stop();
  });
});
