/**
 * Bundles the oscar CLI into one ES module with esbuild: every dependency inlined, nothing read
 * from node_modules at run time, so an image (or any machine) needs only the Node.js runtime and
 * this one file. The CLI's lazily imported commands stay lazy: esbuild turns each `import()` of a
 * command module into a module initialised on first use.
 *
 * Usage: node --import tsx hack/image/bundle.ts OUTFILE
 */
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const repo = fileURLToPath(new URL('../..', import.meta.url));

export async function bundleCli(outfile: string): Promise<void> {
  const pkg = JSON.parse(await readFile(`${repo}/package.json`, 'utf8')) as { version: string };
  await build({
    entryPoints: [`${repo}/cli/oscar.ts`],
    outfile,
    bundle: true,
    platform: 'node',
    target: 'node24',
    format: 'esm',
    // Some dependencies are CommonJS and call require() for Node's built-ins.
    banner: {
      js: "import { createRequire as __oscarCreateRequire } from 'node:module'; const require = __oscarCreateRequire(import.meta.url);",
    },
    define: { __OSCAR_VERSION__: JSON.stringify(pkg.version) },
    // A byte-identical bundle for identical sources: no absolute paths, no timestamps.
    legalComments: 'none',
    sourcemap: false,
    minifySyntax: true,
    logLevel: 'warning',
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const out = process.argv[2];
  if (out === undefined) {
    console.error('usage: bundle.ts OUTFILE');
    process.exit(2);
  }
  await bundleCli(out);
}
