/**
 * A process that tries to take a state directory's lock, for agent/lock.test.ts: waits until the
 * wall clock reaches START_MS (so many children try at the same instant), tries once, prints
 * "locked" or "held", and when it got the lock keeps it for HOLD_MS (or until killed); HOLD_MS
 * "stdin": until its stdin ends, so the test decides when the holder lets go — after every racer
 * has tried, however late the machine's load made one start.
 *
 *   node lock-child.js STATE_DIR START_MS HOLD_MS|stdin
 */
import { lockStateDir } from '../lock.js';

const [stateDir, startMs = '0', holdMs = '0'] = process.argv.slice(2);
if (stateDir === undefined) {
  console.error('usage: lock-child STATE_DIR START_MS HOLD_MS');
  process.exit(2);
}
const wait = Number(startMs) - Date.now();
if (wait > 0) await new Promise((r) => setTimeout(r, wait));
let unlock: (() => Promise<void>) | undefined;
try {
  unlock = await lockStateDir(stateDir);
} catch (error) {
  process.stdout.write(`held ${(error as Error).message}\n`);
  process.exit(0);
}
process.stdout.write('locked\n');
if (holdMs === 'stdin') {
  process.stdin.resume();
  await new Promise((r) => process.stdin.on('end', r));
} else {
  await new Promise((r) => setTimeout(r, Number(holdMs)));
}
await unlock();
