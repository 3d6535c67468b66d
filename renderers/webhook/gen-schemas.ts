// Regenerates renderers/webhook/schemas/*.json from the typebox schemas in protocol.ts:
//   node --import tsx renderers/webhook/gen-schemas.ts
// (formatted with the repo's prettier settings, so `prettier --check` agrees with the output)
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { format, resolveConfig } from 'prettier';
import { jsonSchemas } from './protocol.js';

const dir = join(import.meta.dirname, 'schemas');
for (const [name, schema] of Object.entries(jsonSchemas())) {
  const path = join(dir, name);
  const options = (await resolveConfig(path)) ?? {};
  writeFileSync(path, await format(JSON.stringify(schema), { ...options, filepath: path }));
  console.log(`wrote ${path}`);
}
