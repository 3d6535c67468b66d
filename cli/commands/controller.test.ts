// `oscar controller` as its own process: a --concurrency that is not a positive integer refuses
// the start before it reads a kubeconfig, naming the flag and the fix (as the servers' flags do).
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const repoRoot = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..');

function controller(args: string[]) {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', join(repoRoot, 'cli', 'oscar.ts'), 'controller', ...args],
    {
      cwd: repoRoot,
      stdio: ['ignore', 'pipe', 'pipe'],
      // no cluster to reach: a start that got past the flags would fail on the kubeconfig instead
      env: { ...process.env, KUBECONFIG: join(repoRoot, 'no-such-kubeconfig') },
    },
  );
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('close', resolve));
  return { err: () => err, exited };
}

describe('oscar controller --concurrency', () => {
  // '1e1' was taken by Number() before: 10 workers from a typo
  for (const bad of ['0', 'two', '1e1', '2.5', '-3']) {
    it(`refuses --concurrency ${JSON.stringify(bad)}: exit 1, naming the flag and the fix`, async () => {
      const p = controller(['--concurrency', bad]);
      expect(await p.exited).toBe(1);
      expect(p.err()).toContain(
        `oscar controller: --concurrency: "${bad}" is not a positive integer; give the number of OSCs reconciled at once, such as 2`,
      );
    });
  }
});
