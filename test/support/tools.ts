// Tool discovery with CI semantics: in CI (CI=true) a missing tool fails the suite, because CI
// machines are provisioned by hack/deps.sh and a skip there would hide a broken setup. Outside CI
// a missing tool makes the caller skip, with the reason printed once.
import { accessSync, constants, existsSync, statSync } from 'node:fs';
import { delimiter, dirname, join, resolve } from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** Repository root (test/support/ is two levels below it). */
export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

export function isCI(env: NodeJS.ProcessEnv = process.env): boolean {
  return env.CI === 'true';
}

/** Thrown (only in CI) when a required tool is missing. */
export class MissingToolError extends Error {
  override name = 'MissingToolError';
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK); // for root, X_OK is true if any x bit is set (or a dir)
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/** Absolute path of `name` (a command on PATH, or an absolute path), or undefined. */
export function findTool(
  name: string,
  pathVar: string = process.env.PATH ?? '',
): string | undefined {
  if (name.includes('/')) return isExecutable(name) ? name : undefined;
  for (const dir of pathVar.split(delimiter)) {
    if (dir === '') continue;
    const candidate = join(dir, name);
    if (isExecutable(candidate)) return candidate;
  }
  return undefined;
}

export function toolAvailable(name: string): boolean {
  return findTool(name) !== undefined;
}

const reported = new Set<string>();

/**
 * Decides what to do about a missing requirement: in CI throw, otherwise print `reason` once and
 * return false so the caller can skip. Exported so other requirements (a module, a root) share it.
 */
export function missing(what: string, hint: string, env: NodeJS.ProcessEnv = process.env): false {
  const message = `${what} is not available: ${hint}`;
  if (isCI(env)) throw new MissingToolError(`${message} (CI=true: a missing tool is a failure)`);
  if (!reported.has(message)) {
    reported.add(message);
    console.warn(`[skip] ${message}`);
  }
  return false;
}

/**
 * True when `name` is on PATH (or an executable absolute path). Otherwise: in CI throws a
 * MissingToolError naming `hint` (how to install it); outside CI prints why and returns false.
 */
export function requireTool(
  name: string,
  hint = 'run hack/deps.sh',
  env: NodeJS.ProcessEnv = process.env,
): boolean {
  return toolAvailable(name) || missing(`tool '${name}'`, hint, env);
}

/** requireTool for several tools; reports every missing one (not just the first). */
export function requireTools(names: readonly string[], hint = 'run hack/deps.sh'): boolean {
  let ok = true;
  for (const name of names) ok = requireTool(name, hint) && ok;
  return ok;
}

export const nodeRootScript = join(repoRoot, 'hack', 'node-root', 'build.sh');

let cachedRoot: string | undefined;

/**
 * Path of the cached debootstrapped Debian root (hack/node-root/build.sh builds it on first use,
 * a few minutes; later calls are instant). Returns undefined (outside CI) when it cannot be built
 * here, e.g. not root or debootstrap missing; in CI that throws.
 */
export function nodeRoot(): string | undefined {
  if (cachedRoot !== undefined) return cachedRoot;
  if (process.getuid?.() !== 0) {
    missing('node root', 'building and booting it needs root');
    return undefined;
  }
  if (!requireTool('debootstrap')) return undefined;
  let out: string;
  try {
    out = execFileSync('bash', [nodeRootScript], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
      timeout: 20 * 60_000,
    });
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    missing('node root', `${nodeRootScript} failed: ${reason}`);
    return undefined;
  }
  const path = out.trim().split('\n').pop() ?? '';
  if (path === '' || !existsSync(join(path, '.oscar-complete'))) {
    missing('node root', `${nodeRootScript} printed no complete root (got '${path}')`);
    return undefined;
  }
  cachedRoot = path;
  return path;
}

/** What a node suite's gate found: the node root to boot, or why the suite skips. */
export type NodeGate = { root: string; skip?: undefined } | { root?: undefined; skip: string };

/** "a, b or c": the tools a skip reason names. */
function orList(names: readonly string[]): string {
  return names.length < 2
    ? names.join('')
    : `${names.slice(0, -1).join(', ')} or ${String(names.at(-1))}`;
}

/**
 * The gate every suite that boots a node passes first: its tools and the cached node root, under
 * requireTool's policy (CI=true: a missing one fails; otherwise the suite skips with the reason).
 */
export function nodeSuiteGate(tools: readonly string[]): NodeGate {
  if (!requireTools(tools)) return { skip: `${orList(tools)} missing (run hack/deps.sh)` };
  const root = nodeRoot();
  if (root === undefined) return { skip: 'no node root (see the printed reason)' };
  return { root };
}
