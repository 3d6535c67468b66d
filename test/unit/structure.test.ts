/**
 * The shape the restructuring of issue 23 left, kept: no import cycle between product files, and
 * the agent's ground floor (agent/model/) imports nothing of the agent above it, nor agent/disk/
 * anything above the floor (hack/structure.ts prints the figures).
 */
import { dirname } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cycles, importsOf, sourceFiles } from '../../hack/structure.js';

const files = sourceFiles();
const graph = new Map(files.map((f) => [f, importsOf(f).filter((t) => files.includes(t))]));

describe('the import structure', () => {
  it('has no cycle between files', () => {
    expect(cycles(graph)).toEqual([]);
  });

  it('cycles() finds a cycle when there is one (so the check above can fail)', () => {
    const g = new Map([
      ['a', ['b']],
      ['b', ['c']],
      ['c', ['a']],
      ['d', ['a']],
    ]);
    expect(cycles(g)).toEqual([['a', 'b', 'c']]);
  });

  it('agent/model imports only itself and api/; agent/disk only itself, the model and api/', () => {
    const arrows = (room: string): string[] =>
      [...graph]
        .filter(([f]) => dirname(f) === room)
        .flatMap(([f, ts]) => ts.map((t) => `${f} -> ${t}`));
    for (const a of arrows('agent/model')) expect(a).toMatch(/ -> (agent\/model|api)\//);
    for (const a of arrows('agent/disk')) expect(a).toMatch(/ -> (agent\/(model|disk)|api)\//);
    expect(arrows('agent/model').length).toBeGreaterThan(0);
  });
});
