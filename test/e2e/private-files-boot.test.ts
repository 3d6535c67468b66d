// A real first boot and a reboot: systemd-nspawn boots the cached Debian root with cloud-init's
// NoCloud seed = a rendered cloud-config with private files. After the first boot each file has
// its mode and content, cloud-init is done without error, and the guard's cloud-init-per
// semaphore exists; after a reboot (bootcmd runs again) every file is the same inode with the
// same mode, content and change time: the guard did not run again.
import { afterAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import type { ResolvedConfig, ResolvedFile } from '../../api/resolved.js';
import { defaultRegistry, renderOsc } from '../../renderers/registry.js';
import { bootNode, persistentRoot, uniqueNodeName, type Node } from '../support/nspawn.js';
import { nodeSuiteGate } from '../support/tools.js';

const file = (path: string, mode: number, content: string): ResolvedFile => ({
  path,
  mode,
  user: 'root',
  group: 'root',
  content: Buffer.from(content),
});

const files = [
  file('/etc/oscar/bootstrap-kubeconfig', 0o600, 'token: secret-1\n'),
  file('/etc/tenant/key', 0o640, 'secret-2\n'),
  file('/etc/tenant/public.conf', 0o644, 'public\n'),
];
const config: ResolvedConfig = {
  type: 'debian',
  purpose: 'provision',
  units: [],
  packages: [],
  files,
};

const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

/** mode, size, inode and change time of each file, and its sha256, as the node sees them. */
async function facts(node: Node): Promise<string[]> {
  const out: string[] = [];
  for (const f of files) {
    const st = await node.execOk(['stat', '-c', '%a %s %i %Z %U:%G', f.path]);
    const sum = await node.execOk(['sha256sum', f.path]);
    out.push(`${f.path} ${st.stdout.trim()} ${sum.stdout.slice(0, 64)}`);
  }
  return out;
}

describe('a private file through a real cloud-init boot and a reboot', () => {
  it('ends at its mode with its content; the reboot leaves it untouched', async (ctx) => {
    const gate = nodeSuiteGate(['systemd-nspawn', 'nsenter', 'pgrep', 'mount']);
    if (gate.skip !== undefined) return ctx.skip(gate.skip);
    const { userData } = await renderOsc(defaultRegistry(), config, {
      name: 'private-boot',
      namespace: 'e2e',
      format: 'cloud-config',
    });
    expect(userData.toString()).toContain('\nbootcmd:\n');
    const disk = await persistentRoot(gate.root);
    cleanups.push(disk.cleanup);
    const node = await bootNode({
      root: disk.root,
      name: uniqueNodeName('private'),
      volatile: false,
      seed: { userData: userData.toString('utf8') },
    });
    cleanups.push(() => node.stop());
    await node.waitCloudInit(180_000);

    const first = await facts(node);
    const want = files.map((f) => {
      const sha = createHash('sha256').update(f.content).digest('hex');
      return `${f.path} ${f.mode.toString(8)} ${f.content.length} root:root ${sha}`;
    });
    // drop inode and change time for the comparison with the declaration
    expect(
      first.map((l) =>
        l
          .split(' ')
          .filter((_, i) => i !== 3 && i !== 4)
          .join(' '),
      ),
    ).toEqual(want);
    await node.execOk([
      'test',
      '-e',
      '/var/lib/cloud/instance/sem/bootper.oscar_private_files.instance',
    ]);
    const log = await node.execOk(['cat', '/var/log/cloud-init.log']);
    expect(log.stdout).toMatch(/Running module bootcmd/);

    await node.exec(['systemctl', 'reboot'], { timeoutMs: 30_000 });
    await node.waitBoot(1, 120_000);
    await node.waitCloudInit(180_000);
    expect(node.boots).toBe(2);
    const log2 = await node.execOk(['cat', '/var/log/cloud-init.log']);
    // bootcmd ran on the second boot too (it runs on every boot); the guard inside did not
    expect(log2.stdout.split('Running module bootcmd').length - 1).toBeGreaterThanOrEqual(2);
    expect(await facts(node)).toEqual(first);
  }, 600_000);
});
