/**
 * The immediate admission: every desired state its source delivers (the reconcile Secret, a file,
 * stdin) is admitted as it arrives — grant mode without the controller's pacing or a try. A state
 * the node already carries is not applied again.
 */
import { shortChecksum, type Logger } from '../log/logger.js';
import type { Admission, AdmissionLoop, Admitted, RunContext } from './admission.js';
import { Agent } from './agent.js';
import type { ApplyDeps } from './apply.js';
import { nodeApplier } from './applier.js';
import { applyLog, fanOut, type Reporter } from './loop.js';
import { formatPlan } from './model/actions.js';
import type { DriftHooks } from './model/drift.js';
import type { Source } from './source.js';
import type { Desired } from './state.js';

export class ImmediateAdmission implements Admission {
  readonly description: string;

  constructor(
    private readonly source: Source,
    private readonly reporter: Reporter,
    private readonly log: Logger,
    /** Log each plan after running it. */
    private readonly printPlan = false,
  ) {
    this.description = source.description;
  }

  start(loop: AdmissionLoop): Promise<void> {
    return this.source.start({
      onDesired: (desired) => {
        this.reporter.desired(desired.checksum);
        loop.admit(this.admitted(desired));
      },
      onError: (e) => {
        loop.sourceFailed(e);
      },
    });
  }

  stop(): Promise<void> {
    return this.source.stop();
  }

  private admitted(desired: Desired): Admitted {
    return {
      key: desired.checksum,
      run: (ctx) => this.apply(desired, ctx),
      failed: (e) => {
        this.reporter.failed(desired.checksum, e);
      },
    };
  }

  private async apply(desired: Desired, ctx: RunContext): Promise<void> {
    if (desired.checksum === ctx.applied) return;
    const checksum = shortChecksum(desired.checksum);
    const t0 = performance.now();
    const result = await ctx.applier({ checksum }).apply(desired);
    if (this.printPlan)
      this.log.info({ checksum, plan: formatPlan(result.actions) }, 'plan applied');
    this.reporter.applied(result, performance.now() - t0);
  }
}

export interface ImmediateAgentOptions {
  source: Source;
  deps: ApplyDeps;
  reporters: Reporter[];
  log: Logger;
  /** Log each plan after running it. */
  printPlan?: boolean;
  retryBaseMs?: number;
  retryMaxMs?: number;
  /** The drift monitor; without it nothing watches for drift (told around every apply). */
  drift?: DriftHooks;
}

/** The agent following a Secret or a file (`oscar agent --secret`, `--file`). */
export function immediateAgent(o: ImmediateAgentOptions): Agent<ImmediateAdmission> {
  const reporter = fanOut(o.reporters);
  return new Agent({
    admission: new ImmediateAdmission(o.source, reporter, o.log, o.printPlan),
    applier: (fields) => nodeApplier({ ...o.deps, log: applyLog(o.log, fields) }, o.log),
    reporter,
    log: o.log,
    ...(o.drift ? { drift: o.drift } : {}),
    ...(o.retryBaseMs !== undefined ? { retryBaseMs: o.retryBaseMs } : {}),
    ...(o.retryMaxMs !== undefined ? { retryMaxMs: o.retryMaxMs } : {}),
  });
}
