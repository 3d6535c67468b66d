import { describe, expect, it } from 'vitest';
import { Slots } from './slots.js';

describe('Slots', () => {
  it('holds at most its size; the others get a slot in arrival order as one is given back', async () => {
    const slots = new Slots(2);
    const order: string[] = [];
    const a = await slots.acquire();
    const b = await slots.acquire();
    const c = slots.acquire().then((release) => (order.push('c'), release));
    const d = slots.acquire().then((release) => (order.push('d'), release));
    expect([slots.inUse, slots.queued]).toEqual([2, 2]);
    a();
    a(); // twice: still one slot given back
    const releaseC = await c;
    expect(order).toEqual(['c']);
    expect([slots.inUse, slots.queued]).toEqual([2, 1]);
    b();
    (await d)();
    releaseC();
    expect([slots.inUse, slots.queued]).toEqual([0, 0]);
    expect(order).toEqual(['c', 'd']);
  });

  it('refuses a size that holds nothing', () => {
    expect(() => new Slots(0)).toThrow(/at least 1/);
    expect(() => new Slots(1.5)).toThrow(/whole number/);
  });
});
