import { describe, expect, it } from 'vitest';
import { RefIndex } from './ref-index.js';

describe('RefIndex', () => {
  it('maps a referenced object to every OSC that uses it, per namespace', () => {
    const idx = new RefIndex();
    idx.set('a/one', 'a', [
      { kind: 'Secret', name: 'creds' },
      { kind: 'ConfigMap', name: 'cfg' },
    ]);
    idx.set('a/two', 'a', [{ kind: 'Secret', name: 'creds' }]);
    idx.set('b/three', 'b', [{ kind: 'Secret', name: 'creds' }]);
    expect(idx.usersOf('Secret', 'a', 'creds')).toEqual(['a/one', 'a/two']);
    expect(idx.usersOf('ConfigMap', 'a', 'cfg')).toEqual(['a/one']);
    expect(idx.usersOf('ConfigMap', 'a', 'creds')).toEqual([]);
    expect(idx.usersOf('Secret', 'b', 'creds')).toEqual(['b/three']);
  });

  it('forgets references an update dropped, and all of them on removal', () => {
    const idx = new RefIndex();
    idx.set('a/one', 'a', [
      { kind: 'Secret', name: 'x' },
      { kind: 'Secret', name: 'y' },
    ]);
    idx.set('a/one', 'a', [{ kind: 'Secret', name: 'y' }]);
    expect(idx.usersOf('Secret', 'a', 'x')).toEqual([]);
    expect(idx.usersOf('Secret', 'a', 'y')).toEqual(['a/one']);
    idx.remove('a/one');
    expect(idx.usersOf('Secret', 'a', 'y')).toEqual([]);
  });

  it('says when an object loses its last user, not while an update keeps it', () => {
    const unused: string[] = [];
    const idx = new RefIndex((kind, key) => unused.push(`${kind}/${key}`));
    idx.set('a/one', 'a', [
      { kind: 'Secret', name: 'x' },
      { kind: 'ConfigMap', name: 'c' },
    ]);
    idx.set('a/two', 'a', [{ kind: 'Secret', name: 'x' }]);
    idx.set('a/one', 'a', [{ kind: 'Secret', name: 'x' }]);
    expect(unused).toEqual(['ConfigMap/a/c']);
    idx.remove('a/one');
    expect(idx.used('Secret', 'a', 'x')).toBe(true);
    idx.remove('a/two');
    expect(unused).toEqual(['ConfigMap/a/c', 'Secret/a/x']);
    expect(idx.used('Secret', 'a', 'x')).toBe(false);
  });
});
