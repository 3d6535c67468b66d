/**
 * The rollback boot (issue 25, docs/rollouts.md#reboot-inside-try-mode): a try reverted after the
 * node rebooted into it is not over with the revert. The node reports RollingBack, reboots back
 * into the previous revision and proves it there like a try — the verify steps (the Node Ready in
 * that boot), the revert's units, the health checks that revision was confirmed with
 * (confirmed-checks.json), the API server over fresh connections — to a deadline of its own; only
 * then RolledBack. A reboot back that does not happen, or an old state that fails its proof, is
 * Failed (RollbackRebootFailed, RollbackUnhealthy), the node Degraded — never a second rollback or
 * reboot. Grant mode's admission (./grant-admission.ts) hands it the reverted try and lends it its
 * report and its verification.
 */
import type { Logger } from '../../log/logger.js';
import type { GrantPhase, RollbackFailedReason } from '../../api/constants.js';
import type { RunContext } from '../admission.js';
import type { Reporter } from '../loop.js';
import type { Grant } from './grant.js';
import type { Verdict } from './soak.js';
import type { Proof, TryLifecycle } from './try-lifecycle.js';
import {
  backInOldState,
  type RollbackRecord,
  type TryRecord,
  type TryState,
  type WatchedUnit,
} from './try-state.js';

/** A rollback that could not be finished: its reason names it, the node goes Degraded. */
class RollbackFailed extends Error {
  constructor(reason: RollbackFailedReason, message: string) {
    super(message);
    this.name = reason;
  }
}

/** What the rollback boot borrows from the admission. */
export interface RollbackBootOptions {
  tryState: TryState;
  lifecycle: TryLifecycle | undefined;
  reporter: Pick<Reporter, 'failed'>;
  log: Logger;
  now: () => number;
  /** The node's revision report (the admission's). */
  report: (
    grant: Grant,
    phase: GrantPhase,
    reason: string,
    message: string,
    extra?: { deadline?: number; previous?: string },
  ) => void;
  /** The admission's verification: the verify steps, then the soak. */
  verify: (record: TryRecord, signal: AbortSignal, proof: Proof) => Promise<Verdict>;
}

export class RollbackBoot {
  constructor(private readonly o: RollbackBootOptions) {}

  /**
   * issue 25: the try was reverted after the node had rebooted into it. The rollback is not over:
   * the try stays open (try.json with `rollback`), the grant is never tried again (failed.json),
   * the node reports RollingBack — out of service, the controller keeps it cordoned — and reboots
   * back into the previous revision, where continue() proves it.
   */
  async start(
    record: TryRecord,
    verdict: { reason: string; message: string },
    units: WatchedUnit[],
  ): Promise<void> {
    const { tryState, log } = this.o;
    const grant = record.grant;
    const boot = await tryState.bootToken();
    const rolling = await tryState.rollingBack(record, { ...verdict, fromBoot: boot }, units);
    await tryState.setFailed({
      checksum: grant.checksum,
      generation: grant.generation,
      ...verdict,
    });
    log.warn({ revision: grant.number }, 'reverted: rebooting back into the previous revision');
    await this.rebootBack(rolling, boot);
  }

  /** Reports RollingBack and asks for the reboot back; one that cannot happen fails the rollback. */
  private async rebootBack(record: TryRecord, boot: string): Promise<void> {
    const previous = (await this.o.tryState.confirmed())?.checksum;
    this.reportRollingBack(record, 'rebooting into the previous revision', previous);
    const asked = (await this.o.lifecycle?.rebootBack(record, boot)) ?? {
      kind: 'failed' as const,
      message: 'this agent cannot reboot the machine',
    };
    if (asked.kind === 'failed') {
      await this.rollbackFailed(record, 'RollbackRebootFailed', asked.message, previous);
    }
  }

