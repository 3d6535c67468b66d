import { readFile } from 'node:fs/promises';
import { planFor } from '../../agent/apply.js';
import { desiredFromText } from '../../agent/desired.js';
import { depsFor, expandForOs } from '../../agent/local.js';
import { formatPlan } from '../../agent/plan.js';

/** `oscar plan` (flags in ./index.ts): a dry run of the agent. */
export async function planCommand(opts: {
  file: string;
  root: string;
  stateDir?: string;
}): Promise<void> {
  try {
    const text = await readFile(opts.file, 'utf8');
    const desired = await desiredFromText(text, opts.file, expandForOs);
    const actions = await planFor(depsFor(opts), desired);
    process.stdout.write(
      `plan for ${opts.file} (${desired.checksum.slice(0, 12)}) on ${opts.root}:\n`,
    );
    process.stdout.write(formatPlan(actions));
  } catch (error) {
    console.error(`oscar plan: ${(error as Error).message}`);
    process.exitCode = 1;
  }
}
