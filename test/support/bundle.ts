/**
 * The oscar CLI bundled into one file under the repository (`.oscar/e2e/`), for nodes that bind
 * the repository in and run it with the host's Node.js: dependencies stay external and resolve
 * from the repository's node_modules.
 */
import { join } from 'node:path';
import { repoRoot } from './tools.js';

/** Bundles cli/oscar.ts to `.oscar/e2e/<name>.mjs`; returns that path relative to the repo. */
export async function bundleCli(name: string): Promise<string> {
  const rel = `.oscar/e2e/${name}.mjs`;
  const esbuild = await import('esbuild');
  await esbuild.build({
    entryPoints: [join(repoRoot, 'cli', 'oscar.ts')],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    outfile: join(repoRoot, rel),
    logLevel: 'error',
  });
  return rel;
}
