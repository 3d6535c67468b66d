// File apt repositories for the node tests: packages built with dpkg-deb, the Packages and Release
// indexes written here (no dpkg-dev needed), optionally signed with a throwaway gpg key the way a
// vendor's repository is, so a node installs from them with no network.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface DebPackage {
  name: string;
  version: string;
  description: string;
  /** Files of the package: path inside the package → content and mode. */
  files: Record<string, { content: string; mode: number }>;
  /** The postinst maintainer script, if any (a package that creates its user has one). */
  postinst?: string;
}

function check(what: string, r: ReturnType<typeof spawnSync>): void {
  if (r.status !== 0) {
    throw new Error(`${what} failed (exit ${String(r.status)}): ${String(r.stderr)}`);
  }
}

async function buildDeb(
  dir: string,
  pkg: DebPackage,
): Promise<{ file: string; control: string[] }> {
  const build = join(dir, `build-${pkg.name}`);
  await mkdir(join(build, 'DEBIAN'), { recursive: true });
  const control = [
    `Package: ${pkg.name}`,
    `Version: ${pkg.version}`,
    'Architecture: all',
    'Maintainer: oscar e2e <e2e@oscar.invalid>',
    `Description: ${pkg.description}`,
  ];
  await writeFile(join(build, 'DEBIAN/control'), `${control.join('\n')}\n`);
  if (pkg.postinst !== undefined) {
    await writeFile(join(build, 'DEBIAN/postinst'), pkg.postinst, { mode: 0o755 });
  }
  for (const [path, { content, mode }] of Object.entries(pkg.files)) {
    await mkdir(join(build, path, '..'), { recursive: true });
    await writeFile(join(build, path), content, { mode });
  }
  const file = `${pkg.name}_${pkg.version}_all.deb`;
  check(
    'dpkg-deb',
    spawnSync('dpkg-deb', ['--root-owner-group', '--build', build, join(dir, file)], {
      encoding: 'utf8',
    }),
  );
  await rm(build, { recursive: true });
  return { file, control };
}

/**
 * A flat repository in `dir` ("deb file:DIR ./") holding `packages`. With `sign`, its Release is
 * signed (InRelease) by a new key, whose public keyring (binary, for signed-by=) is returned.
 */
export async function buildAptRepo(
  dir: string,
  packages: readonly DebPackage[],
  opts: { sign?: boolean } = {},
): Promise<{ keyring?: Buffer }> {
  await mkdir(dir, { recursive: true });
  const stanzas: string[] = [];
  for (const pkg of packages) {
    const { file, control } = await buildDeb(dir, pkg);
    const bytes = await readFile(join(dir, file));
    stanzas.push(
      [
        ...control,
        `Filename: ./${file}`,
        `Size: ${bytes.length}`,
        `SHA256: ${createHash('sha256').update(bytes).digest('hex')}`,
      ].join('\n'),
    );
  }
  await writeFile(join(dir, 'Packages'), `${stanzas.join('\n\n')}\n`);
  const index = await readFile(join(dir, 'Packages'));
  const release = [
    'Origin: oscar-e2e',
    'Label: oscar-e2e',
    'Architectures: all',
    `Date: ${new Date().toUTCString().replace('GMT', 'UTC')}`,
    'SHA256:',
    ` ${createHash('sha256').update(index).digest('hex')} ${index.length} Packages`,
  ];
  await writeFile(join(dir, 'Release'), `${release.join('\n')}\n`);
  if (opts.sign !== true) return {};
  const home = await mkdtemp(join(tmpdir(), 'oscar-gpg-'));
  const env = { ...process.env, GNUPGHOME: home };
  const gpg = (args: string[]): Buffer => {
    const r = spawnSync(
      'gpg',
      ['--batch', '--pinentry-mode', 'loopback', '--passphrase', '', ...args],
      {
        env,
      },
    );
    check(`gpg ${args[0] ?? ''}`, r);
    return r.stdout;
  };
  try {
    gpg(['--quick-gen-key', 'oscar e2e <e2e@oscar.invalid>', 'ed25519', 'sign', 'never']);
    gpg(['--clearsign', '--output', join(dir, 'InRelease'), join(dir, 'Release')]);
    return { keyring: gpg(['--export']) };
  } finally {
    spawnSync('gpgconf', ['--kill', 'gpg-agent'], { env });
    await rm(home, { recursive: true, force: true });
  }
}
