/**
 * A minimal agent process for the crash tests: applies one canonical config file into a directory
 * root (local mode, jobs logged to STATE/would-run.log) and exits 0. The test kills it with
 * SIGKILL at random instants and runs it again to check that the apply resumes and converges.
 *
 *   node apply-child.js ROOT STATE_DIR CONFIG_FILE
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseCanonical, sha256Hex } from '../../api/canonical.js';
import { applyDesired } from '../apply.js';
import { lockStateDir } from '../state.js';
import { LocalSystemd } from '../systemd.js';

const [root, stateDir, configFile] = process.argv.slice(2);
if (root === undefined || stateDir === undefined || configFile === undefined) {
  console.error('usage: apply-child ROOT STATE_DIR CONFIG_FILE');
  process.exit(2);
}
const text = await readFile(configFile, 'utf8');
const unlock = await lockStateDir(stateDir);
process.stdout.write('locked\n'); // the crash test times its kill from here
const result = await applyDesired(
  {
    root,
    stateDir,
    systemd: new LocalSystemd(root, join(stateDir, 'would-run.log')),
    owners: false,
  },
  { config: parseCanonical(text), checksum: sha256Hex(text), bytes: Buffer.from(text) },
);
await unlock();
process.stdout.write(
  `${JSON.stringify({ actions: result.actions.length, resumed: result.resumed })}\n`,
);
