import { describe, expect, it } from 'vitest';
import { OwnWrites } from './own-writes.js';

describe('OwnWrites', () => {
  it('lays our write over a cache that is older, and drops it once the cache caught up', () => {
    const own = new OwnWrites<string>();
    own.record('ns/a', 'mine', '12');
    expect(own.newerThan('ns/a', '11')).toBe('mine');
    expect(own.newerThan('ns/a', undefined)).toBe('mine'); // not cached yet
    expect(own.caughtUp('ns/a', '11')).toBe(false);
    expect(own.newerThan('ns/a', '12')).toBeUndefined();
    // dropped: an older cache no longer brings it back
    expect(own.newerThan('ns/a', '11')).toBeUndefined();
    expect(own.caughtUp('ns/a', '11')).toBe(true);
  });

  it('drops the record when the watch delivers that version or a later one, not an older one', () => {
    const own = new OwnWrites<string>();
    own.record('k', 'mine', 20);
    own.seen('k', '19');
    expect(own.entries()).toEqual([['k', 'mine']]);
    own.seen('k', '21');
    expect(own.entries()).toEqual([]);
  });

  it('trusts the cache when a resourceVersion is not a number, and forgets on delete', () => {
    const own = new OwnWrites<string>();
    own.record('k', 'mine', 'abc');
    expect(own.newerThan('k', '1')).toBeUndefined();
    own.record('k', 'mine', '5');
    own.forget('k');
    expect(own.newerThan('k', '1')).toBeUndefined();
  });
});
