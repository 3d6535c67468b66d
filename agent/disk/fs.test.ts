import { execFileSync } from 'node:child_process';
import {
  link,
  lstat,
  mkdir,
  mkdtemp,
  readFile,
  readdir,
  rm,
  stat,
  symlink,
  truncate,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ResolvedConfig } from '../../api/resolved.js';
import { Beneath } from './beneath.js';
import {
  Accounts,
  commitTemp,
  isTempName,
  observe,
  randomTempName,
  removeFile,
  removeStaleTemps,
  writeFileAtomic,
  writeTempIn,
} from './fs.js';

let work: string;
let root: string;
let victim: string;

beforeEach(async () => {
  work = await mkdtemp(join(tmpdir(), 'oscar-fs-'));
  root = join(work, 'root');
  await mkdir(join(root, 'home/core/.ssh'), { recursive: true });
  victim = join(work, 'shadow');
  await writeFile(victim, 'root:secret\n', { mode: 0o600 });
});

afterEach(async () => {
  await rm(work, { recursive: true, force: true });
});

async function withRoot<T>(fn: (b: Beneath) => Promise<T>): Promise<T> {
  const b = await Beneath.open(root);
  try {
    return await fn(b);
  } finally {
    await b.close();
  }
}

const config = (files: ResolvedConfig['files']): ResolvedConfig => ({
  type: 'debian',
  purpose: 'reconcile',
  units: [],
  files,
  packages: [],
});

describe('temp files', () => {
  it('a link planted at the temp name of the old scheme (.NAME.oscar-tmp) is never followed', async () => {
    await symlink(victim, join(root, 'home/core/.ssh/.authorized_keys.oscar-tmp'));
    await withRoot((b) =>
      writeFileAtomic(
        b,
        '/home/core/.ssh/authorized_keys',
        Buffer.from('ssh-ed25519 AAAA\n'),
        0o600,
        {
          uid: process.getuid?.() ?? 0,
          gid: process.getgid?.() ?? 0,
        },
      ),
    );
    expect(await readFile(victim, 'utf8')).toBe('root:secret\n');
    expect((await stat(victim)).mode & 0o7777).toBe(0o600);
    expect(await readFile(join(root, 'home/core/.ssh/authorized_keys'), 'utf8')).toBe(
      'ssh-ed25519 AAAA\n',
    );
  });

  it('are created exclusively: a name that exists (a link, a file) is skipped, never opened', async () => {
    const dir = join(root, 'home/core/.ssh');
    await symlink(victim, join(dir, '.oscar-tmp.0000000000000000'));
    await writeFile(join(dir, '.oscar-tmp.1111111111111111'), 'someone else\n');
    const names = [
      '.oscar-tmp.0000000000000000',
      '.oscar-tmp.1111111111111111',
      '.oscar-tmp.2222222222222222',
    ];
    await withRoot(async (b) => {
      const where = await b.parent('/home/core/.ssh/authorized_keys', false);
      if (!where) throw new Error('no parent');
      const temp = await writeTempIn(
        where.dir,
        where.name,
        Buffer.from('key\n'),
        0o600,
        undefined,
        () => names.shift() ?? 'x',
      );
      expect(temp.temp).toBe('.oscar-tmp.2222222222222222');
      await commitTemp(temp);
    });
    expect(await readFile(victim, 'utf8')).toBe('root:secret\n');
    expect(await readFile(join(dir, '.oscar-tmp.1111111111111111'), 'utf8')).toBe('someone else\n');
    expect(await readFile(join(dir, 'authorized_keys'), 'utf8')).toBe('key\n');
  });

  it('have a random name of a fixed length, whatever the target is called', () => {
    const a = randomTempName();
    expect(isTempName(a)).toBe(true);
    expect(a).toHaveLength('.oscar-tmp.'.length + 16);
    expect(randomTempName()).not.toBe(a);
    expect(isTempName('.authorized_keys.oscar-tmp')).toBe(false);
  });

  it('a killed apply leaves temp files that removeStaleTemps removes (only oscar names, only files)', async () => {
    const dir = join(root, 'etc/app');
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, '.oscar-tmp.abcdefabcdefabcd'), 'half');
    await writeFile(join(dir, '.oscar-tmp.not-hex'), 'not ours');
    await mkdir(join(dir, '.oscar-tmp.0123456789abcdef'));
    await writeFile(join(dir, 'app.conf'), 'keep');
    expect(await withRoot((b) => removeStaleTemps(b, ['/etc/app', '/etc/missing']))).toBe(1);
    expect((await readdir(dir)).sort()).toEqual([
      '.oscar-tmp.0123456789abcdef',
      '.oscar-tmp.not-hex',
      'app.conf',
    ]);
  });
});

