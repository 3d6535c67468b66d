/**
 * A minimal agent process for the crash tests: applies one canonical config file into a directory
 * root (local mode, jobs logged to STATE/would-run.log) and exits 0. The test kills it with
 * SIGKILL at random instants and runs it again to check that the apply resumes and converges.
 *
 *   node apply-child.js ROOT STATE_DIR CONFIG_FILE [HOLD_BEFORE_JOB]
 *
 * With HOLD_BEFORE_JOB = k the child stops before its k-th unit job (counted from 0), says
 * "holding" on stdout and waits there until it is killed: an apply the test is killing can then
 * never finish first, however fast or slow the machine is.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseCanonical, sha256Hex } from '../../api/canonical.js';
import { applyDesired } from '../apply.js';
import { lockStateDir } from '../state.js';
import { LocalSystemd } from '../systemd.js';
import type { UnitJob } from '../systemd.js';

const [root, stateDir, configFile, holdArg] = process.argv.slice(2);
if (root === undefined || stateDir === undefined || configFile === undefined) {
  console.error('usage: apply-child ROOT STATE_DIR CONFIG_FILE [HOLD_BEFORE_JOB]');
  process.exit(2);
}
const holdBeforeJob = holdArg === undefined ? undefined : Number(holdArg);

/** Local systemd that holds the process before its k-th job. */
class HoldingSystemd extends LocalSystemd {
  private jobs = 0;

  override async job(job: UnitJob, unit: string): Promise<void> {
    if (this.jobs++ === holdBeforeJob) {
      process.stdout.write('holding\n');
      // a timer keeps the process alive while it waits for its SIGKILL
      setInterval(() => undefined, 60_000);
      await new Promise<never>(() => undefined);
    }
    await super.job(job, unit);
  }
}

const text = await readFile(configFile, 'utf8');
const unlock = await lockStateDir(stateDir);
process.stdout.write('locked\n');
const result = await applyDesired(
  {
    root,
    stateDir,
    systemd: new HoldingSystemd(root, join(stateDir, 'would-run.log')),
    owners: false,
  },
  { config: parseCanonical(text), checksum: sha256Hex(text), bytes: Buffer.from(text) },
);
await unlock();
process.stdout.write(
  `${JSON.stringify({ actions: result.actions.length, resumed: result.resumed })}\n`,
);
