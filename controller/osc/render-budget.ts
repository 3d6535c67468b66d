/**
 * Bounds the memory that renders in flight hold together. Each render of an OSC holds its resolved
 * files (up to RESOLVED_TOTAL_BYTES, 32 MiB) and what the renderer makes of them — a webhook's
 * request body, a built-in's user data and canonical form — for as long as it runs, and the
 * controller runs 16 reconciles at once: many large OSCs rendering together (a webhook renderer
 * keeps each one for its whole timeout) would hold many times that. Renders of more than
 * `smallBytes` of files take their size from a shared budget and wait, first come first served,
 * while it is spent; an OSC larger than the budget waits for it to be whole and then renders alone.
 * Small renders never wait, so one tenant's large and slow OSCs cannot stall another's ordinary
 * ones (16 workers × `smallBytes` bound those).
 */
import type { ResolvedConfig } from '../../api/resolved.js';
import type { Pipeline } from './pipeline.js';

export interface RenderBudgetOptions {
  /** Bytes of resolved files all large renders in flight may hold together. */
  totalBytes: number;
  /** Renders of at most this many bytes of files do not count. */
  smallBytes: number;
}

export const DEFAULT_RENDER_BUDGET: RenderBudgetOptions = {
  totalBytes: 64 * 1024 * 1024,
  smallBytes: 1024 * 1024,
};

/** A budget of bytes handed out first come first served. */
export class ByteBudget {
  private left: number;
  private readonly waiting: { bytes: number; go: () => void }[] = [];

  constructor(readonly total: number) {
    this.left = total;
  }

  /** Bytes not held now. */
  get available(): number {
    return this.left;
  }

  /** Waiting callers. */
  get queued(): number {
    return this.waiting.length;
  }

  /** Resolves once `bytes` (at most the whole budget) are the caller's; returns their release. */
  async acquire(bytes: number): Promise<() => void> {
    const want = Math.min(bytes, this.total);
    if (this.waiting.length === 0 && want <= this.left) this.left -= want;
    else await new Promise<void>((go) => this.waiting.push({ bytes: want, go }));
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.left += want;
      this.wake();
    };
  }

  private wake(): void {
    for (let next = this.waiting[0]; next && next.bytes <= this.left; next = this.waiting[0]) {
      this.waiting.shift();
      this.left -= next.bytes;
      next.go();
    }
  }
}

function filesBytes(config: ResolvedConfig): number {
  let n = 0;
  for (const f of config.files) n += f.content.length;
  return n;
}

/** `inner`, its large renders holding their size of `budget` while they run. */
export function budgetedPipeline(
  inner: Pipeline,
  options: RenderBudgetOptions = DEFAULT_RENDER_BUDGET,
  budget: ByteBudget = new ByteBudget(options.totalBytes),
): Pipeline {
  return {
    async render(config, target) {
      const bytes = filesBytes(config);
      if (bytes <= options.smallBytes) return inner.render(config, target);
      const release = await budget.acquire(bytes);
      try {
        return await inner.render(config, target);
      } finally {
        release();
      }
    },
  };
}