describe('what is already at a declared path (red-team round 2)', () => {
  it('a hard link to another file (/etc/shadow) is replaced, never written through: the other file keeps its bytes, mode and owner', async () => {
    await mkdir(join(root, 'etc'), { recursive: true });
    await link(victim, join(root, 'etc/app.conf')); // same inode: a write in place would land in it
    const uid = process.getuid?.() ?? 0;
    await withRoot((b) =>
      writeFileAtomic(b, '/etc/app.conf', Buffer.from('app\n'), 0o644, { uid, gid: uid }),
    );
    expect(await readFile(victim, 'utf8')).toBe('root:secret\n');
    const st = await stat(victim);
    expect([st.mode & 0o7777, st.nlink]).toEqual([0o600, 1]);
    expect(await readFile(join(root, 'etc/app.conf'), 'utf8')).toBe('app\n');
  });

  it('why 4294967295 is refused as an owner: chown(2) reads it as "unchanged", so the file keeps its creator (root)', async () => {
    await withRoot((b) =>
      writeFileAtomic(b, '/home/core/x', Buffer.from('x'), 0o644, {
        uid: 4294967295,
        gid: 4294967295,
      }),
    );
    const st = await stat(join(root, 'home/core/x'));
    expect([st.uid, st.gid]).toEqual([process.getuid?.(), process.getgid?.()]);
  });
});

describe('removeFile', () => {
  it('leaves a directory (or a link) found where oscar wrote a file, and says so', async () => {
    await mkdir(join(root, 'etc/app.conf'), { recursive: true });
    await symlink(victim, join(root, 'etc/link.conf'));
    await withRoot(async (b) => {
      expect(await removeFile(b, '/etc/app.conf')).toMatch(
        /is now a directory, which oscar did not write/,
      );
      expect(await removeFile(b, '/etc/link.conf')).toMatch(/is now a symbolic link/);
      expect(await removeFile(b, '/etc/gone.conf')).toBeUndefined();
    });
    expect((await stat(join(root, 'etc/app.conf'))).isDirectory()).toBe(true);
    expect((await lstat(join(root, 'etc/link.conf'))).isSymbolicLink()).toBe(true);
    expect(await readFile(victim, 'utf8')).toBe('root:secret\n');
  });
});

describe('observe', () => {
  it('does not hang on a FIFO, read a device, or read a file of another size', async () => {
    await mkdir(join(root, 'etc'), { recursive: true });
    execFileSync('mkfifo', [join(root, 'etc/fifo.conf')]);
    await writeFile(join(root, 'etc/big.conf'), '');
    await truncate(join(root, 'etc/big.conf'), 64 * 1024 * 1024); // sparse: no disk used
    await writeFile(join(root, 'etc/same.conf'), 'abc');
    const files = ['fifo', 'big', 'same'].map((n) => ({
      path: `/etc/${n}.conf`,
      mode: 0o644,
      user: 'root',
      group: 'root',
      content: Buffer.from('abc'),
    }));
    const disk = await withRoot(async (b) =>
      observe(b, config(files), undefined, {
        owners: false,
        accounts: await Accounts.load(b, root),
      }),
    );
    expect(disk.files.get('/etc/fifo.conf')).toEqual({ content: undefined, mode: -1 });
    expect(disk.files.get('/etc/big.conf')).toEqual({ content: undefined, mode: 0o644 });
    expect(disk.files.get('/etc/same.conf')?.content?.toString()).toBe('abc');
  });

  it("with `only` (a revert's scope), reads only those of the declared paths", async () => {
    await mkdir(join(root, 'etc'), { recursive: true });
    for (const n of ['a', 'b', 'c']) await writeFile(join(root, `etc/${n}.conf`), n);
    const files = ['a', 'b', 'c'].map((n) => ({
      path: `/etc/${n}.conf`,
      mode: 0o644,
      user: 'root',
      group: 'root',
      content: Buffer.from(n),
    }));
    const disk = await withRoot(async (b) =>
      observe(b, config(files), undefined, {
        owners: false,
        accounts: await Accounts.load(b, root),
        only: new Set(['/etc/b.conf', '/etc/undeclared.conf']),
      }),
    );
    expect([...disk.files.keys()]).toEqual(['/etc/b.conf']); // not an undeclared path either
    expect(disk.files.get('/etc/b.conf')?.content?.toString()).toBe('b');
  });
});

// red-team round 3: names another parser reads as numbers, and names an object's prototype has
describe('Accounts: owner names as chown reads them', () => {
  it('looks names up in the root’s passwd and group only: "0x10" and "1e3" are names, "010" is 10; prototype names are not accounts', async () => {
    await mkdir(join(root, 'etc'), { recursive: true });
    await writeFile(
      join(root, 'etc/passwd'),
      'root:x:0:0::/root:/bin/sh\n0x10:x:2001:2001::/:/bin/false\n+::::::\n+@admins::::::\nbad:x:0x5:0::/:/bin/false\n',
    );
    await writeFile(join(root, 'etc/group'), 'root:x:0:\n1e3:x:3001:\n');
    const accounts = await withRoot((b) => Accounts.load(b, root));
    expect(accounts.uid('0x10')).toBe(2001); // not 16
    expect(accounts.gid('1e3')).toBe(3001); // not 1000
    expect(accounts.uid('010')).toBe(10);
    expect(accounts.uid('root')).toBe(0);
    for (const name of ['__proto__', 'constructor', 'toString', 'hasOwnProperty', '+', 'bad']) {
      expect(() => accounts.uid(name)).toThrow(/does not exist/);
    }
  });
});
