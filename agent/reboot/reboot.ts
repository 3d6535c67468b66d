/**
 * A reboot inside try mode (docs/rollouts.md#reboot-inside-try-mode). A revision whose
 * disruption is Reboot (api/disruption.ts: a file or unit declared onChange: reboot changed, or
 * the node's packages left /var/run/reboot-required) is applied, then the agent journals its
 * intent (reboot.json in its state directory: the try it reboots for and the boot it leaves) and
 * reboots through systemd. After the boot the Node must be Ready again in this boot (./node-ready.ts),
 * then the try is verified as any other (units, health checks, the fresh-connection proof) before
 * it is confirmed; a failed verification is rolled back and
 * the node reboots again, into the old state — and the rollback is finished only once that old
 * state is proven the same way in the boot that brought it back (issue 25: Node Ready in this
 * boot, the revert's units active, the health checks the old revision was confirmed with). A
 * reboot back that does not happen (rebootBackAgain) or an old state that fails its proof ends
 * the try Failed — never another rollback or reboot.
 *
 * What tells an intended reboot from a crash: try.json carries the boot it started in, and the
 * intent names that same boot and that same try. A try from another boot without a matching
 * intent is a crash (or a power cut) and is reverted, as before.
 */
import { spawn } from 'node:child_process';
import { disruptionOf } from '../../api/disruption.js';
import type { Logger } from '../../log/logger.js';
import type { Applier } from '../applier.js';
import type { TryLifecycle } from '../rollout/try-lifecycle.js';
import type { Verdict, VerifyStep } from '../rollout/soak.js';
import type { TryRecord, TryState } from '../rollout/try-state.js';
import { StateDir } from '../state-dir.js';
import { waitNodeReady, type NodeReadinessProbe } from './node-ready.js';
import { rebootRequired } from './required.js';

/** In the agent's state directory: the reboot the agent asked for and has not seen happen. */
export const REBOOT_INTENT = 'reboot.json';

export interface RebootIntent {
  /** The try it reboots for (try.json's checksum and grant generation). */
  checksum: string;
  generation: number;
  /** The boot token of the boot the reboot leaves. */
  fromBoot: string;
  /** "apply": into the new revision; "rollback": back into the confirmed one. */
  purpose: 'apply' | 'rollback';
  requestedAt: string;
  /** Set once the agent is back, in this boot: the try is verified on, the intent kept until it ends. */
  arrivedBoot?: string;
  /** How many reboots were asked for from fromBoot (1 when absent): see rebootAgain. */
  attempts?: number;
}

/** Reboots asked for from one boot before the try is rolled back as RebootFailed. */
export const MAX_REBOOT_ATTEMPTS = 3;

/**
 * The agent runs again in the very boot its intent left: systemd restarted the agent but the
 * machine did not reboot. That is no arrival (nothing is confirmed); the reboot is asked for
 * again, at most MAX_REBOOT_ATTEMPTS times from one boot, then the try fails as RebootFailed.
 * Pure: 'not-same-boot' when the intent is not an unfinished apply reboot of this try from bootNow.
 */
export function rebootAgain(
  record: TryFacts,
  intent: RebootIntent | undefined,
  bootNow: string,
):
  | { kind: 'not-same-boot' }
  | { kind: 'retry'; attempt: number }
  | { kind: 'give-up'; message: string } {
  if (
    intent === undefined ||
    intent.purpose !== 'apply' ||
    !forTry(intent, record) ||
    intent.arrivedBoot !== undefined ||
    intent.fromBoot !== bootNow
  ) {
    return { kind: 'not-same-boot' };
  }
  const done = intent.attempts ?? 1;
  if (done >= MAX_REBOOT_ATTEMPTS) {
    return {
      kind: 'give-up',
      message: `the node did not reboot: still boot ${bootNow} after ${String(done)} reboot requests`,
    };
  }
  return { kind: 'retry', attempt: done + 1 };
}

