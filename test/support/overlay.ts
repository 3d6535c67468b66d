// Applies rendered output FOR REAL — cloud-init's write_files and write_files_deferred modules,
// Ignition's files stage plus `systemctl preset` — into an overlay of the cached node root, and
// returns what changed. inOverlay / runInOverlay run any script over such an overlay.
// The overlay lives in a private mount namespace (unshare), so nothing touches the host's /etc and
// the cached root stays pristine; the overlay's upper directory is the record of the changes.
import {
  lstat,
  mkdir,
  mkdtemp,
  readFile,
  readdir,
  readlink,
  rm,
  writeFile,
  chmod,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run, type RunResult } from './exec.js';

// ---- tree snapshots -------------------------------------------------------------------------

interface Owned {
  /** Permission bits including setuid/setgid/sticky (mode & 0o7777). */
  mode: number;
  uid: number;
  gid: number;
}
export type TreeEntry =
  | (Owned & { type: 'file'; bytes: Buffer })
  | (Owned & { type: 'dir' })
  | (Owned & { type: 'symlink'; linkTarget: string })
  /** An overlayfs whiteout (0:0 character device): the path was deleted. */
  | (Owned & { type: 'whiteout' })
  | (Owned & { type: 'other' });

/** Path inside the tree ("/etc/x", "/" for the top) → entry. */
export type Tree = Map<string, TreeEntry>;

async function entryAt(abs: string): Promise<TreeEntry | undefined> {
  let st;
  try {
    st = await lstat(abs);
  } catch {
    return undefined;
  }
  const owned = { mode: st.mode & 0o7777, uid: st.uid, gid: st.gid };
  if (st.isFile()) return { ...owned, type: 'file', bytes: await readFile(abs) };
  if (st.isDirectory()) return { ...owned, type: 'dir' };
  if (st.isSymbolicLink()) return { ...owned, type: 'symlink', linkTarget: await readlink(abs) };
  if (st.isCharacterDevice() && st.rdev === 0) return { ...owned, type: 'whiteout' };
  return { ...owned, type: 'other' };
}

/** Every entry under `dir` (not following symlinks), keyed by its path relative to `dir`. */
export async function snapshotTree(dir: string): Promise<Tree> {
  const tree: Tree = new Map();
  const walk = async (rel: string): Promise<void> => {
    const entry = await entryAt(join(dir, rel));
    if (entry === undefined) return;
    tree.set(rel === '' ? '/' : rel, entry);
    if (entry.type !== 'dir') return;
    const names = (await readdir(join(dir, rel))).sort();
    for (const name of names) await walk(`${rel}/${name}`);
  };
  await walk('');
  return tree;
}

export function sameEntry(a: TreeEntry, b: TreeEntry): boolean {
  if (a.type !== b.type || a.mode !== b.mode || a.uid !== b.uid || a.gid !== b.gid) return false;
  if (a.type === 'file' && b.type === 'file') return a.bytes.equals(b.bytes);
  if (a.type === 'symlink' && b.type === 'symlink') return a.linkTarget === b.linkTarget;
  return true;
}

function describeEntry(e: TreeEntry): string {
  const owner = `${e.uid}:${e.gid} ${e.mode.toString(8).padStart(4, '0')}`;
  if (e.type === 'file') return `file ${owner} ${e.bytes.length} bytes`;
  if (e.type === 'symlink') return `symlink ${owner} -> ${e.linkTarget}`;
  return `${e.type} ${owner}`;
}

/** Human-readable differences between two trees ([] when equal), for assertion messages. */
export function diffTrees(expected: Tree, actual: Tree): string[] {
  const out: string[] = [];
  const paths = [...new Set([...expected.keys(), ...actual.keys()])].sort();
  for (const p of paths) {
    const e = expected.get(p);
    const a = actual.get(p);
    if (e === undefined && a !== undefined) out.push(`+ ${p}: ${describeEntry(a)}`);
    else if (e !== undefined && a === undefined) out.push(`- ${p}: ${describeEntry(e)}`);
    else if (e !== undefined && a !== undefined && !sameEntry(e, a)) {
      let why = `${describeEntry(e)} != ${describeEntry(a)}`;
      if (e.type === 'file' && a.type === 'file' && e.bytes.length === a.bytes.length)
        why += ' (contents differ)';
      out.push(`~ ${p}: ${why}`);
    }
  }
  return out;
}

