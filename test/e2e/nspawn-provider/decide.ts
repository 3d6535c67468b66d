// What the nspawn provider does next for one object: pure decisions over what it read and what it
// runs, so the rules are unit-tested (test/unit/nspawn-provider.test.ts) apart from the machines.

export const FINALIZER = 'nspawn.test.oscar.dev/machine';

interface Meta {
  name: string;
  uid?: string;
  deletionTimestamp?: string;
  finalizers?: string[];
  ownerReferences?: { kind: string; name: string; apiVersion?: string }[];
}

export interface NspawnMachineObject {
  metadata: Meta;
  spec?: { providerID?: string };
  status?: {
    initialization?: { provisioned?: boolean };
    addresses?: { type: string; address: string }[];
  };
}

export interface MachineObject {
  metadata: Meta;
  spec?: { bootstrap?: { dataSecretName?: string } };
}

export type Address = { type: 'Hostname' | 'InternalIP'; address: string };

export type MachineStep =
  /** Being deleted: stop and remove the nspawn machine (if any), then drop the finalizer. */
  | { kind: 'release' }
  /** Put the finalizer on first, so a delete always reaches the machine. */
  | { kind: 'claim' }
  | { kind: 'wait'; why: string }
  /** Boot `machine` from the user data in Secret `secret`. */
  | { kind: 'boot'; machine: string; secret: string }
  /** Running: publish what Cluster API reads. */
  | { kind: 'report'; providerID: string; addresses: Address[] }
  | { kind: 'none' };

/** The providerID a machine's kubelet registers with (its --provider-id / providerID). */
export function providerIdOf(machine: string): string {
  return `nspawn:///${machine}`;
}

/**
 * The addresses of a machine: it shares the host's network (it reaches the test API server on
 * loopback), so its one address is the host's loopback.
 */
export function addressesOf(machine: string): Address[] {
  return [
    { type: 'Hostname', address: machine },
    { type: 'InternalIP', address: '127.0.0.1' },
  ];
}

function ownerMachine(infra: NspawnMachineObject): string | undefined {
  return infra.metadata.ownerReferences?.find(
    (r) => r.kind === 'Machine' && (r.apiVersion ?? '').startsWith('cluster.x-k8s.io/'),
  )?.name;
}

/** Addresses compared by value: the API server gives an object's keys back in its own order. */
const addressKey = (as: readonly { type: string; address: string }[] | undefined): string =>
  (as ?? []).map((a) => `${a.type}=${a.address}`).join(',');

function reported(infra: NspawnMachineObject, machine: string): boolean {
  return (
    infra.spec?.providerID === providerIdOf(machine) &&
    infra.status?.initialization?.provisioned === true &&
    addressKey(infra.status.addresses) === addressKey(addressesOf(machine))
  );
}

/**
 * One NspawnMachine's next step. `owner` is its Machine as read (undefined: not found), `running`
 * whether this provider runs an nspawn machine for it (booting counts).
 */
export function machineStep(
  infra: NspawnMachineObject,
  owner: MachineObject | undefined,
  running: boolean,
): MachineStep {
  if (infra.metadata.deletionTimestamp) {
    return (infra.metadata.finalizers ?? []).includes(FINALIZER) || running
      ? { kind: 'release' }
      : { kind: 'none' };
  }
  if (!(infra.metadata.finalizers ?? []).includes(FINALIZER)) return { kind: 'claim' };
  const machine = ownerMachine(infra);
  if (!machine) return { kind: 'wait', why: 'no owner Machine yet' };
  if (!owner) return { kind: 'wait', why: `Machine ${machine} not found` };
  if (!running) {
    const secret = owner.spec?.bootstrap?.dataSecretName;
    if (!secret) return { kind: 'wait', why: `Machine ${machine} has no bootstrap data yet` };
    return { kind: 'boot', machine, secret };
  }
  if (reported(infra, machine)) return { kind: 'none' };
  return { kind: 'report', providerID: providerIdOf(machine), addresses: addressesOf(machine) };
}

/**
 * The kubelet drop-in the provider writes into a machine's image — what a cloud's metadata gives
 * a real machine: its providerID, and its own ports (the machines share the host's network).
 */
export function kubeletDropIn(machine: string, port: number): string {
  return [
    'apiVersion: kubelet.config.k8s.io/v1beta1',
    'kind: KubeletConfiguration',
    `providerID: ${providerIdOf(machine)}`,
    `port: ${String(port)}`,
    'healthzPort: 0',
    '',
  ].join('\n');
}
