// A private file (a mode without group or other read) is never readable by others while
// cloud-init writes it: the rendered cloud-config's bootcmd guard (renderers/private-files.ts)
// run by cloud-init itself, then cloud-init's write_files with a spy on its chmod that records
// the mode the file had while it already held its content; then bootcmd again, as on a reboot.
// In an overlay of the cached Debian node root, chrooted; cloud-init runs under umask 0022 as
// under systemd.
import { afterAll, describe, expect, it } from 'vitest';
import type { ResolvedConfig, ResolvedFile } from '../../api/resolved.js';
import { defaultRegistry, renderOsc } from '../../renderers/registry.js';
import { runInOverlay } from '../support/overlay.js';
import { missing, nodeRoot } from '../support/tools.js';
import { cloudInitSchema, cloudInitSchemaCli, stopValidators } from '../support/validators.js';

const file = (path: string, mode: number, content: string): ResolvedFile => ({
  path,
  mode,
  user: 'root',
  group: 'root',
  content: Buffer.from(content),
});

const config: ResolvedConfig = {
  type: 'debian',
  purpose: 'provision',
  units: [],
  packages: [],
  files: [
    file('/etc/oscar/bootstrap-kubeconfig', 0o600, 'token: secret-1\n'),
    file('/etc/tenant/new/dir/key', 0o640, 'secret-2\n'),
    file('/etc/baked', 0o400, 'secret-3\n'), // the image has it, 0644, with other content
    file('/etc/public', 0o644, 'public\n'),
    file('/etc/planted', 0o600, 'secret-4\n'), // a link to /etc/target is there first
  ],
};

// Runs one cloud-init module as `cloud-init single` does. A boot links /var/lib/cloud/instance to
// the instance's directory (where cloud-init-per keeps its semaphores) and keeps it; `single`
// makes no such link and removes one it finds, so this keeps the link the test made as a boot
// would. For write_files it replaces util.chmod (write_file calls it right after writing the
// content) with one that prints the mode and size the file has at that moment.
const CLOUD_INIT = `import os, sys
from cloudinit import util
module = sys.argv[1]
real_del_file = util.del_file
def del_file(path):
    if path != "/var/lib/cloud/instance":
        real_del_file(path)
util.del_file = del_file
real_chmod = util.chmod
def spy(path, mode):
    if os.path.isfile(path):
        st = os.stat(path)
        print("WRITTEN %s %o %d" % (path, st.st_mode & 0o7777, st.st_size), flush=True)
    real_chmod(path, mode)
if module == "write_files":
    util.chmod = spy
from cloudinit.cmd import main
sys.argv = ["cloud-init", "--file", "/tmp/user-data.yaml", "single", "--name", module,
            "--frequency", "always"]
sys.exit(main.main())
`;

const PATHS = config.files.map((f) => f.path).join(' ');

const SCRIPT = `
umask 022
C="chroot $M"
cp "$W/user-data.yaml" "$M/tmp/user-data.yaml"
cp "$W/cloud-init.py" "$M/tmp/cloud-init.py"
mkdir -p "$M/var/lib/cloud/instances/iid-private"
ln -s /var/lib/cloud/instances/iid-private "$M/var/lib/cloud/instance"
printf 'baked\\n' >"$M/etc/baked"; chmod 0644 "$M/etc/baked"
printf 'target\\n' >"$M/etc/target"; chmod 0644 "$M/etc/target"
ln -s /etc/target "$M/etc/planted"
bootcmd() { $C /usr/bin/python3 /tmp/cloud-init.py bootcmd >/dev/null; }
show() { for p in ${PATHS}; do echo "$1 $p $($C stat -c '%F %a %s' "$p" 2>/dev/null || echo absent)"; done; }
bootcmd
show GUARDED
echo "TARGET $(stat -c '%a %s' "$M/etc/target")"
$C /usr/bin/python3 /tmp/cloud-init.py write_files
echo "SEMAPHORE $(ls "$M/var/lib/cloud/instances/iid-private/sem")"
show FIRST
for p in ${PATHS}; do echo "SUM1 $p $($C sha256sum "$p" | cut -c1-64)"; done
bootcmd
show SECOND
for p in ${PATHS}; do echo "SUM2 $p $($C sha256sum "$p" | cut -c1-64)"; done
`;

