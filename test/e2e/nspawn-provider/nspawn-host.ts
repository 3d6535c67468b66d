// Where the nspawn provider's machines run: each on its own overlay of the cached node root, with
// what a container on this host needs for kubelet (kubelet-support.ts) and what a cloud's
// metadata would give a real machine (its providerID, and here its own kubelet port, since the
// machines share the host's network).
import { freePort } from '../../../hack/testenv/proc.js';
import type { Node } from '../../support/nspawn.js';
import { bootKubeletMachine } from '../../support/kubelet-support.js';
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
      const port = await freePort('127.0.0.1');
      const booted = await bootKubeletMachine({
        lower: o.lower,
        bin: o.bin,
        name: machine,
        userData,
        dropIns: { '91-machine.conf': kubeletDropIn(machine, port) },
      });
      return { machine, node: booted.node, bootedAt: booted.bootedAt, stop: booted.stop };
    },
  };
}
