import { setFlagsFromString } from 'node:v8';

/**
 * For the long-running commands (the agent and the controller). Two V8 settings, both read
 * whenever the heap decides to grow, so setting them at run time works; call this before the
 * command's modules load (loading grows the heap too). Other commands keep V8's defaults.
 * - The young generation stays at its initial size. V8 doubles it (up to 2 × 16 MB) whenever many
 *   objects survive a scavenge — as they do while modules load and a config is decoded — and keeps
 *   it committed while idle; and Buffers (watch chunks, rendered data) are freed only when a
 *   scavenge finds their wrappers dead, so with rare scavenges external memory climbs to V8's
 *   64 MB trigger. Small and frequent scavenges free them at once.
 * - The old generation grows and compacts as for a small device (--optimize-for-size).
 * Measured: the agent (hack/bench/agent.ts, 50 changes then idle) ~15 MB less idle RSS, peak
 * during the changes 79 → 72 MB; the controller (hack/bench/controller.ts, a fresh controller
 * converging 1,000 existing OSCs) peak RSS 195 → 132–144 MiB for 8.9 → 12–13 s of CPU (the API
 * server, not the controller's CPU, limits its throughput).
 */
export function tuneHeapForLongRunning(): void {
  setFlagsFromString('--semi-space-growth-factor=1');
  setFlagsFromString('--optimize-for-size');
}

/**
 * For the agent only (it lives on every node; its plans are small). V8 tiers hot functions up to
 * Maglev and then TurboFan; those compilers are ~5 MB of node's own binary, paged in the first time
 * either runs, plus ~3 MB of their zones and code. Capped at Sparkplug (the baseline compiler: bytecode
 * turned into machine code one-to-one), they never run. Measured on Node.js 24 (docs/agent.md,
 * Performance): the quiet Secret-mode agent 72 → 65 MB RSS, `oscar agent --file` 78 → 69 MB; the
 * planner's p50 on 1,000 files ~0.5 → ~1.2–2 ms, far under its 20 ms target. --jitless saves ~2 MB
 * more but puts a cold plan over 20 ms. The controller keeps every tier: it renders far more.
 */
export function limitJitForAgent(): void {
  // not --max-opt=1: V8 reads that one only when it starts (measured: no effect set at run time)
  setFlagsFromString('--no-maglev');
  setFlagsFromString('--no-turbofan');
}
