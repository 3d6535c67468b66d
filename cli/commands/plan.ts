import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { planFor } from '../../agent/apply.js';
import { desiredFromText } from '../../agent/desired.js';
import { depsFor, expandForOs } from '../../agent/local.js';
import { formatPlan } from '../../agent/plan.js';

export function register(program: Command): void {
  program
    .command('plan')
    .description(
      'dry run of the agent: what applying a config (OSC YAML or canonical JSON) to a root would do, with reasons',
    )
    .requiredOption(
      '-f, --file <file>',
      'the desired config: OperatingSystemConfig YAML or canonical JSON',
    )
    .option('--root <dir>', 'root to compare against ("/" is this machine)', '/')
    .option('--state-dir <dir>', 'agent state directory (default /var/lib/oscar under the root)')
    .action(async (opts: { file: string; root: string; stateDir?: string }) => {
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
    });
}