/** Only the entries of given types, e.g. files and symlinks (what renderers promise). */
export function pick(tree: Tree, types: readonly TreeEntry['type'][]): Tree {
  return new Map([...tree].filter(([, e]) => types.includes(e.type)));
}

// ---- applying into an overlay of the node root ----------------------------------------------

export interface Applied {
  /** The overlay's upper directory: everything the run wrote (incl. the tool's bookkeeping). */
  upper: string;
  /**
   * What changed relative to the root: the upper directory without the tool's own bookkeeping
   * (see `bookkeeping`) and without entries identical to the root's (copied-up parent dirs).
   */
  changes: Tree;
  /** The tool's output (stdout+stderr). */
  log: string;
  /** Removes the upper directory. */
  cleanup(): Promise<void>;
}

/** Paths the appliers themselves write, not part of the rendered output. */
export const bookkeeping = {
  cloudInit: ['/var/log/cloud-init.log', '/var/log/cloud-init-output.log', '/var/lib/cloud'],
  // 20-ignition.preset is how Ignition records enablement; its effect (the .wants symlinks made by
  // `systemctl preset`) is what we compare.
  ignition: [
    '/etc/.ignition-result.json',
    '/etc/selinux/config',
    '/etc/systemd/system-preset/20-ignition.preset',
  ],
} as const;

function isUnder(path: string, prefixes: readonly string[]): boolean {
  return prefixes.some((p) => path === p || path.startsWith(`${p}/`));
}

async function changesAgainst(
  root: string,
  upper: string,
  ignore: readonly string[],
): Promise<Tree> {
  const all = await snapshotTree(upper);
  const out: Tree = new Map();
  for (const [path, entry] of all) {
    if (path === '/' || isUnder(path, ignore)) continue;
    const lower = await entryAt(join(root, path));
    if (lower !== undefined && sameEntry(lower, entry)) continue;
    out.set(path, entry);
  }
  // A directory that holds nothing but bookkeeping and is new only because of it is noise too.
  for (const [path, entry] of [...out].reverse()) {
    if (entry.type !== 'dir') continue;
    const hasChild = [...out.keys()].some((p) => p.startsWith(`${path}/`));
    const onlyBookkeeping = [...all.keys()].some(
      (p) => p.startsWith(`${path}/`) && isUnder(p, ignore),
    );
    if (!hasChild && onlyBookkeeping) out.delete(path);
  }
  return out;
}

const shellQuote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * Runs `script` (sh) in private mount/pid/net/uts/ipc namespaces after mounting an overlay of
 * `root` at $M (upper $U, work directory $W, /proc, and tmpfs on /run and /tmp). The mounts vanish
 * with the namespace; only $U remains. `work` must exist; the caller removes it.
 */
