import { describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import { mkdtemp, mkdir, readdir, rm, symlink, writeFile, chmod } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  applyCloudConfigWriteFiles,
  applyIgnitionFiles,
  diffTrees,
  pick,
  runInOverlay,
  snapshotTree,
  type TreeEntry,
} from './overlay.js';
import { nodeRoot, requireTools } from './tools.js';

describe('snapshotTree / diffTrees', () => {
  it('records type, mode, owner, contents and link targets, and diffs them readably', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'oscar-snap-'));
    try {
      await mkdir(join(dir, 'etc'), { mode: 0o750 });
      await chmod(join(dir, 'etc'), 0o750);
      await writeFile(join(dir, 'etc', 'a'), 'one');
      await chmod(join(dir, 'etc', 'a'), 0o600);
      await symlink('/etc/a', join(dir, 'etc', 'l'));
      const before = await snapshotTree(dir);
      expect([...before.keys()]).toEqual(['/', '/etc', '/etc/a', '/etc/l']);
      const a = before.get('/etc/a');
      expect(a?.type).toBe('file');
      expect(a?.mode).toBe(0o600);
      expect(a?.type === 'file' && a.bytes.toString()).toBe('one');
      expect(before.get('/etc')?.mode).toBe(0o750);
      const l = before.get('/etc/l');
      expect(l?.type === 'symlink' && l.linkTarget).toBe('/etc/a');
      expect(diffTrees(before, await snapshotTree(dir))).toEqual([]);

      await writeFile(join(dir, 'etc', 'a'), 'two');
      await writeFile(join(dir, 'etc', 'b'), 'new');
      await rm(join(dir, 'etc', 'l'));
      const after = await snapshotTree(dir);
      expect(diffTrees(before, after)).toEqual([
        '~ /etc/a: file 0:0 0600 3 bytes != file 0:0 0600 3 bytes (contents differ)',
        '+ /etc/b: file 0:0 0644 3 bytes',
        '- /etc/l: symlink 0:0 0777 -> /etc/a',
      ]);
      expect([...pick(after, ['file']).keys()]).toEqual(['/etc/a', '/etc/b']);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

// "Applied for real": needs root, unshare, the cached node root and the Debian packages.
const ready = (): string | undefined =>
  requireTools(['unshare', 'systemctl', '/usr/lib/dracut/modules.d/30ignition/ignition'])
    ? nodeRoot()
    : undefined;

const fileEntry = (e: TreeEntry | undefined): string =>
  e?.type === 'file'
    ? `${e.mode.toString(8)} ${e.uid}:${e.gid} ${e.bytes.toString()}`
    : String(e?.type);

describe('applyCloudConfigWriteFiles', () => {
  it('writes files with mode, owner and parents into an overlay, leaving the root alone', async (ctx) => {
    const root = ready();
    if (root === undefined) return ctx.skip('node root unavailable');
    const res = await applyCloudConfigWriteFiles(
      [
        '#cloud-config',
        'write_files:',
        '  - path: /etc/oscar/a.conf',
        '    content: "hi\\n"',
        "    permissions: '0600'",
        '  - path: /usr/local/bin/x.sh',
        '    content: "#!/bin/sh\\n"',
        "    permissions: '0755'",
        '    owner: nobody:nogroup',
        '',
      ].join('\n'),
      { root },
    );
    try {
      expect([...res.changes.keys()]).toEqual([
        '/etc/oscar',
        '/etc/oscar/a.conf',
        '/usr/local/bin/x.sh',
      ]);
      expect(fileEntry(res.changes.get('/etc/oscar/a.conf'))).toBe('600 0:0 hi\n');
      expect(fileEntry(res.changes.get('/usr/local/bin/x.sh'))).toBe('755 65534:65534 #!/bin/sh\n');
      const rootView = await snapshotTree(join(root, 'etc', 'oscar')).catch(() => new Map());
      expect(rootView.size).toBe(0); // the cached root did not change
    } finally {
      await res.cleanup();
    }
  });

  it('also writes the entries marked defer: true (write_files_deferred), after the others', async (ctx) => {
    const root = ready();
    if (root === undefined) return ctx.skip('node root unavailable');
    const res = await applyCloudConfigWriteFiles(
      [
        '#cloud-config',
        'write_files:',
        '  - path: /etc/oscar/late.conf',
        '    content: "late\\n"',
        "    permissions: '0640'",
        '    owner: "daemon:daemon"',
        '    defer: true',
        '  - path: /etc/oscar/early.conf',
        '    content: "early\\n"',
        "    permissions: '0600'",
        '',
      ].join('\n'),
      { root },
    );
    try {
      expect(fileEntry(res.changes.get('/etc/oscar/early.conf'))).toBe('600 0:0 early\n');
      expect(fileEntry(res.changes.get('/etc/oscar/late.conf'))).toBe('640 1:1 late\n');
    } finally {
      await res.cleanup();
    }
  });

  it('fails with cloud-init output on a config it cannot apply', async (ctx) => {
    const root = ready();
    if (root === undefined) return ctx.skip('node root unavailable');
    await expect(
      applyCloudConfigWriteFiles(
        '#cloud-config\nwrite_files:\n  - path: /etc/x\n    owner: nosuchuser\n    content: x\n',
        {
          root,
        },
      ),
    ).rejects.toThrow(/write_files/);
  });
});

describe('applyIgnitionFiles', () => {
  it('writes files, links, units and drop-ins, and enables units by preset', async (ctx) => {
    const root = ready();
    if (root === undefined) return ctx.skip('node root unavailable');
    const unit = '[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n';
    const config = {
      ignition: { version: '3.3.0' },
      storage: {
        files: [
          { path: '/etc/oscar/a.conf', mode: 0o600, contents: { source: 'data:,hi%0A' } },
          {
            path: '/usr/local/bin/x.sh',
            mode: 0o755,
            user: { name: 'nobody' },
            group: { name: 'nogroup' },
            contents: { source: 'data:,%23!%2Fbin%2Fsh%0A' },
          },
        ],
        links: [{ path: '/etc/oscar/link', target: '/etc/oscar/a.conf' }],
      },
      systemd: {
        units: [
          {
            name: 'x.service',
            enabled: true,
            contents: unit,
            dropins: [{ name: '10-env.conf', contents: '[Service]\nEnvironment=A=1\n' }],
          },
          { name: 'y.service', enabled: false, contents: unit },
        ],
      },
    };
    const res = await applyIgnitionFiles(JSON.stringify(config), { root });
    try {
      expect(fileEntry(res.changes.get('/etc/oscar/a.conf'))).toBe('600 0:0 hi\n');
      expect(fileEntry(res.changes.get('/usr/local/bin/x.sh'))).toBe('755 65534:65534 #!/bin/sh\n');
      const link = res.changes.get('/etc/oscar/link');
      expect(link?.type === 'symlink' && link.linkTarget).toBe('/etc/oscar/a.conf');
      expect(fileEntry(res.changes.get('/etc/systemd/system/x.service.d/10-env.conf'))).toBe(
        '644 0:0 [Service]\nEnvironment=A=1\n',
      );
      const wants = res.changes.get('/etc/systemd/system/multi-user.target.wants/x.service');
      expect(wants?.type === 'symlink' && wants.linkTarget).toBe('/etc/systemd/system/x.service');
      expect(res.changes.has('/etc/systemd/system/multi-user.target.wants/y.service')).toBe(false);
      expect(res.changes.has('/etc/.ignition-result.json')).toBe(false); // bookkeeping
    } finally {
      await res.cleanup();
    }
  });

  it('cloud-config and Ignition rendering the same file produce the same entry', async (ctx) => {
    const root = ready();
    if (root === undefined) return ctx.skip('node root unavailable');
    const cc = await applyCloudConfigWriteFiles(
      '#cloud-config\nwrite_files:\n  - path: /etc/oscar/same\n    content: "same\\n"\n    permissions: \'0640\'\n',
      { root },
    );
    const ign = await applyIgnitionFiles(
      JSON.stringify({
        ignition: { version: '3.3.0' },
        storage: {
          files: [{ path: '/etc/oscar/same', mode: 0o640, contents: { source: 'data:,same%0A' } }],
        },
      }),
      { root },
    );
    try {
      expect(
        diffTrees(pick(cc.changes, ['file', 'symlink']), pick(ign.changes, ['file', 'symlink'])),
      ).toEqual([]);
    } finally {
      await cc.cleanup();
      await ign.cleanup();
    }
  });
});

describe('runInOverlay', () => {
  it('runs a script over an overlay of the root with its files at $W, and leaves nothing behind', async (ctx) => {
    const root = ready();
    if (root === undefined) return ctx.skip('node root unavailable');
    const before = (await readdir(tmpdir())).filter((n) => n.startsWith('oscar-overlay-'));
    const r = await runInOverlay(
      root,
      [
        '"$W/tool.sh" > "$M/etc/oscar-overlay-test"',
        'chroot "$M" cat /etc/oscar-overlay-test',
        `chroot "$M" sh -c '. /etc/os-release && echo "$ID"'`,
        'echo "$W" > "$M/tmp/work-dir"',
        'cat "$M/tmp/work-dir"',
      ].join('\n'),
      { 'tool.sh': '#!/bin/sh\necho from-tool\n' },
    );
    expect(r.code, r.stderr).toBe(0);
    const [tool, os, work] = r.stdout.trim().split('\n');
    expect(tool).toBe('from-tool');
    expect(os).toBe('debian');
    expect(existsSync(join(root, 'etc', 'oscar-overlay-test'))).toBe(false); // root untouched
    expect(work !== undefined && existsSync(work)).toBe(false); // work directory removed
    const after = (await readdir(tmpdir())).filter((n) => n.startsWith('oscar-overlay-'));
    expect(after).toEqual(before);
  });

  it('reports a failing script with its exit code and output', async (ctx) => {
    const root = ready();
    if (root === undefined) return ctx.skip('node root unavailable');
    const r = await runInOverlay(root, 'echo broken >&2\nexit 3');
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('broken');
  });
});
