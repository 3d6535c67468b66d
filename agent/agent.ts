/**
 * The agent's one loop. An admission source (agent/admission.ts) hands it desired states: the
 * controller's grants (agent/rollout/grant-admission.ts), or each state as it arrives from a
 * Secret or a file (agent/immediate.ts). The loop runs one at a time; a newer one admitted
 * meanwhile interrupts a long step (a try's verification) and runs next, the ones in between are
 * skipped. A failed run is retried with exponential backoff and jitter (agent/loop.ts), except one
 * that needs a new machine (ReplacementNeeded) or breaks oscar's rules (InvalidConfigError), which
 * waits for the next state. The drift monitor (agent/drift/) is told before and after every apply
 * (agent/applier.ts) and asks for reverts, which run in this same loop when nothing else is due and
 * the admission allows (no open try).
 */
import { errorFields, shortChecksum, type Logger } from '../log/logger.js';
import type { Admission, AdmissionLoop, Admitted, RunContext } from './admission.js';
import { withDrift, type Applier } from './applier.js';
import { revertThrough, RetryPolicy, waitsForNextState, type Reporter } from './loop.js';
import type { DriftHooks } from './model/drift.js';
import type { Desired } from './state.js';

export type { Reporter } from './loop.js';
export { logReporter } from './log-reporter.js';

export interface AgentOptions<A extends Admission> {
  admission: A;
  /** The node's applier for one apply or revert; `fields` go on its log lines. */
  applier: (fields: Record<string, unknown>) => Applier;
  /** Every outcome goes here (fanOut, agent/loop.ts, makes one of many). */
  reporter: Reporter;
  log: Logger;
  /** The drift monitor; without it nothing watches for drift (told around every apply). */
  drift?: DriftHooks;
  retryBaseMs?: number;
  retryMaxMs?: number;
}

export class Agent<A extends Admission = Admission> {
  readonly admission: A;
  private pending: Admitted | undefined;
  private active: string | undefined;
  private running: Promise<void> | undefined;
  private interrupt = new AbortController();
  private retryTimer: NodeJS.Timeout | undefined;
  private readonly retry: RetryPolicy;
  private stopped = false;
  /** Drift asked for a revert. */
  private revertWanted = false;
  /** Counts the asks for a revert and the successful applies (see runItem). */
  private revertAsks = 0;
  private applies = 0;
  private appliedChecksum: string | undefined;
  /** The last failure (a run or the source); cleared by a run that succeeds. */
  lastError: Error | undefined;

  constructor(private readonly o: AgentOptions<A>) {
    this.admission = o.admission;
    this.retry = new RetryPolicy(o);
  }

  /** The checksum the node carries, for /healthz and `--once`. */
  get applied(): string | undefined {
    return this.appliedChecksum;
  }

  async start(): Promise<void> {
    const last = await this.o.applier({}).lastApplied();
    this.appliedChecksum = last?.checksum;
    if (last) this.o.reporter.restored?.(last.checksum);
    // before the source: what changed while the agent was down is found against what it applied
    await this.o.drift?.start(last?.config);
    await this.admission.start(this.admissionLoop(last));
  }

  /**
   * Drift asks for a revert. It runs when nothing else is due: an apply of a new state, or its
   * retry, repairs Revert drift anyway — a revert then would undo half of the new state.
   */
  revert(): void {
    this.revertWanted = true;
    this.revertAsks++;
    this.kick();
  }

  /** Resolves once nothing is pending or running (for `--once` and tests). */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.interrupt.abort();
    await this.admission.stop();
    await this.idle();
    await this.o.drift?.stop();
  }

  private admissionLoop(last: Desired | undefined): AdmissionLoop {
    const agent = this.context();
    return Object.assign(agent, {
      last,
      admit: (item: Admitted) => {
        this.admit(item);
      },
      sourceFailed: (e: Error) => {
        this.sourceFailed(e);
      },
      sourceRecovered: (e: Error) => {
        this.o.log.info({ source: this.admission.description }, 'source answers again');
        this.o.reporter.sourceRecovered?.(e);
      },
    });
  }

  /** What a run (or the admission, at start) may use; its signal is the current interrupt's. */
  private context(): RunContext {
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the getters below read the loop
    const agent = this;
    return {
      applier: (fields) => this.applierFor(fields ?? {}),
      get signal() {
        return agent.interrupt.signal;
      },
      get applied() {
        return agent.appliedChecksum;
      },
      stopped: () => this.stopped,
    };
  }

  /** The applier, with the drift monitor told around it and the node's checksum kept. */
  private applierFor(fields: Record<string, unknown>): Applier {
    const inner = this.o.applier(fields);
    const revertDrift = inner.revertDrift?.bind(inner);
    const tracked: Applier = {
      lastApplied: () => inner.lastApplied(),
      markApplied: (desired) => inner.markApplied(desired),
      apply: async (desired) => {
        const result = await inner.apply(desired);
        this.appliedChecksum = result.checksum;
        this.applies++;
        return result;
      },
      ...(revertDrift ? { revertDrift } : {}),
    };
    return this.o.drift ? withDrift(tracked, this.o.drift) : tracked;
  }

  private admit(item: Admitted): void {
    if (item.key === this.active) return;
    this.pending = item;
    this.retry.reset();
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    this.interrupt.abort(); // a long step in progress gives way
    this.kick();
  }

  private sourceFailed(e: Error): void {
    this.lastError = e;
    this.o.log.warn(
      { source: this.admission.description, ...errorFields(e) },
      'source failed; the last good state stays',
    );
    this.o.reporter.sourceFailed(e);
  }

  private kick(): void {
    if (this.running || this.stopped) return;
    this.running = this.loop().finally(() => {
      this.running = undefined;
      if ((this.pending || this.revertDue()) && !this.stopped) this.kick();
    });
  }

  /** A failed run waits for its retry and reverts with it. */
  private revertDue(): boolean {
    return this.revertWanted && !this.retryTimer;
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      const item = this.pending;
      if (item) {
        this.pending = undefined;
        await this.runItem(item);
      } else if (this.revertDue()) {
        await this.revertDrift();
      } else {
        return;
      }
    }
  }

  /**
   * One run of an admitted item. A revert of drift asked for before it started is done by it when
   * it applied a state (the planner repairs Revert drift); one asked for meanwhile still runs.
   */
  private async runItem(item: Admitted): Promise<void> {
    this.interrupt = new AbortController();
    this.active = item.key;
    const asks = this.revertAsks;
    const applies = this.applies;
    try {
      await item.run(this.context());
      this.lastError = undefined;
      this.retry.reset();
      if (this.applies > applies && this.revertAsks === asks) this.revertWanted = false;
    } catch (error) {
      const e = error as Error;
      this.lastError = e;
      item.failed(e);
      if (!waitsForNextState(e)) this.retryLater(item);
    } finally {
      this.active = undefined;
    }
  }

  private retryLater(item: Admitted): void {
    if (this.stopped || this.pending) return; // a newer item arrived while this one failed
    const delay = this.retry.next();
    this.o.log.info(
      {
        checksum: shortChecksum(item.key),
        retryInMs: Math.round(delay),
        failures: this.retry.count,
      },
      'apply will be retried',
    );
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      this.pending ??= item;
      this.kick();
    }, delay);
  }

  /** A revert of drift, unless the admission says it must wait. */
  private async revertDrift(): Promise<void> {
    this.revertWanted = false;
    if (this.admission.mayRevertDrift && !(await this.admission.mayRevertDrift())) return;
    await revertThrough(this.applierFor({ trigger: 'revert' }), this.o.reporter);
  }
}
