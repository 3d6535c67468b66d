/**
 * At most `size` holders at once; the others wait in arrival order. The servers that read bodies
 * from anyone (the renderer server, the Cluster API extension) take a slot before they read one:
 * each body is bounded, and this bounds their sum — without it, twenty requests at once, each a
 * small gzip inflating to just under the limit, hold twenty parsed bodies. A request waiting for a
 * slot has had nothing read but its headers (the rest stays in the kernel's socket buffer, and
 * TCP slows the sender), and the servers' request timeouts still end it.
 */
export class Slots {
  private active = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(readonly size: number) {
    if (!Number.isInteger(size) || size < 1) {
      throw new RangeError(`slots: size must be a whole number of at least 1 (got ${size})`);
    }
  }

  /** Slots held now. */
  get inUse(): number {
    return this.active;
  }

  /** Callers waiting for a slot. */
  get queued(): number {
    return this.waiting.length;
  }

  /** Resolves once a slot is this caller's, with the function that gives it back (once). */
  async acquire(): Promise<() => void> {
    if (this.active < this.size) this.active++;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.shift();
      if (next)
        next(); // handed over: the count stays
      else this.active--;
    };
  }
}

/** The parts of a request and its response a slot's holder watches. */
interface Exchange {
  req: { readonly destroyed: boolean };
  res: { readonly writableEnded: boolean; once(event: 'close', listener: () => void): unknown };
}

/**
 * Runs `next` holding a slot for the whole exchange: given back when the response closes (sent,
 * or the connection gone). A client that left while it waited gives its slot straight back.
 */
export function withSlot(slots: Slots, { req, res }: Exchange, next: () => void): void {
  void slots.acquire().then((release) => {
    if (req.destroyed || res.writableEnded) {
      release();
      return;
    }
    res.once('close', release);
    next();
  });
}
