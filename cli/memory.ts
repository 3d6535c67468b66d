import { setFlagsFromString } from 'node:v8';

/**
 * For the long-running agent, which idles for days between changes: memory it grew once stays on
 * every node. Two V8 settings, both read whenever the heap decides to grow, so setting them at run
 * time works; call this before the agent's modules load (loading grows the heap too). Other
 * commands keep V8's defaults. Measured with hack/bench/agent.ts (50 changes, then idle):
 * - the young generation stays at its initial size: V8 doubles it (up to 2 × 16 MB) whenever many
 *   objects survive a scavenge — as they do while modules load and a config is decoded — and
 *   keeps it committed while idle (~15 MB of RSS; a few more scavenges during an apply);
 * - the old generation grows and compacts as for a small device (--optimize-for-size): idle RSS
 *   −2 MB, peak during a burst of changes 79 → 72 MB.
 */
export function tuneHeapForTheAgent(): void {
  setFlagsFromString('--semi-space-growth-factor=1');
  setFlagsFromString('--optimize-for-size');
}

/**
 * For the controller, whose heap is mostly short-lived render and watch garbage around a cache of
 * every OSC. With V8's defaults the young generation grows to 2 × 16 MB and stays committed, and
 * Buffers (watch chunks, rendered data) are freed only when a rare scavenge finds their wrappers
 * dead, so external memory climbs to V8's 64 MB trigger. The same two settings as the agent's keep
 * the young generation small (frequent cheap scavenges free those Buffers at once) and grow the old
 * generation as for a small device. Measured with hack/bench/controller.ts, a fresh controller
 * converging 1,000 existing OSCs: peak RSS 195 → 132-144 MiB; controller CPU 8.9 → 12-13 s (the
 * API server, not the controller's CPU, limits its throughput).
 */
export function tuneHeapForTheController(): void {
  setFlagsFromString('--semi-space-growth-factor=1');
  setFlagsFromString('--optimize-for-size');
}
