import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Beneath } from './beneath.js';
import { parseDpkgStatus, readPackageDatabase } from './dpkg.js';

const STATUS = `Package: chrony
Status: install ok installed
Priority: optional
Version: 4.3-2+deb12u1
Description: Versatile implementation of the Network Time Protocol
 It can synchronise the system clock with NTP servers.
 Version: 9.9 (a continuation line, not a field)

Package: jq
Status: deinstall ok config-files
Version: 1.6-2.1

Package: libc6
Status: install ok installed
Architecture: amd64
Version: 2.36-9

Package: libc6
Status: install ok half-configured
Architecture: i386
Version: 2.36-8
`;

let root: string;
beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'oscar-dpkg-'));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

describe("dpkg's status file", () => {
  it('each package with its version and state; continuation lines are not fields; an installed architecture wins', () => {
    expect(parseDpkgStatus(STATUS)).toEqual(
      new Map([
        ['chrony', { version: '4.3-2+deb12u1', state: 'installed' }],
        ['jq', { version: '1.6-2.1', state: 'config-files' }],
        ['libc6', { version: '2.36-9', state: 'installed' }],
      ]),
    );
    expect(parseDpkgStatus('')).toEqual(new Map());
    expect(parseDpkgStatus('Package: x\nVersion: 1\n')).toEqual(new Map()); // no Status: not listed
  });

  it('read beneath the root; none on a node without dpkg, or behind a link', async () => {
    const open = () => Beneath.open(root);
    let b = await open();
    expect(await readPackageDatabase(b)).toBeUndefined();
    await b.close();
    await mkdir(join(root, 'var/lib/dpkg'), { recursive: true });
    await writeFile(join(root, 'var/lib/dpkg/status'), STATUS);
    b = await open();
    expect((await readPackageDatabase(b))?.get('chrony')?.version).toBe('4.3-2+deb12u1');
    await b.close();
    // a planted link on the way is refused, not followed
    await rm(join(root, 'var/lib'), { recursive: true });
    await mkdir(join(root, 'elsewhere/dpkg'), { recursive: true });
    await writeFile(join(root, 'elsewhere/dpkg/status'), STATUS);
    await mkdir(join(root, 'var'), { recursive: true });
    await symlink(join(root, 'elsewhere'), join(root, 'var/lib'));
    b = await open();
    expect(await readPackageDatabase(b)).toBeUndefined();
    await b.close();
  });
});
