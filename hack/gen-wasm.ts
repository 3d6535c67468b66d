// Compiles the renderers' WebAssembly text (renderers/wasm/*.wat) and writes its bytes, as base64,
// into a TypeScript module beside it (literal-block.wat -> literal-block-bytes.ts), so the bytes
// ship inside the bundle with no file to find at run time. Run after changing a .wat:
// npm run gen:wasm. renderers/wasm/literal-block.test.ts checks the committed bytes are current.
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { bytesModule, compileWat, wasmDir } from './wasm/compile.js';

for (const name of (await readdir(wasmDir)).filter((n) => n.endsWith('.wat'))) {
  const bytes = await compileWat(await readFile(join(wasmDir, name), 'utf8'), name);
  const target = join(wasmDir, name.replace(/\.wat$/, '-bytes.ts'));
  await writeFile(target, bytesModule(name, bytes));
  console.log(`wrote ${target} (${bytes.length} bytes of WebAssembly)`);
}