/**
 * The agent starts in the very boot it reverted a try in and asked to leave for the previous
 * revision: the reboot back did not happen (systemd restarted the agent only). Asked again, at
 * most MAX_REBOOT_ATTEMPTS times from one boot; then the rollback fails (RollbackRebootFailed).
 * 'first' when no reboot back was asked for from this boot yet. Pure.
 */
export function rebootBackAgain(
  record: TryFacts,
  intent: RebootIntent | undefined,
  bootNow: string,
): { kind: 'first' } | { kind: 'retry'; attempt: number } | { kind: 'give-up'; message: string } {
  if (
    intent === undefined ||
    intent.purpose !== 'rollback' ||
    !forTry(intent, record) ||
    intent.fromBoot !== bootNow
  ) {
    return { kind: 'first' };
  }
  const done = intent.attempts ?? 1;
  if (done >= MAX_REBOOT_ATTEMPTS) {
    return {
      kind: 'give-up',
      message: `the node did not reboot back into the previous revision: still boot ${bootNow} after ${String(done)} reboot requests`,
    };
  }
  return { kind: 'retry', attempt: done + 1 };
}

/** What the decision reads of the open try (try.json). */
export interface TryFacts {
  checksum: string;
  grant: { generation: number };
  boot: string;
}

/**
 * At start, with an open try from another boot: was that boot left by the agent's own reboot
 * for this very try? Pure.
 */
export function rebootedForTry(
  record: TryFacts,
  intent: RebootIntent | undefined,
  bootNow: string,
): boolean {
  return (
    intent !== undefined &&
    intent.purpose === 'apply' &&
    forTry(intent, record) &&
    intent.fromBoot === record.boot &&
    intent.arrivedBoot === undefined &&
    record.boot !== bootNow
  );
}

function parseIntent(bytes: Buffer): RebootIntent | undefined {
  try {
    const v = JSON.parse(bytes.toString('utf8')) as Partial<RebootIntent>;
    if (
      typeof v.checksum !== 'string' ||
      typeof v.generation !== 'number' ||
      typeof v.fromBoot !== 'string' ||
      (v.purpose !== 'apply' && v.purpose !== 'rollback') ||
      typeof v.requestedAt !== 'string' ||
      (v.attempts !== undefined && typeof v.attempts !== 'number')
    ) {
      return undefined;
    }
    return v as RebootIntent;
  } catch {
    return undefined; // a damaged intent is no intent: the try is then treated as a crash
  }
}

/** Asks the init system for a reboot; on a node that is `systemctl reboot`. */
export interface Rebooter {
  reboot(why: string): Promise<void>;
}

/** `systemctl reboot`: systemd stops every unit (the agent too) and restarts the machine. */
export class SystemctlRebooter implements Rebooter {
  reboot(): Promise<void> {
    return new Promise((resolve, reject) => {
      const child = spawn('systemctl', ['reboot'], { stdio: 'ignore' });
      child.on('error', reject);
      child.on('exit', (code) => {
        if (code === 0) resolve();
        else reject(new Error(`systemctl reboot exited with ${String(code)}`));
      });
    });
  }
}

export interface RebootHooksOptions {
  root: string;
  stateDir: string;
  rebooter: Rebooter;
  /** The try's own state: the boot token and the confirmed revision a reboot moves from. */
  tryState: Pick<TryState, 'bootToken' | 'confirmed'>;
  /** What the node carries: after the try's apply, the revision being tried. */
  applier: Pick<Applier, 'lastApplied'>;
  /**
   * The node's own Kubernetes Node, which must be Ready in the boot the reboot brought before the
   * soak runs (./node-ready.ts); without it (no API identity) the soak alone decides.
   */
  nodeReady?: NodeReadinessProbe;
  /** How often the Node is looked at while it is not Ready. */
  nodeReadyIntervalMs?: number;
  log?: Logger;
  now?: () => Date;
}

