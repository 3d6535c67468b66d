// Regenerates test/golden/ from examples/: every example in each format its type supports.
// Run after an intended change to a renderer or an example: npm run gen:golden
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { goldenDir, goldenEntries } from '../renderers/testdata/golden.js';

const entries = await goldenEntries();
await mkdir(goldenDir, { recursive: true });
const wanted = new Set(entries.map((e) => e.file));
for (const name of await readdir(goldenDir)) {
  if (!wanted.has(name) && name !== 'README.md') {
    await rm(join(goldenDir, name));
    console.log(`removed ${name}`);
  }
}
for (const e of entries) {
  const path = join(goldenDir, e.file);
  const old = await readFile(path).catch(() => undefined);
  if (old?.equals(e.userData)) continue;
  await writeFile(path, e.userData);
  console.log(`${old === undefined ? 'wrote' : 'updated'} ${e.file} (${e.userData.length} bytes)`);
}
console.log(`${entries.length} golden files in test/golden/`);
