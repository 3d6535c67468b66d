import { execFile } from 'node:child_process';
import {
  lstat,
  mkdir,
  mkdtemp,
  open,
  readdir,
  readFile,
  readlink,
  rm,
  stat,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parse } from 'yaml';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ResolvedConfig, ResolvedFile } from '../api/resolved.js';
import { decodeCloudConfig, DecodeError } from './decode.js';
import {
  isPrivateMode,
  PRIVATE_FILES_GUARD_ARG0,
  PRIVATE_FILES_GUARD_SCRIPT,
  privateFilesGuard,
} from './private-files.js';
import { defaultRegistry, renderOsc } from './registry.js';

const registry = defaultRegistry();
const file = (path: string, mode: number): ResolvedFile => ({
  path,
  mode,
  user: 'root',
  group: 'root',
  content: Buffer.from(`content of ${path}\n`),
});
const config = (files: ResolvedFile[]): ResolvedConfig => ({
  type: 'ubuntu',
  purpose: 'provision',
  units: [],
  files,
  packages: [],
});
async function cloudConfig(files: ResolvedFile[]): Promise<string> {
  const opts = { name: 'n', namespace: 'ns', format: 'cloud-config' as const };
  return (await renderOsc(registry, config(files), opts)).userData.toString('utf8');
}

describe('which files get the guard', () => {
  it('a mode without group or other read does (0600, 0640, 0400, 0750, 0604, 0200, 4750)', () => {
    for (const mode of [0o600, 0o640, 0o400, 0o750, 0o604, 0o200, 0o4750]) {
      expect(isPrivateMode(mode), mode.toString(8)).toBe(true);
    }
  });

  it('a mode with both does not (0644, 0755, 0444, 4755)', () => {
    for (const mode of [0o644, 0o755, 0o444, 0o4755]) {
      expect(isPrivateMode(mode), mode.toString(8)).toBe(false);
    }
  });
});

describe('the rendered cloud-config', () => {
  const files = [
    file('/etc/oscar/bootstrap-kubeconfig', 0o600),
    file('/etc/public.conf', 0o644),
    file('/etc/app/key', 0o640),
    file('/usr/local/bin/tool', 0o755),
    file('/etc/app/secret id', 0o400),
    file('/usr/local/sbin/private', 0o750),
  ];

  it('runs the guard once per instance, before write_files, for the private files in write_files order', async () => {
    const text = await cloudConfig(files);
    const doc = parse(text, { version: '1.1' }) as { bootcmd: unknown; write_files: unknown[] };
    expect(doc.bootcmd).toEqual([
      [
        'cloud-init-per',
        'instance',
        'oscar-private-files',
        'sh',
        '-c',
        PRIVATE_FILES_GUARD_SCRIPT,
        PRIVATE_FILES_GUARD_ARG0,
        '/etc/app/key',
        '/etc/app/secret id',
        '/etc/oscar/bootstrap-kubeconfig',
        '/usr/local/sbin/private',
      ],
    ]);
    expect(text.indexOf('\nbootcmd:\n')).toBeLessThan(text.indexOf('\nwrite_files:\n'));
    expect(doc.write_files).toHaveLength(files.length);
    const order = (doc.write_files as { path: string }[]).map((f) => f.path);
    expect(order.filter((p) => (doc.bootcmd as string[][])[0]?.includes(p))).toEqual(
      (doc.bootcmd as string[][])[0]?.slice(7),
    );
  });

  it('has no bootcmd when no file is private', async () => {
    const text = await cloudConfig([file('/etc/a', 0o644), file('/usr/local/bin/b', 0o755)]);
    expect(text).not.toContain('bootcmd');
  });

  it('decodes to exactly the declared files (the guard writes none of its own)', async () => {
    const decoded = decodeCloudConfig(Buffer.from(await cloudConfig(files)));
    expect(decoded.files.map((f) => [f.path, f.mode.toString(8)])).toEqual(
      [...files]
        .sort((a, b) => (a.path < b.path ? -1 : 1))
        .map((f) => [f.path, f.mode.toString(8)]),
    );
  });

  it('the decoder refuses a bootcmd that is not the guard, or a private file without it', async () => {
    const text = await cloudConfig(files);
    const extra = text.replace('bootcmd:\n', 'bootcmd:\n  - [sh, "-c", "id"]\n');
    expect(() => decodeCloudConfig(Buffer.from(extra))).toThrow(DecodeError);
    const guard = text.slice(text.indexOf('bootcmd:\n'), text.indexOf('write_files:\n'));
    expect(() => decodeCloudConfig(Buffer.from(text.replace(guard, '')))).toThrow(
      /private-files guard for the 4 private files/,
    );
  });
});