/**
 * The reboot inside try mode, on the grant admission's two extension points: a verify step
 * (step(): after the apply, before the soak, reboot when the revision needs it) and the try's
 * life cycle (TryLifecycle: tell an intended reboot from a crash at start; after a revert into a
 * rebooted-for revision, reboot again).
 */
export class RebootHooks implements TryLifecycle {
  constructor(private readonly o: RebootHooksOptions) {}

  private state<T>(fn: (s: StateDir) => Promise<T>): Promise<T> {
    return StateDir.with(this.o.stateDir, fn);
  }

  async intent(): Promise<RebootIntent | undefined> {
    const bytes = await this.state((s) => s.read(REBOOT_INTENT));
    return bytes ? parseIntent(bytes) : undefined;
  }

  async clear(): Promise<void> {
    await this.state((s) => s.remove(REBOOT_INTENT));
  }

  /** Why the try's revision needs a reboot on this node (from the confirmed one), or undefined. */
  async needed(): Promise<string | undefined> {
    const desired = await this.o.applier.lastApplied();
    if (!desired) return undefined;
    const last = await this.o.tryState.confirmed();
    const d = disruptionOf(last?.config, desired.config, {
      rebootRequired: await rebootRequired(this.o.root),
    });
    return d.level === 'Reboot' ? d.reasons.join('; ') : undefined;
  }

  /** Journals the intent (fsynced by StateDir) before the reboot, so the next boot knows. */
  async reboot(
    record: TryFacts,
    purpose: RebootIntent['purpose'],
    why: string,
    attempts = 1,
    fromBoot = record.boot,
  ): Promise<void> {
    const intent: RebootIntent = {
      checksum: record.checksum,
      generation: record.grant.generation,
      fromBoot,
      purpose,
      requestedAt: (this.o.now?.() ?? new Date()).toISOString(),
      ...(attempts > 1 ? { attempts } : {}),
    };
    await this.state((s) => s.write(REBOOT_INTENT, Buffer.from(JSON.stringify(intent))));
    await this.o.rebooter.reboot(why);
  }

  /**
   * The verify step: a revision that needs a reboot reports Verifying/Rebooting, journals the
   * intent and reboots; the try stays open ('interrupted') and is verified on after the boot.
   * Back in the boot the reboot brought, it waits for the Node to be Ready in this boot, then
   * lets the next steps (the soak) run. A rolled-back try proving the previous revision after
   * the reboot back (record.rollback) waits for the Node the same way, and never reboots.
   */
  step(): VerifyStep {
    return async (record, signal, ctx) => {
      if (record.rollback) return this.afterReboot(record, signal, ctx, 'the reboot back');
      const intent = await this.intent();
      const boot = await this.o.tryState.bootToken();
      if (intent && forTry(intent, record) && intent.arrivedBoot === boot) {
        return this.afterReboot(record, signal, ctx, 'the reboot');
      }
      const again = rebootAgain(record, intent, boot);
      if (again.kind === 'give-up') {
        this.o.log?.warn({ boot }, again.message);
        return { kind: 'failed', reason: 'RebootFailed', message: again.message };
      }
      const why = await this.needed();
      if (why === undefined) return { kind: 'confirmed', message: 'no reboot needed' };
      if (signal.aborted) return { kind: 'interrupted' };
      ctx.report('Rebooting', `rebooting: ${why}`);
      await this.reboot(record, 'apply', why, again.kind === 'retry' ? again.attempt : 1);
      return { kind: 'interrupted' };
    };
  }

