// Regenerates renderers/webhook/schemas/*.json from the typebox schemas in protocol.ts:
// node --import tsx renderers/webhook/gen-schemas.ts
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { jsonSchemas } from './protocol.js';

const dir = join(import.meta.dirname, 'schemas');
for (const [name, schema] of Object.entries(jsonSchemas())) {
  writeFileSync(join(dir, name), `${JSON.stringify(schema, null, 2)}\n`);
  console.log(`wrote ${join(dir, name)}`);
}
