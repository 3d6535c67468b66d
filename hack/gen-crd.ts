// Regenerates deploy/crds/ from the schema in api/schema.ts (npm run gen:crd).
import { writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { crdManifests, renderCrdKustomization, renderCrdYaml } from '../api/crd/crd.js';

const dir = join(import.meta.dirname, '..', 'deploy', 'crds');
mkdirSync(dir, { recursive: true });
for (const manifest of crdManifests()) {
  const path = join(dir, manifest.fileName);
  writeFileSync(path, renderCrdYaml(manifest.object));
  console.log(`wrote ${path}`);
}
const kustomization = join(dir, 'kustomization.yaml');
writeFileSync(kustomization, renderCrdKustomization());
console.log(`wrote ${kustomization}`);
