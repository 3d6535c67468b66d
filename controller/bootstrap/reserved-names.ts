/**
 * A config's user data Secret is named after the config (as Cluster API's kubeadm provider does),
 * in the namespace where oscar also names an OSC's Secrets: `oscar-<osc>-provision`,
 * `oscar-<osc>-reconcile` and the revision slots `oscar-<osc>-rev-0…4`. Every machine following OSC
 * `<osc>` may read the last two forms (its Role names them, docs/identity.md), so a config named
 * `oscar-rec-rev-0` would put its machine's bootstrap token — and with it that machine's identity —
 * where every other machine of OSC `rec` reads; and the OSC controller would overwrite it. A config
 * with such a name gets no user data, with a reason naming the fix.
 */
import { createHash } from 'node:crypto';
import { ROLLOUT_LIMITS } from '../../api/constants.js';

const OSC_SECRET = new RegExp(
  `^oscar-.+-(?:provision|reconcile|rev-[0-${String(ROLLOUT_LIMITS.revisionSlots - 1)}])$`,
);

/** Why `name` cannot be a user data Secret's name, or undefined. */
export function reservedDataSecretName(name: string): string | undefined {
  if (!OSC_SECRET.test(name)) return undefined;
  return `The config's user data Secret would be named ${name}, a name of the form oscar gives an OperatingSystemConfig's Secrets (oscar-<osc>-provision, -reconcile, -rev-N), which the machines following that OSC may read: the bootstrap token would be theirs to take. Rename the config (or its MachineDeployment).`;
}

/**
 * The longest machine name oscar can issue an identity for. The names derived from it must fit in
 * the 253 characters of a Kubernetes name: the agent's CSR `oscar-<machine>-<10 hex>` (17 more),
 * the Role, RoleBinding and ClusterRole `oscar-node-<machine>` (11 more). Without this a machine
 * of a longer name booted, and its agent's CSR or the approver's Role was refused by the API
 * server after the token was spent.
 */
export const MACHINE_NAME_MAX = 253 - 'oscar--0123456789'.length;

/** Why no identity can be issued to a machine of this name, or undefined. */
export function machineNameTooLong(machine: string): string | undefined {
  if (machine.length <= MACHINE_NAME_MAX) return undefined;
  return `The machine's name has ${String(machine.length)} characters; oscar names its certificate request oscar-<machine>-<hash> and its Role oscar-node-<machine>, which hold at most ${String(MACHINE_NAME_MAX)}. Give the config (or its Machine) a shorter name.`;
}

/**
 * The value of the user data Secret's label `bootstrap.oscar.dev/config`: the config's name when
 * it fits in a label value (63 characters), else its first 52 characters and a hash. The label
 * marks the Secret as a config's (the informer selects by it); which config is read from the
 * Secret's controller owner reference, so a shortened value loses nothing. Before, a config name
 * of 64–253 characters made the Secret's create fail at the API server on every retry.
 */
export function configLabelValue(name: string): string {
  if (name.length <= 63) return name;
  const hash = createHash('sha256').update(name).digest('hex').slice(0, 10);
  return `${name.slice(0, 52).replace(/[-.]+$/, '')}-${hash}`;
}
