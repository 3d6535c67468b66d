/**
 * Sample outputs in the docs, checked against real runs: a fenced block right after a
 * `<!-- sample: ID -->` line is what a command printed. A test runs that command for real
 * (test/unit/docs-samples-real.test.ts offline, test/integration/docs-samples.test.ts against the
 * test cluster) and compares after normalizing what differs from run to run: checksums, ages,
 * temporary paths and namespaces (given per sample), and whitespace runs (kubectl's alignment
 * follows the names' widths; a wrapped line in the docs reads the same).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from './tools.js';

export interface DocSample {
  id: string;
  file: string;
  line: number;
  text: string;
}

/** Every sample the tests produce, by the test that produces it. */
export const SAMPLE_IDS = {
  unit: ['readme-validate-errors', 'api-validate-errors', 'cli-plan'],
  integration: [
    'getting-started-get-osc',
    'getting-started-get-oscnode',
    'controller-reference-not-found',
    'cluster-api-preview',
    'cluster-api-preview-machines',
  ],
} as const;

export function docFiles(): string[] {
  return [
    'README.md',
    ...readdirSync(join(repoRoot, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .sort()
      .map((f) => `docs/${f}`),
  ];
}

const MARKER = /^<!-- sample: ([a-z0-9-]+) -->\n```[a-z]*\n([\s\S]*?)^```/gm;

export function docSamples(): DocSample[] {
  const out: DocSample[] = [];
  for (const file of docFiles()) {
    const text = readFileSync(join(repoRoot, file), 'utf8');
    for (const m of text.matchAll(MARKER)) {
      out.push({
        id: m[1] ?? '',
        file,
        line: text.slice(0, m.index).split('\n').length,
        text: m[2] ?? '',
      });
    }
  }
  return out;
}

export function docSample(id: string): DocSample {
  const found = docSamples().filter((s) => s.id === id);
  if (found.length !== 1) throw new Error(`${String(found.length)} doc samples named ${id}`);
  return found[0] as DocSample;
}

/**
 * Fenced blocks without a language that hold a command's output (a `$ ` prompt line, a kubectl
 * table, `file.yaml:N:` errors, a condition): each must be a marked sample.
 */
export function unmarkedOutputs(): string[] {
  const out: string[] = [];
  for (const file of docFiles()) {
    const text = readFileSync(join(repoRoot, file), 'utf8');
    for (const m of text.matchAll(/^(<!-- sample: [a-z0-9-]+ -->\n)?```\n([\s\S]*?)^```/gm)) {
      const body = m[2] ?? '';
      const looksLikeOutput = /^(\$ |NAME |[\w.-]+\.yaml:\d+: |\w+=(True|False) )/.test(body);
      if (looksLikeOutput && !m[1]) {
        out.push(`${file}:${String(text.slice(0, m.index).split('\n').length)}`);
      }
    }
  }
  return out;
}

/** Volatile fields out, whitespace runs collapsed. `subs` first (temp paths, namespaces). */
export function normalize(text: string, subs: [string, string][] = []): string {
  let t = text;
  for (const [from, to] of subs) t = t.split(from).join(to);
  return t
    .replace(/\b[0-9a-f]{64}\b/g, '<checksum>')
    .replace(/\b[0-9a-f]{12}\b/g, '<checksum>')
    .replace(/(^|\s)\d+(s|m|h|d)(\d+(s|m|h))?(?=\s|$)/g, '$1<age>')
    .replace(/\s+/g, ' ')
    .trim();
}
