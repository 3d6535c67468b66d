/**
 * The seams between grant mode's admission (./grant-admission.ts), the rollback boot
 * (./rollback-boot.ts) and the reboot inside try mode (agent/reboot/reboot.ts).
 */
import type { TryPolicy } from './grant.js';
import type { TryRecord } from './try-state.js';

/**
 * A try's life beyond apply, verify and verdict, for a revision that reboots the node inside its
 * try (agent/reboot/reboot.ts): a try from an earlier boot is not always a crash, and a revert
 * may need a boot of its own.
 */
export interface TryLifecycle {
  /**
   * At start, with the open try (if any) and this boot's token: true when the machine restarted
   * on purpose for that try (it is verified on), false when it is a crash (reverted).
   */
  resumes(record: TryRecord | undefined, bootNow: string): Promise<boolean>;
  /** The try ended: confirmed, reverted, or back (a rollback's proof after its reboot ended). */
  ended(record: TryRecord, outcome: 'confirmed' | 'reverted' | 'back'): Promise<void>;
  /**
   * At start, before a crash's revert (a try from an earlier boot, no intent of its own): the
   * machine booted with the try's revision on disk and that revision takes effect at boot
   * (Reboot-level), so the revert needs a boot back into the old state, and its proof, too.
   */
  bootedInto(record: TryRecord, bootNow: string): Promise<boolean>;
  /** After the revert of a failed try: the node had rebooted into it; the old state needs a boot. */
  rebootsBack(record: TryRecord): Promise<boolean>;
  /**
   * Asks for the reboot back into the previous revision, from boot `bootNow`; 'failed' when it
   * cannot happen (asked too often from this boot, or refused).
   */
  rebootBack(
    record: TryRecord,
    bootNow: string,
  ): Promise<{ kind: 'rebooting'; attempt: number } | { kind: 'failed'; message: string }>;
}

/** How a proof reports while it runs, and what it checks. */
export interface Proof {
  policy: TryPolicy;
  /** Reports progress: a verify step's, or the connectivity proof's ('Verifying'). */
  report: (reason: string, message: string) => void;
}
