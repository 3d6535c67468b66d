// The steady mode of the render benchmark (`hack/bench/render.ts --rounds N`): decides a change of
// a few per cent on a loaded machine, where the best-of-8 table moves ±10–30 % from run to run.
//
// How: many short rounds in one process, after a fixed warm-up. Each round runs one block of the
// yardstick (Node's raw base64 of the same files, concatenated: unchanged from the table) and one
// block of each render (this tree's, and with --against DIR another tree's, e.g. /work/main,
// loaded side by side in the same process), in an order that rotates from round to round, so no
// side always runs first or last. A block is CPU time (process.cpuUsage: the GC's helper
// threads count against whoever made the garbage; --clock thread takes the main thread's only),
// its first fifth untimed (it collects what the block before left). Each round gives ratios of
// blocks run moments apart, so a change in load or clock hits both sides of a ratio alike; the
// figure is the median of the rounds' ratios, with the interquartile range beside it.
import { pathToFileURL } from 'node:url';
import type { ResolvedConfig } from '../../api/resolved.js';
import type { Format } from '../../api/schema.js';
import { benchDocuments, type Mix } from './render-config.js';

type Clock = 'process' | 'thread';

export interface RoundsOptions {
  rounds: number;
  blockMs: number;
  warmupMs: number;
  mix: Mix;
  formats: readonly Format[];
  /** Another tree (its root) whose renderers run beside this one's. */
  against: string | undefined;
  clock: Clock;
}

/** What a tree brings: its validator and its renderOsc, as loaded from its files. */
interface Tree {
  name: string;
  render(config: unknown, format: Format): unknown;
  resolve(document: Record<string, unknown>): unknown;
}

const TYPES: Record<Format, string> = {
  'cloud-config': 'ubuntu',
  ignition: 'flatcar',
  script: 'generic',
};

async function loadTree(name: string, root: string): Promise<Tree> {
  const url = (path: string): string => pathToFileURL(`${root}/${path}`).href;
  const validated = (await import(url('api/validated.ts'))) as {
    validateAndResolve(doc: unknown, refs: unknown): { ok: boolean; config?: unknown };
  };
  const { NO_REFERENCES } = (await import(url('api/resolve.ts'))) as { NO_REFERENCES: unknown };
  const registryModule = (await import(url('renderers/registry.ts'))) as {
    defaultRegistry(): unknown;
    renderOsc(registry: unknown, config: unknown, options: object): unknown;
  };
  const registry = registryModule.defaultRegistry();
  return {
    name,
    render: (config, format) =>
      registryModule.renderOsc(registry, config, { name: 'bench', namespace: 'bench', format }),
    resolve: (document) => {
      const r = validated.validateAndResolve(document, NO_REFERENCES);
      if (!r.ok) throw new Error(`${name}: the bench's OSC does not validate`);
      return r.config;
    },
  };
}

function clockMs(clock: Clock): () => number {
  return clock === 'thread'
    ? () => {
        const u = process.threadCpuUsage();
        return (u.user + u.system) / 1000;
      }
    : () => {
        const u = process.cpuUsage();
        return (u.user + u.system) / 1000;
      };
}

/** CPU ms per call over one block of `blockMs` (its first fifth untimed). */
async function block(fn: () => unknown, blockMs: number, now: () => number): Promise<number> {
  const warm = now() + blockMs / 5;
  do await fn();
  while (now() < warm);
  const start = now();
  let end = start;
  let n = 0;
  while (end < start + blockMs || n < 2) {
    await fn();
    n++;
    end = now();
  }
  return (end - start) / n;
}

function quantile(sorted: readonly number[], q: number): number {
  const at = (sorted.length - 1) * q;
  const lo = Math.floor(at);
  const hi = Math.ceil(at);
  return (sorted[lo] ?? NaN) + ((sorted[hi] ?? NaN) - (sorted[lo] ?? NaN)) * (at - lo);
}

/** "median (p25–p75)" of `values`, each shown by `show`. */
function spread(values: readonly number[], show: (v: number) => string): string {
  const s = [...values].sort((a, b) => a - b);
  return `${show(quantile(s, 0.5))} (${show(quantile(s, 0.25))}–${show(quantile(s, 0.75))})`;
}

