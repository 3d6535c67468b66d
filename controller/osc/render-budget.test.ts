import { describe, expect, it } from 'vitest';
import type { ResolvedConfig } from '../../api/resolved.js';
import type { Pipeline, RenderOutput } from './pipeline.js';
import { budgetedPipeline, ByteBudget } from './render-budget.js';

/** Sizes scaled down 1,024 times (KiB for MiB): the budget counts bytes alike at any scale. */
const MiB = 1024;

function config(bytes: number): ResolvedConfig {
  return {
    type: 'ubuntu',
    purpose: 'reconcile',
    units: [],
    packages: [],
    files: [
      { path: '/opt/x', mode: 0o644, user: 'root', group: 'root', content: Buffer.alloc(bytes) },
    ],
  };
}

/** A renderer (a slow webhook, say) whose renders the test ends by hand, counting those in flight. */
function slowRenderer() {
  const pending: (() => void)[] = [];
  let inFlight = 0;
  let maxBytes = 0;
  let bytes = 0;
  const pipeline: Pipeline = {
    render: (c) => {
      const size = c.files.reduce((n, f) => n + f.content.length, 0);
      inFlight++;
      bytes += size;
      maxBytes = Math.max(maxBytes, bytes);
      return new Promise<RenderOutput>((resolve) => {
        pending.push(() => {
          inFlight--;
          bytes -= size;
          resolve({} as RenderOutput);
        });
      });
    },
  };
  return { pipeline, pending, inFlight: () => inFlight, maxBytes: () => maxBytes };
}

const flush = async () => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

describe('render budget: many large OSCs rendering at once (red-team round 3, amplification)', () => {
  it('sixteen 32 MiB renders at once hold at most the 64 MiB budget; the rest wait and then run', async () => {
    const slow = slowRenderer();
    const p = budgetedPipeline(slow.pipeline, { totalBytes: 64 * MiB, smallBytes: MiB });
    const all = Array.from({ length: 16 }, () =>
      p.render(config(32 * MiB), { name: 'a', namespace: 'big' }),
    );
    await flush();
    expect(slow.inFlight()).toBe(2);
    while (slow.pending.length > 0) {
      slow.pending.shift()?.();
      await flush();
    }
    await Promise.all(all);
    expect(slow.maxBytes()).toBe(64 * MiB);
  });

  it("small renders never wait for the large ones (another tenant's ordinary OSC)", async () => {
    const slow = slowRenderer();
    const p = budgetedPipeline(slow.pipeline, { totalBytes: 64 * MiB, smallBytes: MiB });
    for (let i = 0; i < 4; i++)
      void p.render(config(32 * MiB), { name: `big-${String(i)}`, namespace: 'big' });
    void p.render(config(10), { name: 'web', namespace: 'other' });
    await flush();
    expect(slow.inFlight()).toBe(3); // two large, and the small one at once
  });

  it('an OSC larger than the budget waits for all of it, then renders alone', async () => {
    const budget = new ByteBudget(64 * MiB);
    const first = await budget.acquire(10 * MiB);
    let got = false;
    void budget.acquire(100 * MiB).then(() => (got = true));
    await flush();
    expect(got).toBe(false);
    first();
    await flush();
    expect(got).toBe(true);
    expect(budget.available).toBe(0);
  });

  it('control: without the budget all sixteen hold their 32 MiB at once (512 MiB)', async () => {
    const slow = slowRenderer();
    for (let i = 0; i < 16; i++)
      void slow.pipeline.render(config(32 * MiB), { name: 'a', namespace: 'big' });
    await flush();
    expect(slow.maxBytes()).toBe(512 * MiB);
  });
});