  /** The Node Ready in this boot (when there is a probe), before the soak. */
  private async afterReboot(
    record: TryRecord,
    signal: AbortSignal,
    ctx: Parameters<VerifyStep>[2],
    which: string,
  ): Promise<Verdict> {
    const probe = this.o.nodeReady;
    if (!probe) {
      const back = record.rollback !== undefined;
      const message = back
        ? 'rebooted back into the previous revision'
        : 'rebooted into the revision';
      return { kind: 'confirmed', message };
    }
    const verdict = await waitNodeReady({
      probe,
      deadline: record.deadline,
      signal,
      ctx,
      ...(this.o.nodeReadyIntervalMs !== undefined
        ? { intervalMs: this.o.nodeReadyIntervalMs }
        : {}),
    });
    if (verdict.kind !== 'interrupted') {
      this.o.log?.info({ verdict: verdict.kind, detail: verdict.message }, `after ${which}`);
    }
    return verdict;
  }

  /**
   * At start: true when the open try's boot was left by the agent's own reboot for it (the
   * intent is marked arrived and kept until the try ends; the admission verifies on), false for
   * a crash (the admission reverts it). With no open try, an old intent is forgotten.
   */
  async resumes(record: TryRecord | undefined, bootNow: string): Promise<boolean> {
    const intent = await this.intent();
    if (!record) {
      if (intent) await this.clear();
      return false;
    }
    if (!intent || !rebootedForTry(record, intent, bootNow)) return false;
    const arrived = { ...intent, arrivedBoot: bootNow };
    await this.state((s) => s.write(REBOOT_INTENT, Buffer.from(JSON.stringify(arrived))));
    return true;
  }

  /**
   * At start, before the revert of a crashed try (its boot left without an intent for it): true
   * when the machine booted since the try began and the try's revision, applied, is Reboot-level
   * against the confirmed one — its boot-time changes are live, so the revert must reboot back.
   * (A try cut off before its apply finished is not told: what it had written is not known here.)
   */
  async bootedInto(record: TryRecord, bootNow: string): Promise<boolean> {
    if (record.boot === bootNow) return false;
    const applied = await this.o.applier.lastApplied();
    if (applied?.checksum !== record.checksum) return false;
    return (await this.needed()) !== undefined;
  }

  /** After a revert of this try: the node had rebooted into it, so the old state needs a boot. */
  async rebootsBack(record: TryRecord): Promise<boolean> {
    const intent = await this.intent();
    return (
      intent !== undefined &&
      intent.purpose === 'apply' &&
      forTry(intent, record) &&
      intent.arrivedBoot !== undefined
    );
  }

  /**
   * Asks for the reboot back into the previous revision from boot `bootNow` (again, when this
   * boot asked before and is still here: rebootBackAgain). 'failed' when it did not happen after
   * MAX_REBOOT_ATTEMPTS requests, or systemd refused it.
   */
  async rebootBack(
    record: TryRecord,
    bootNow: string,
  ): Promise<{ kind: 'rebooting'; attempt: number } | { kind: 'failed'; message: string }> {
    const again = rebootBackAgain(record, await this.intent(), bootNow);
    if (again.kind === 'give-up') {
      this.o.log?.warn({ boot: bootNow }, again.message);
      return { kind: 'failed', message: again.message };
    }
    const attempt = again.kind === 'retry' ? again.attempt : 1;
    const why = 'the revision was rolled back after its reboot';
    try {
      await this.reboot(record, 'rollback', why, attempt, bootNow);
    } catch (error) {
      const message = `the reboot back into the previous revision was refused: ${(error as Error).message}`;
      return { kind: 'failed', message };
    }
    return { kind: 'rebooting', attempt };
  }

  /**
   * The try ended: confirmed, reverted without a boot of its own (it never rebooted into the
   * revision), or back (a rollback boot's proof ended). The intent has done its work. A revert
   * after the node had rebooted into the try never ends here: it is a rollback boot (rebootBack,
   * then the proof) — for a failed try and a superseded one alike.
   */
  async ended(): Promise<void> {
    if (await this.intent()) await this.clear();
  }
}

/** The intent was journaled for this try (same revision, same grant). */
function forTry(intent: RebootIntent, record: TryFacts): boolean {
  return intent.checksum === record.checksum && intent.generation === record.grant.generation;
}