describe('the guard, run by sh', () => {
  let dir = '';
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'oscar-guard-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function guard(...paths: string[]): Promise<void> {
    const argv = privateFilesGuard(paths.map((path) => ({ path, mode: 0o600 })));
    if (argv === undefined) throw new Error('no guard');
    // what cloud-init-per runs: sh -c SCRIPT ARG0 PATHS..., under systemd's umask 0022
    const [, , , sh = '', ...args] = argv;
    await promisify(execFile)('/bin/sh', ['-c', `umask 022; exec "$@"`, 'x', sh, ...args]);
  }

  it('makes a missing file empty and 0600, its parents 0755', async () => {
    const path = join(dir, 'new', 'deep', 'key');
    await guard(path);
    const st = await stat(path);
    expect([st.mode & 0o7777, st.size]).toEqual([0o600, 0]);
    expect((await stat(join(dir, 'new', 'deep'))).mode & 0o777).toBe(0o755);
  });

  it('puts a new inode in place of an existing file: a reader of the old one never sees what follows', async () => {
    const path = join(dir, 'baked');
    await writeFile(path, 'old\n', { mode: 0o644 });
    const reader = await open(path, 'r');
    try {
      await guard(path);
      const st = await stat(path);
      expect([st.mode & 0o7777, st.size]).toEqual([0o600, 0]);
      await writeFile(path, 'secret\n'); // write_files: truncates and writes, keeping 0600
      expect((await reader.readFile()).toString()).toBe('old\n');
      expect((await stat(path)).mode & 0o7777).toBe(0o600);
    } finally {
      await reader.close();
    }
  });

  it('leaves a link at the path, and its target, alone; and a directory; and exits 0', async () => {
    const target = join(dir, 'target');
    await writeFile(target, 'target\n', { mode: 0o644 });
    const link = join(dir, 'link');
    await symlink(target, link);
    const sub = join(dir, 'sub');
    await mkdir(sub);
    await guard(link, sub);
    expect((await lstat(link)).isSymbolicLink()).toBe(true);
    expect(await readlink(link)).toBe(target);
    expect((await stat(target)).mode & 0o777).toBe(0o644);
    expect(await readFile(target, 'utf8')).toBe('target\n');
    expect((await lstat(sub)).isDirectory()).toBe(true);
    expect((await readdir(dir)).sort()).toEqual(['link', 'sub', 'target']); // no temp file left
  });
});

describe('the script renderer writes a new file, never the old one', () => {
  it('an existing readable file and its reader never see the content; a planted link is replaced, its target untouched', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'oscar-script-'));
    try {
      await mkdir(join(dir, 'etc'));
      await writeFile(join(dir, 'etc', 'baked'), 'old\n', { mode: 0o644 });
      await writeFile(join(dir, 'target'), 'target\n', { mode: 0o644 });
      await symlink(join(dir, 'target'), join(dir, 'etc', 'planted'));
      const script = (
        await renderOsc(
          registry,
          config([file('/etc/baked', 0o600), file('/etc/planted', 0o600)]),
          { name: 'n', namespace: 'ns', format: 'script' },
        )
      ).userData.toString('utf8');
      const reader = await open(join(dir, 'etc', 'baked'), 'r');
      try {
        const owner = `${process.getuid?.() ?? 0}:${process.getgid?.() ?? 0}`;
        await promisify(execFile)('/bin/sh', ['-c', script.replaceAll('root:root', owner)], {
          env: { ...process.env, ROOT: dir },
        });
        expect((await reader.readFile()).toString()).toBe('old\n');
      } finally {
        await reader.close();
      }
      const baked = await stat(join(dir, 'etc', 'baked'));
      expect(baked.mode & 0o7777).toBe(0o600);
      expect(await readFile(join(dir, 'etc', 'baked'), 'utf8')).toBe('content of /etc/baked\n');
      expect((await lstat(join(dir, 'etc', 'planted'))).isFile()).toBe(true);
      expect(await readFile(join(dir, 'target'), 'utf8')).toBe('target\n');
      expect((await stat(join(dir, 'target'))).mode & 0o777).toBe(0o644);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
