// A real reboot of an nspawn node (issue 25): `systemctl reboot` inside makes systemd-nspawn exit
// with 133 and the harness boots the machine again on the same persistent root, as
// systemd-nspawn@.service does (RestartForceExitStatus=133) — a new boot id, the same files.
import { afterAll, describe, expect, it } from 'vitest';
import { bootNode, persistentRoot, uniqueNodeName, type Node } from '../support/nspawn.js';
import { nodeRoot, requireTools } from '../support/tools.js';

const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
}, 60_000);

async function bootId(node: Node): Promise<string> {
  return (await node.execOk(['cat', '/proc/sys/kernel/random/boot_id'])).stdout.trim();
}

describe('a node that reboots', () => {
  it('comes back on the same root with a new boot id, and stops cleanly afterwards', async (ctx) => {
    if (!requireTools(['systemd-nspawn', 'nsenter', 'pgrep', 'mount'])) {
      ctx.skip('systemd-nspawn, nsenter, pgrep or mount missing (run hack/deps.sh)');
      return;
    }
    const lower = nodeRoot();
    if (lower === undefined) {
      ctx.skip('no node root (see the printed reason)');
      return;
    }
    const disk = await persistentRoot(lower);
    cleanups.push(disk.cleanup);
    const node = await bootNode({
      root: disk.root,
      name: uniqueNodeName('reboot'),
      volatile: false,
      disableCloudInit: true,
    });
    cleanups.push(() => node.stop());
    await node.waitRunning();
    expect(node.boots).toBe(1);
    const before = { boot: await bootId(node), nspawn: node.pid, init: node.systemdPid };
    await node.execOk(['sh', '-c', 'echo kept > /var/lib/reboot-proof']);

    // the command may die with the machine; the proof is the next boot
    await node.exec(['systemctl', 'reboot'], { timeoutMs: 30_000 });
    await node.waitBoot(1, 120_000);
    await node.waitRunning();

    expect(node.boots).toBe(2);
    expect(await bootId(node)).not.toBe(before.boot);
    expect(node.pid).not.toBe(before.nspawn);
    expect(node.systemdPid).not.toBe(before.init);
    expect(() => process.kill(before.nspawn, 0)).toThrow();
    expect((await node.execOk(['cat', '/var/lib/reboot-proof'])).stdout).toBe('kept\n');

    await node.stop();
    expect(node.processes()).toEqual([]);
    expect(() => process.kill(node.pid, 0)).toThrow();
    expect(node.boots).toBe(2); // a halt is not a reboot
  }, 300_000);
});
