/**
 * The Secrets and ConfigMaps an OSC references, for commands that run without a cluster
 * (`oscar render`, `oscar validate`): read from DIR/secrets/<name>/<key> and
 * DIR/configmaps/<name>/<key>, the layout a mounted volume or `kubectl get -o json | jq` gives.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fieldError, type FieldError } from '../../api/field-error.js';
import { referencedObjects, type References } from '../../api/resolve.js';
import type { OperatingSystemConfig } from '../../api/schema.js';

/**
 * Reads the Secrets and ConfigMaps a spec references from DIR/secrets/<name>/<key> and
 * DIR/configmaps/<name>/<key> (the layout `kubectl get secret -o json | jq` or a mounted volume
 * gives). Without DIR, a referenced object is an error naming the flag.
 */
export async function loadReferences(
  osc: OperatingSystemConfig,
  refDir: string | undefined,
): Promise<{ refs: References; errors: FieldError[] }> {
  const wanted = referencedObjects(osc.spec);
  const refs = {
    secrets: new Map<string, Record<string, Buffer>>(),
    configMaps: new Map<string, Record<string, Buffer>>(),
  };
  const errors: FieldError[] = [];
  const kinds = [
    ['secrets', 'Secret', wanted.secrets, refs.secrets],
    ['configmaps', 'ConfigMap', wanted.configMaps, refs.configMaps],
  ] as const;
  for (const [dirName, kind, names, into] of kinds) {
    for (const name of names) {
      if (refDir === undefined) {
        errors.push(
          fieldError(
            'spec.files',
            `${kind} "${name}" is referenced but cannot be looked up offline; pass --ref-dir DIR with its keys as files in DIR/${dirName}/${name}/<key>`,
          ),
        );
        continue;
      }
      const dir = join(refDir, dirName, name);
      let keys: string[];
      try {
        keys = (await readdir(dir, { withFileTypes: true }))
          .filter((e) => e.isFile() && !e.name.startsWith('.'))
          .map((e) => e.name);
      } catch {
        continue; // resolve() reports the missing object with its field path
      }
      const data: Record<string, Buffer> = {};
      for (const key of keys) data[key] = await readFile(join(dir, key));
      into.set(name, data);
    }
  }
  return { refs, errors };
}
