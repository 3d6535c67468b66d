/**
 * The agent runs on every node, and its memory is every node's: what `oscar agent` loads for the
 * Secret source must stay small (docs/agent.md, Performance). This walks the static imports from
 * the command's module — what loads before any dynamic import() — and refuses the heavy packages
 * the Secret-mode agent does not need: the schema (typebox), the YAML parser, express, chokidar,
 * @kubernetes/client-node. (A static import of agent/desired.ts once put typebox and YAML back
 * into every agent: +9 MB of RSS.)
 */
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const repoRoot = join(import.meta.dirname, '..', '..');

/** Value imports and re-exports of one module (type-only ones load nothing). */
function staticImports(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const out: string[] = [];
  const re = /^(?:import|export)\s+(?!type\b)(?:[^'";]*?\sfrom\s+)?'([^']+)'/gms;
  for (const m of text.matchAll(re)) if (m[1]) out.push(m[1]);
  return out;
}

/** Every module and package reachable from `entry` through static imports. */
function closure(entry: string): { modules: Set<string>; packages: Set<string> } {
  const modules = new Set<string>();
  const packages = new Set<string>();
  const visit = (file: string): void => {
    if (modules.has(file)) return;
    modules.add(file);
    for (const spec of staticImports(file)) {
      if (spec.startsWith('.')) visit(resolve(dirname(file), spec.replace(/\.js$/, '.ts')));
      else if (!spec.startsWith('node:'))
        packages.add(
          spec
            .split('/')
            .slice(0, spec.startsWith('@') ? 2 : 1)
            .join('/'),
        );
    }
  };
  visit(entry);
  return { modules, packages };
}

describe('oscar agent (Secret source) loads', () => {
  it('no schema, YAML parser, web framework, file watcher or full Kubernetes client', () => {
    const { modules, packages } = closure(join(repoRoot, 'cli', 'commands', 'agent.ts'));
    for (const heavy of ['typebox', 'yaml', 'express', 'chokidar', '@kubernetes/client-node']) {
      expect([...packages], `${heavy} is loaded statically`).not.toContain(heavy);
    }
    const local = [...modules].map((m) => m.slice(repoRoot.length + 1));
    for (const module of ['api/schema.ts', 'api/validate.ts', 'api/load.ts', 'agent/desired.ts']) {
      expect(local, `${module} is loaded statically`).not.toContain(module);
    }
    // what it does load, so this test sees the graph at all
    expect(local).toContain('agent/agent.ts');
    expect([...packages]).toContain('pino');
  });
});
