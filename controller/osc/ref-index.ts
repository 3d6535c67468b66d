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

  /** Records the references of the OSC with key "namespace/name" (replacing earlier ones). */
  set(oscKey: string, namespace: string, refs: readonly Ref[]): void {
    this.remove(oscKey);
    const keys = refs.map((r) => `${r.kind}/${namespace}/${r.name}`);
    this.refsOf.set(oscKey, keys);
    for (const k of keys) {
      let set = this.users.get(k);
      if (!set) this.users.set(k, (set = new Set()));
      set.add(oscKey);
    }
  }

  remove(oscKey: string): void {
    for (const k of this.refsOf.get(oscKey) ?? []) {
      const set = this.users.get(k);
      set?.delete(oscKey);
      if (set?.size === 0) this.users.delete(k);
    }
    this.refsOf.delete(oscKey);
  }

  /** The OSC keys that reference this object. */
  usersOf(kind: RefKind, namespace: string, name: string): string[] {
    return [...(this.users.get(`${kind}/${namespace}/${name}`) ?? [])].sort();
  }
}
