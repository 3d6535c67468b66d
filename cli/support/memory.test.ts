import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const memory = fileURLToPath(new URL('./memory.ts', import.meta.url));

/**
 * V8's optimisation status of a hot function in a fresh node, with or without the agent's limit.
 * Its own process: V8 flags are per process and, once set, for good.
 */
function statusOfHotFunction(limit: boolean): number {
  const script = `
    const { limitJitForAgent } = await import(${JSON.stringify(memory)});
    if (${String(limit)}) limitJitForAgent();
    const hot = (n) => { let s = 0; for (let i = 0; i < n; i++) s += i % 7; return s; };
    for (let i = 0; i < 20000; i++) hot(200);
    console.log(new Function('f', 'return %GetOptimizationStatus(f)')(hot));
  `;
  const run = spawnSync(
    process.execPath,
    ['--allow-natives-syntax', '--import', 'tsx', '--input-type=module', '-e', script],
    { encoding: 'utf8', timeout: 30_000 },
  );
  if (run.status !== 0) throw new Error(`node exited ${String(run.status)}: ${run.stderr}`);
  return Number(run.stdout.trim());
}

// V8's OptimizationStatus bits (src/runtime/runtime.h): optimized, Maglev, TurboFan
const OPTIMIZED = 1 << 4;
const MAGLEVVED = 1 << 5;
const TURBOFANNED = 1 << 6;

describe('limitJitForAgent', () => {
  it('keeps a hot function out of Maglev and TurboFan when set at run time', () => {
    // the control: without the limit the same loop is optimised, so the check below can fail
    expect(statusOfHotFunction(false) & OPTIMIZED).not.toBe(0);
    expect(statusOfHotFunction(true) & (OPTIMIZED | MAGLEVVED | TURBOFANNED)).toBe(0);
  });
});
