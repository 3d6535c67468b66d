/**
 * The one rule for what a node can take in place. The agent refuses the rest (ReplacementNeeded)
 * and the Cluster API Runtime Extension (controller/extension/) answers CanUpdateMachine(Set) from
 * this same function, so the two can never disagree about which change needs a new machine.
 */
import type { ResolvedConfig } from './resolved.js';

/** What of a config the rule reads: its OS and its container runtime. */
export type InPlaceFacts = Pick<ResolvedConfig, 'type' | 'cri'>;

/** Why `desired` needs a new machine rather than an apply on top of `last`, or undefined. */
export function replacementReason(
  last: InPlaceFacts | undefined,
  desired: InPlaceFacts,
): string | undefined {
  if (!last) return undefined;
  if (last.type !== desired.type) {
    return `spec.type changed from "${last.type}" to "${desired.type}": an OS cannot become another in place; replace the machine`;
  }
  // containerd is the only runtime today; its cgroup driver is what a running node cannot change
  const was = last.cri;
  const now = desired.cri;
  if (was && now && was.cgroupDriver !== now.cgroupDriver) {
    return `spec.cri.cgroupDriver changed from ${was.cgroupDriver} to ${now.cgroupDriver}: running containers and the kubelet cannot switch cgroup drivers in place; replace the machine`;
  }
  return undefined;
}
