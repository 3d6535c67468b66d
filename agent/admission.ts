/**
 * What the agent's one loop (agent/agent.ts) asks of a mode: an admission source decides when a
 * desired state may reach the node and what running it means. Grant mode
 * (agent/rollout/grant-admission.ts) admits the revision the controller granted, tried and
 * verified; the immediate source (agent/immediate.ts: --secret, --file) admits each state as it
 * arrives. The loop owns the rest: one item at a time, the newest next, retry with backoff, the
 * invalid-state rule, the drift hooks and the reporter.
 */
import type { Applier } from './applier.js';
import type { Desired } from './state.js';

/** One admitted state (or grant), as the loop runs it. */
export interface Admitted {
  /** Which state this is: one admitted again while it runs is dropped. */
  readonly key: string;
  /**
   * The steps that bring it to the node. A throw is a failure: the loop retries the item with
   * backoff, unless the error says a retry cannot help (waitsForNextState, agent/loop.ts).
   */
  run(ctx: RunContext): Promise<void>;
  /** Reports a failure of run() (before the loop retries or waits). */
  failed(error: Error): void;
}

/** What a run may use. */
export interface RunContext {
  /** The node's applier, the drift monitor told around every apply; `fields` go on its log lines. */
  applier(fields?: Record<string, unknown>): Applier;
  /** Aborted when a newer item is admitted or the agent stops: a long step gives way. */
  readonly signal: AbortSignal;
  /** The checksum the node carries now. */
  readonly applied: string | undefined;
  /** True once the agent is stopping. */
  stopped(): boolean;
}

/** What the loop hands an admission source when it starts. */
export interface AdmissionLoop extends RunContext {
  /** What the node carried at start (the last-applied record). */
  readonly last: Desired | undefined;
  admit(item: Admitted): void;
  /** The source could not deliver: logged and reported, the last good state stays. */
  sourceFailed(error: Error): void;
  /** The source answers again after `error`: a Degraded only it caused is cleared. */
  sourceRecovered(error: Error): void;
}

/** A mode of the agent: where admitted states come from. */
export interface Admission {
  /** For logs: "Secret ns/name", "file /etc/oscar/config.yaml", "grants of ns/osc". */
  readonly description: string;
  /** Starts following, after the loop restored what the node carries. */
  start(loop: AdmissionLoop): Promise<void>;
  stop(): Promise<void>;
  /** False while a revert of drift must wait (an open try: its verdict decides what stays). */
  mayRevertDrift?(): Promise<boolean>;
}
