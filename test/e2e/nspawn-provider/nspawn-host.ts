// Where the nspawn provider's machines run: each on its own overlay of the cached node root, with
// what a container on this host needs for kubelet (kubelet-support.ts) and what a cloud's
// metadata would give a real machine (its providerID, and here its own kubelet port, since the
// machines share the host's network).
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../../hack/testenv/proc.js';
import { bootNode, persistentRoot, type Node } from '../../support/nspawn.js';
import { kubeletBinds, prepareKubeletImage } from '../kubelet-support.js';
import { kubeletDropIn } from './decide.js';
import type { Booted, MachineHost } from './provider.js';

export interface NspawnMachine extends Booted {
  readonly node: Node;
  /** When boot began (ms since the epoch), for the bench. */
  readonly bootedAt: number;
}

export interface NspawnHostOptions {
  /** The cached node root (nodeRoot()). */
  lower: string;
  /** kubelet's directory (nodeBinaries()). */
  bin: string;
}

export function nspawnHost(o: NspawnHostOptions): MachineHost<NspawnMachine> {
  return {
    boot: async ({ machine, userData }) => {
      const cleanups: (() => Promise<unknown>)[] = [];
      const undo = async (): Promise<void> => {
        for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
      };
      try {
        const disk = await persistentRoot(o.lower);
        cleanups.push(disk.cleanup);
        await prepareKubeletImage(disk.root);
        const dropIns = join(disk.root, 'etc/kubernetes/kubelet.conf.d');
        await mkdir(dropIns, { recursive: true });
        const port = await freePort('127.0.0.1');
        await writeFile(join(dropIns, '91-machine.conf'), kubeletDropIn(machine, port));
        const containerd = await mkdtemp(join(tmpdir(), 'oscar-containerd-'));
        cleanups.push(() => rm(containerd, { recursive: true, force: true }));
        const bootedAt = Date.now();
        const node = await bootNode({
          root: disk.root,
          name: machine,
          volatile: false,
          seed: { userData },
          binds: kubeletBinds(o.bin, containerd),
          writableProcSys: true,
        });
        cleanups.push(() => node.stop());
        return {
          machine,
          node,
          bootedAt,
          stop: undo,
        };
      } catch (error) {
        await undo();
        throw error;
      }
    },
  };
}