  /**
   * A rollback rebooting back, looked at again: in the boot the revert happened in, the reboot
   * back has not happened — at the agent's start that means systemd restarted the agent only,
   * and it is asked for again (a bounded number of times); in any other boot the machine runs the
   * previous revision and it is proven there.
   */
  async continue(record: TryRecord, ctx: RunContext, atStart: boolean): Promise<void> {
    const { tryState } = this.o;
    const boot = await tryState.bootToken();
    if (!backInOldState(record, boot)) {
      if (atStart) await this.rebootBack(record, boot);
      else {
        const previous = (await tryState.confirmed())?.checksum;
        this.reportRollingBack(record, 'rebooting into the previous revision', previous);
      }
      return;
    }
    const deadline = this.o.now() + (record.grant.try?.deadlineMs ?? 0);
    const here = record.boot === boot ? record : await tryState.backInBoot(record, boot, deadline);
    await this.proveRollback(here, ctx);
  }

  /**
   * Back in the previous revision after the reboot back: proven like a try (the verify steps —
   * the Node Ready in this boot —, the revert's units, the health checks that revision was
   * confirmed with, the API server over fresh connections) to a deadline of its own. Then
   * RolledBack; else Failed (RollbackUnhealthy). Never reverted or rebooted again.
   */
  private async proveRollback(record: TryRecord, ctx: RunContext): Promise<void> {
    const { tryState, log } = this.o;
    const grant = record.grant;
    const previous = (await tryState.confirmed())?.checksum;
    const checks = previous ? await tryState.confirmedChecks(previous) : [];
    const base = grant.try ?? { soakMs: 0, deadlineMs: 0, checks: [] };
    const verdict = await this.o.verify(record, ctx.signal, {
      policy: { ...base, checks },
      report: (_reason, message) => {
        this.reportRollingBack(record, `back in the previous revision: ${message}`, previous);
      },
    });
    if (verdict.kind === 'interrupted') return; // stopping, or a newer grant: try.json stays
    if (verdict.kind === 'failed') {
      const detail = `the previous revision failed its proof after the reboot back (${verdict.reason}: ${verdict.message})`;
      await this.rollbackFailed(record, 'RollbackUnhealthy', detail, previous);
      return;
    }
    const rb = rollbackOf(record);
    const message = `${rb.message}; back in the previous revision after a reboot: ${verdict.message}`;
    await tryState.end();
    await tryState.setFailed({
      checksum: grant.checksum,
      generation: grant.generation,
      reason: rb.reason,
      message,
    });
    await this.o.lifecycle?.ended(record, 'back');
    this.o.report(grant, 'RolledBack', rb.reason, message, previous ? { previous } : {});
    log.info({ revision: grant.number, detail: verdict.message }, 'back in the previous revision');
  }

  /** The rollback cannot be finished: Failed with its reason, the node Degraded; nothing retried. */
  private async rollbackFailed(
    record: TryRecord,
    reason: RollbackFailedReason,
    detail: string,
    previous: string | undefined,
  ): Promise<void> {
    const { tryState, log } = this.o;
    const grant = record.grant;
    const rb = rollbackOf(record);
    const message = `revision ${String(grant.number)} was rolled back (${rb.reason}: ${rb.message}), but ${detail}`;
    await tryState.end();
    await tryState.setFailed({
      checksum: grant.checksum,
      generation: grant.generation,
      reason,
      message,
      phase: 'Failed',
    });
    await this.o.lifecycle?.ended(record, 'back');
    log.error({ revision: grant.number, reason }, message);
    this.o.reporter.failed(previous ?? grant.checksum, new RollbackFailed(reason, message));
    this.o.report(grant, 'Failed', reason, message, previous ? { previous } : {});
  }

  /** RollingBack: the try's verdict as the reason, what happens now first in the message. */ private reportRollingBack(
    record: TryRecord,
    now: string,
    previous: string | undefined,
  ): void {
    const rb = rollbackOf(record);
    this.o.report(record.grant, 'RollingBack', rb.reason, `${now}; rolled back: ${rb.message}`, {
      ...(record.deadline > 0 && backInOldState(record, record.boot)
        ? { deadline: record.deadline }
        : {}),
      ...(previous ? { previous } : {}),
    });
  }
}

function rollbackOf(record: TryRecord): RollbackRecord {
  if (!record.rollback) throw new Error('internal: not a try rolling back');
  return record.rollback;
}
