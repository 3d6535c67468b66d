import { setFlagsFromString } from 'node:v8';

/**
 * For the long-running agent: it idles for days between changes, so memory it grew once stays on
 * every node. V8 doubles the young generation (up to 2 × 16 MB) whenever many objects survive a
 * scavenge — as they do while modules load and a large config is decoded — and keeps it committed
 * while idle. Holding it at its initial size costs some more scavenges during an apply and keeps
 * ~15 MB off the agent's RSS (hack/bench/agent.ts). V8 reads this flag each time it would grow
 * the young generation, so setting it at run time works; call it before the agent's modules load.
 * Other commands keep V8's defaults.
 */
export function keepYoungGenerationSmall(): void {
  setFlagsFromString('--semi-space-growth-factor=1');
}
