/**
 * Which OperatingSystemConfigs reference which Secrets and ConfigMaps, so a change to one
 * referenced object re-renders exactly the configurations that use it.
 */
export type RefKind = 'Secret' | 'ConfigMap';

export interface Ref {
  kind: RefKind;
  name: string;
}

export class RefIndex {
  private readonly users = new Map<string, Set<string>>();
  private readonly refsOf = new Map<string, string[]>();

  /**
   * @param onUnused told when an object loses its last user ("namespace/name"), so what is held
   *   for it (a referenced Secret's data) can go.
   */
  constructor(private readonly onUnused?: (kind: RefKind, key: string) => void) {}

  /** Records the references of the OSC with key "namespace/name" (replacing earlier ones). */
  set(oscKey: string, namespace: string, refs: readonly Ref[]): void {
    const before = this.refsOf.get(oscKey) ?? [];
    const keys = refs.map((r) => `${r.kind}/${namespace}/${r.name}`);
    this.refsOf.set(oscKey, keys);
    for (const k of keys) {
      let set = this.users.get(k);
      if (!set) this.users.set(k, (set = new Set()));
      set.add(oscKey);
    }
    // Only after the new ones are in: a reference kept across an update never looks unused.
    this.release(
      oscKey,
      before.filter((k) => !keys.includes(k)),
    );
  }

  remove(oscKey: string): void {
    this.release(oscKey, this.refsOf.get(oscKey) ?? []);
    this.refsOf.delete(oscKey);
  }

  /** Whether any OSC references this object. */
  used(kind: RefKind, namespace: string, name: string): boolean {
    return this.users.has(`${kind}/${namespace}/${name}`);
  }

  private release(oscKey: string, keys: readonly string[]): void {
    for (const k of keys) {
      const set = this.users.get(k);
      set?.delete(oscKey);
      if (set?.size === 0) {
        this.users.delete(k);
        const slash = k.indexOf('/');
        this.onUnused?.(k.slice(0, slash) as RefKind, k.slice(slash + 1));
      }
    }
  }

  /** The OSC keys that reference this object. */
  usersOf(kind: RefKind, namespace: string, name: string): string[] {
    return [...(this.users.get(`${kind}/${namespace}/${name}`) ?? [])].sort();
  }
}
