/**
 * The data of the Secrets OSCs reference, read only when an OSC that references one renders.
 *
 * The controller watches the Secrets it does not own metadata-only (any Secret may be referenced,
 * so that watch covers every Secret in scope): the metadata says that a Secret exists and when it
 * changed (uid, resourceVersion), which is all the watch needs to requeue the OSCs using it. The
 * data comes from a GET by name, before the render that needs it, and is kept while its uid and
 * resourceVersion match the watched metadata and some OSC references it. So the controller holds
 * the data of referenced Secrets only, not of every Secret of the cluster.
 *
 * The watched metadata stays the source of truth for existence, as the full watch was: a Secret
 * the watch has not delivered is missing (its add event requeues the OSC), one it has is read.
 */
import { isNotFound, type KubeHttp } from '../../kube/client.js';
import { dropManagedFields } from '../kube/informer.js';
import type { DataObject, KubeObject } from '../kube/types.js';

export interface SecretReader {
  /** GET of the whole Secret; undefined when it is not found. */
  read(namespace: string, name: string): Promise<DataObject | undefined>;
}

export interface ReferencedSecretsOptions {
  reader: SecretReader;
  /** The watched metadata of a Secret not oscar's own (undefined: not there). */
  meta(namespace: string, name: string): KubeObject | undefined;
  /** Whether an OSC references it: a read that returns after its last user went is not kept. */
  used(namespace: string, name: string): boolean;
  /** Told of every GET (a metric, a debug log line: never the data). */
  onRead?(namespace: string, name: string, found: boolean): void;
}

function sameVersion(a: KubeObject, b: KubeObject): boolean {
  return (
    a.metadata.uid === b.metadata.uid && a.metadata.resourceVersion === b.metadata.resourceVersion
  );
}

export class ReferencedSecrets {
  private readonly data = new Map<string, DataObject>();
  /** One GET per Secret at a time: OSCs rendering at once share it. */
  private readonly reading = new Map<string, Promise<void>>();

  constructor(private readonly o: ReferencedSecretsOptions) {}

  /**
   * Reads the Secrets named so whose data is not held at their watched version. A failed GET
   * rejects (the reconcile retries with backoff); a Secret gone meanwhile is left out.
   */
  async load(namespace: string, names: readonly string[]): Promise<void> {
    await Promise.all(names.map((name) => this.loadOne(namespace, name)));
  }

  private loadOne(namespace: string, name: string): Promise<void> {
    const key = `${namespace}/${name}`;
    const meta = this.o.meta(namespace, name);
    if (!meta) {
      this.data.delete(key);
      return Promise.resolve();
    }
    const held = this.data.get(key);
    if (held && sameVersion(held, meta)) return Promise.resolve();
    const pending = this.reading.get(key);
    if (pending) return pending;
    const read = this.read(namespace, name).finally(() => this.reading.delete(key));
    this.reading.set(key, read);
    return read;
  }

  private async read(namespace: string, name: string): Promise<void> {
    const key = `${namespace}/${name}`;
    const secret = await this.o.reader.read(namespace, name);
    this.o.onRead?.(namespace, name, secret !== undefined);
    if (secret && this.o.used(namespace, name)) this.data.set(key, secret);
    else this.data.delete(key);
  }

  /**
   * The data as last read, while the watch still shows that Secret (same uid): undefined when it
   * is missing or was never read. Its resourceVersion is the one read, so a render memoised on
   * it runs again once the watch shows a later version (and load reads that).
   */
  get(namespace: string, name: string): DataObject | undefined {
    const meta = this.o.meta(namespace, name);
    const held = this.data.get(`${namespace}/${name}`);
    return meta && held?.metadata.uid === meta.metadata.uid ? held : undefined;
  }

  /** No OSC references it any more, or it was deleted: its data goes. */
  drop(namespace: string, name: string): void {
    this.data.delete(`${namespace}/${name}`);
  }

  /** How many Secrets' data is held (for tests and the docs' figures). */
  get size(): number {
    return this.data.size;
  }
}

/** GET /api/v1/namespaces/NS/secrets/NAME (needs the `get` verb on Secrets). */
export function httpSecretReader(http: KubeHttp): SecretReader {
  return {
    async read(namespace, name) {
      try {
        const secret = await http.request<DataObject>(
          'GET',
          `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets/${encodeURIComponent(name)}`,
        );
        dropManagedFields(secret);
        return secret;
      } catch (error) {
        if (isNotFound(error)) return undefined;
        throw error;
      }
    },
  };
}
