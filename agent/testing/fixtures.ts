/** Small builders of resolved configs for the agent's tests and benchmarks. */
import { canonicalWithChecksum } from '../../api/canonical.js';
import type { ResolvedConfig, ResolvedFile, ResolvedUnit } from '../../api/resolved.js';
import type { Desired } from '../state.js';

export function file(path: string, data: string, extra: Partial<ResolvedFile> = {}): ResolvedFile {
  return { path, mode: 0o644, user: 'root', group: 'root', content: Buffer.from(data), ...extra };
}

export function unit(name: string, extra: Partial<ResolvedUnit> = {}): ResolvedUnit {
  return {
    name,
    enable: true,
    mask: false,
    command: 'start',
    onChange: 'restart',
    content: `[Unit]\nDescription=${name}\n\n[Service]\nExecStart=/bin/sleep infinity\nExecReload=/bin/true\n\n[Install]\nWantedBy=multi-user.target\n`,
    dropIns: [],
    filePaths: [],
    ...extra,
  };
}

export function config(units: ResolvedUnit[], files: ResolvedFile[] = []): ResolvedConfig {
  const byName = (a: { name: string }, b: { name: string }): number =>
    a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
  return {
    type: 'debian',
    purpose: 'reconcile',
    units: [...units].sort(byName),
    files: [...files].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0)),
    packages: [],
  };
}

export function desiredOf(c: ResolvedConfig): Desired {
  const { bytes, checksum } = canonicalWithChecksum(c);
  return { config: c, checksum, bytes };
}

/**
 * A large config: `files` files spread over 10 directories and `units` units, each unit listing
 * a few of the files; `version` changes every file's content (and every unit's drop-in).
 */
export function bigConfig(files: number, units: number, version: string): ResolvedConfig {
  const fs: ResolvedFile[] = [];
  for (let i = 0; i < files; i++) {
    fs.push(file(`/etc/big/d${i % 10}/f${i}.conf`, `file ${i} version ${version}\n`.repeat(4)));
  }
  const us: ResolvedUnit[] = [];
  for (let i = 0; i < units; i++) {
    us.push(
      unit(`big${i}.service`, {
        enable: i % 2 === 0,
        dropIns: [{ name: '10-oscar.conf', content: `[Service]\nEnvironment=V=${version}\n` }],
        filePaths: [`/etc/big/d${i % 10}/f${i}.conf`],
      }),
    );
  }
  return config(us, fs);
}