function lines(out: string, tag: string): string[] {
  return out
    .split('\n')
    .filter((l) => l.startsWith(`${tag} `))
    .map((l) => l.slice(tag.length + 1));
}

afterAll(() => {
  stopValidators();
});

async function render(): Promise<string> {
  const opts = { name: 'private', namespace: 'e2e', format: 'cloud-config' as const };
  return (await renderOsc(defaultRegistry(), config, opts)).userData.toString('utf8');
}

describe('cloud-config with the guard passes cloud-init schema', () => {
  it('in-process and by the CLI, with no output', async () => {
    const text = await render();
    expect(text).toContain('\nbootcmd:\n');
    expect(await cloudInitSchema(text)).toBe('');
    expect(await cloudInitSchemaCli(text)).toBe('');
  });
});

describe('cloud-config: a private file is written only while no one else can open it', () => {
  it('the guard makes it 0600 first; write_files writes into it; a reboot changes nothing', async (ctx) => {
    if (process.getuid?.() !== 0) {
      missing('root', 'the overlay and chroot need root');
      return ctx.skip('not root');
    }
    const root = nodeRoot();
    if (root === undefined) return ctx.skip('no node root');
    const r = await runInOverlay(root, SCRIPT, {
      'user-data.yaml': await render(),
      'cloud-init.py': CLOUD_INIT,
    });
    const out = r.stdout + r.stderr;
    expect(r.code, out).toBe(0);

    // before write_files: each private path an empty 0600 file, the link and its target untouched
    expect(lines(out, 'GUARDED'), out).toEqual([
      '/etc/oscar/bootstrap-kubeconfig regular empty file 600 0',
      '/etc/tenant/new/dir/key regular empty file 600 0',
      '/etc/baked regular empty file 600 0',
      '/etc/public absent',
      '/etc/planted symbolic link 777 11',
    ]);
    expect(lines(out, 'TARGET'), out).toEqual(['644 7']);

    // while write_files held the content, before its chmod: never readable by group or other
    // (the planted link is cloud-init's to follow, as before: the guard leaves it alone)
    const written = new Map(
      lines(out, 'WRITTEN').map((l) => {
        const [path = '', mode = '', size = ''] = l.split(' ');
        return [path, { mode, size: Number(size) }];
      }),
    );
    for (const f of config.files) {
      const w = written.get(f.path);
      expect(w?.size, f.path).toBe(f.content.length);
      if (f.path === '/etc/public') expect(w?.mode).toBe('644');
      else if (f.path !== '/etc/planted') expect(w?.mode, f.path).toBe('600');
    }

    // a link the image had is left to cloud-init, which writes through it under its umask: the
    // one case the guard does not cover (docs/renderers.md)
    expect(written.get('/etc/planted')).toEqual({ mode: '644', size: 9 });

    // the end state: declared modes and contents; and the second boot's bootcmd changed nothing
    const end = [
      '/etc/oscar/bootstrap-kubeconfig regular file 600 16',
      '/etc/tenant/new/dir/key regular file 640 9',
      '/etc/baked regular file 400 9',
      '/etc/public regular file 644 7',
      '/etc/planted symbolic link 777 11', // cloud-init wrote through it, into /etc/target
    ];
    expect(lines(out, 'FIRST'), out).toEqual(end);
    expect(lines(out, 'SECOND'), out).toEqual(end);
    expect(lines(out, 'SUM2')).toEqual(lines(out, 'SUM1'));
    expect(lines(out, 'SUM1')).toHaveLength(config.files.length);
  });
});