export async function inOverlay(
  root: string,
  work: string,
  script: string,
  env: Record<string, string> = {},
): Promise<RunResult> {
  const upper = join(work, 'upper');
  const merged = join(work, 'merged');
  await mkdir(join(work, 'ovl-work'), { recursive: true });
  await mkdir(upper, { recursive: true });
  await mkdir(merged, { recursive: true });
  const prologue = [
    'set -eu',
    `M=${shellQuote(merged)}; U=${shellQuote(upper)}; W=${shellQuote(work)}`,
    `mount -t overlay overlay -o lowerdir=${shellQuote(root)},upperdir="$U",workdir="$W/ovl-work" "$M"`,
    'mount -t proc proc "$M/proc"',
    // scratch space of the tools; not part of the result
    'mount -t tmpfs tmpfs "$M/run"',
    'mount -t tmpfs tmpfs "$M/tmp"',
  ].join('\n');
  return run(
    'unshare',
    [
      '--mount',
      '--propagation',
      'private',
      '--pid',
      '--fork',
      '--net',
      '--uts',
      '--ipc',
      'sh',
      '-c',
      `${prologue}\n${script}`,
    ],
    { env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', LANG: 'C.UTF-8', ...env }, timeoutMs: 120_000 },
  );
}

/**
 * inOverlay in a temporary work directory that also holds `files` (name → text, mode 0755,
 * reachable as "$W/name"), removed afterwards with everything the script wrote. For jobs that
 * only need the script's output, such as verifying units inside the root.
 */
export async function runInOverlay(
  root: string,
  script: string,
  files: Record<string, string> = {},
): Promise<RunResult> {
  const work = await mkdtemp(join(tmpdir(), 'oscar-overlay-'));
  try {
    for (const [name, text] of Object.entries(files)) {
      await writeFile(join(work, name), text);
      await chmod(join(work, name), 0o755);
    }
    return await inOverlay(root, work, script);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

function failure(what: string, r: RunResult): Error {
  return new Error(`${what} failed (exit ${r.code ?? r.signal ?? '?'}):\n${r.stdout}${r.stderr}`);
}

async function applied(
  root: string,
  work: string,
  r: RunResult,
  ignore: readonly string[],
): Promise<Applied> {
  const upper = join(work, 'upper');
  return {
    upper,
    changes: await changesAgainst(root, upper, ignore),
    log: r.stdout + r.stderr,
    cleanup: () => rm(work, { recursive: true, force: true }),
  };
}

/**
 * Applies a `#cloud-config` with cloud-init's own modules for files, in boot order, chrooted into
 * an overlay of `root` (from nodeRoot()): `write_files` (config stage: every entry without
 * `defer: true`), then `write_files_deferred` (final stage, after packages: the entries with
 * `defer: true`), each as `cloud-init --file F single --name M --frequency always`
 * (DataSourceNone). Nothing else runs: no packages, no runcmd.
 */
export async function applyCloudConfigWriteFiles(
  cloudConfig: string,
  opts: { root: string },
): Promise<Applied> {
  const work = await mkdtemp(join(tmpdir(), 'oscar-apply-cc-'));
  try {
    await writeFile(join(work, 'user-data.yaml'), cloudConfig);
    const single = (module: string): string =>
      `chroot "$M" /usr/bin/cloud-init --file /tmp/user-data.yaml single --name ${module} --frequency always`;
    const r = await inOverlay(
      opts.root,
      work,
      [
        'cp "$W/user-data.yaml" "$M/tmp/user-data.yaml"',
        single('write_files'),
        single('write_files_deferred'),
      ].join('\n'),
    );
    if (r.code !== 0) throw failure('cloud-init single --name write_files/write_files_deferred', r);
    return await applied(opts.root, work, r, bookkeeping.cloudInit);
  } catch (err) {
    await rm(work, { recursive: true, force: true });
    throw err;
  }
}

export const ignitionBinary = '/usr/lib/dracut/modules.d/30ignition/ignition';

/**
 * Applies an Ignition config with the real Ignition binary (stages fetch-offline, then files with
 * -root on an overlay of `root`), then `systemctl --root preset` for every unit Ignition wrote a
 * preset for, which creates the .wants symlinks of enabled units.
 */
export async function applyIgnitionFiles(
  ignitionJson: string,
  opts: { root: string },
): Promise<Applied> {
  const work = await mkdtemp(join(tmpdir(), 'oscar-apply-ign-'));
  try {
    await writeFile(join(work, 'config.ign'), ignitionJson);
    // Ignition relabels for SELinux at the end of the files stage; a no-op setfiles satisfies it.
    await mkdir(join(work, 'bin'));
    await writeFile(join(work, 'bin', 'setfiles'), '#!/bin/sh\nexit 0\n');
    await chmod(join(work, 'bin', 'setfiles'), 0o755);
    await mkdir(join(work, 'state'));
    const ign = shellQuote(ignitionBinary);
    const common =
      '-platform file -log-to-stdout -config-cache "$W/state/ignition.json" -state-file "$W/state/state"';
    const r = await inOverlay(
      opts.root,
      work,
      [
        'mkdir -p "$M/etc/selinux"',
        `printf 'SELINUX=disabled\\nSELINUXTYPE=targeted\\n' > "$M/etc/selinux/config"`,
        `IGNITION_CONFIG_FILE="$W/config.ign" ${ign} ${common} -stage fetch-offline -neednet "$W/state/neednet"`,
        `${ign} ${common} -stage files -root "$M"`,
        'preset="$M/etc/systemd/system-preset/20-ignition.preset"',
        'if [ -f "$preset" ]; then',
        '  units=$(awk \'$1 == "enable" || $1 == "disable" { print $2 }\' "$preset")',
        '  # word splitting intended: unit names contain no spaces',
        '  [ -z "$units" ] || systemctl --root="$M" preset $units',
        'fi',
      ].join('\n'),
      { PATH: `${join(work, 'bin')}:/usr/sbin:/usr/bin:/sbin:/bin` },
    );
    if (r.code !== 0) throw failure('ignition files stage', r);
    return await applied(opts.root, work, r, bookkeeping.ignition);
  } catch (err) {
    await rm(work, { recursive: true, force: true });
    throw err;
  }
}