/**
 * A 95 % interval for the median of `values` (1,000 bootstrap resamples, a fixed seed): a change
 * is decided when the interval of this / against leaves out 1.
 */
function medianInterval(values: readonly number[]): [number, number] {
  let seed = 24;
  const random = (): number => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x80000000;
  const medians: number[] = [];
  for (let k = 0; k < 1000; k++) {
    const sample = values.map(() => values[Math.floor(random() * values.length)] ?? NaN);
    medians.push(
      quantile(
        sample.sort((a, b) => a - b),
        0.5,
      ),
    );
  }
  medians.sort((a, b) => a - b);
  return [quantile(medians, 0.025), quantile(medians, 0.975)];
}

const pct = (v: number): string => `${(v * 100).toFixed(1)} %`;
const ms = (v: number): string => v.toFixed(3);

export async function runRounds(options: RoundsOptions): Promise<void> {
  const here = new URL('../..', import.meta.url).pathname.replace(/\/$/, '');
  const trees = [await loadTree('this', here)];
  if (options.against !== undefined) trees.push(await loadTree('against', options.against));
  const now = clockMs(options.clock);
  const documentFor = benchDocuments(options.mix);
  console.log(
    `render rounds: ${options.mix}, ${options.rounds} rounds of ${options.blockMs} ms CPU blocks (${options.clock} clock), warm-up ${options.warmupMs} ms each; trees: ${trees.map((t) => (t.name === 'this' ? `this (${here})` : `against (${options.against ?? ''})`)).join(', ')}`,
  );
  for (const format of options.formats) {
    const configs = trees.map((t) => t.resolve(documentFor(TYPES[format])));
    const contents = (configs[0] as ResolvedConfig).files.map((f) => f.content);
    const all = Buffer.concat(contents);
    const sides: { name: string; fn: () => unknown }[] = [
      { name: 'base64', fn: () => all.toString('base64') },
      ...trees.map((t, i) => ({ name: t.name, fn: () => t.render(configs[i], format) })),
    ];
    // a fixed warm-up: every side, in turns, until each has had warmupMs
    for (let turn = 0; turn < 4; turn++) {
      for (const side of sides) await block(side.fn, options.warmupMs / 4, now);
    }
    const perSide: number[][] = sides.map(() => []);
    for (let round = 0; round < options.rounds; round++) {
      for (let k = 0; k < sides.length; k++) {
        const i = (k + round) % sides.length;
        const side = sides[i];
        if (side !== undefined) perSide[i]?.push(await block(side.fn, options.blockMs, now));
      }
    }
    report(format, sides, perSide);
  }
  console.log(
    "\nvs base64: per round, the yardstick block (raw base64 of the same bytes) / the render block, in CPU ms per call;\nthis / against: per round, this tree's render / the other tree's (below 1: this is faster). median (p25–p75) over the rounds;\nthe median's 95 % interval by bootstrap: a change is decided when it leaves out 1.",
  );
}

function report(
  format: Format,
  sides: readonly { name: string }[],
  perSide: readonly (readonly number[])[],
): void {
  const base = perSide[0] ?? [];
  console.log(`\n${format}: base64 ${spread(base, ms)} ms`);
  for (let i = 1; i < sides.length; i++) {
    const times = perSide[i] ?? [];
    const ratios = times.map((t, r) => (base[r] ?? NaN) / t);
    console.log(
      `  ${(sides[i]?.name ?? '').padEnd(8)} ${spread(times, ms)} ms/render   vs base64 ${spread(ratios, pct)}`,
    );
  }
  if (sides.length === 3) {
    const mine = perSide[1] ?? [];
    const theirs = perSide[2] ?? [];
    const ratio = mine.map((t, r) => t / (theirs[r] ?? NaN));
    const [low, high] = medianInterval(ratio);
    console.log(
      `  this / against: ${spread(ratio, (v) => v.toFixed(3))}, median's 95 % interval ${low.toFixed(3)}–${high.toFixed(3)}`,
    );
  }
}
