/**
 * The sample `kubectl get osc` / `kubectl get oscnode` outputs in the docs have the columns the
 * CRDs print (api/crd/crd.ts, default priority), in their order, and checksums as long as the ones
 * the controller and the agent write (12 hex characters): a new column or a longer checksum
 * fails here until the samples follow.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { operatingSystemConfigCrd, operatingSystemConfigNodeCrd } from '../../api/crd/crd.js';

const repoRoot = join(import.meta.dirname, '..', '..');
const files = [
  'README.md',
  ...readdirSync(join(repoRoot, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

interface Column {
  name: string;
  jsonPath: string;
  priority?: number;
}

function columns(crd: ReturnType<typeof operatingSystemConfigCrd>): string[] {
  const versions = (crd as { spec: { versions: { additionalPrinterColumns: Column[] }[] } }).spec
    .versions;
  return [
    'NAME',
    ...(versions[0]?.additionalPrinterColumns ?? [])
      .filter((c) => (c.priority ?? 0) === 0)
      .map((c) => c.name.toUpperCase()),
  ];
}

const EXPECTED: Record<string, string[]> = {
  osc: columns(operatingSystemConfigCrd()),
  oscnode: columns(operatingSystemConfigNodeCrd()),
};
const CHECKSUM_COLUMNS = new Set(['CHECKSUM', 'DESIRED', 'APPLIED']);

interface Sample {
  file: string;
  kind: string;
  lines: string[];
}

/** Fenced blocks that start with a NAME header, and the `kubectl get` the text ran before them. */
function samples(): Sample[] {
  const out: Sample[] = [];
  for (const file of files) {
    const text = readFileSync(join(repoRoot, file), 'utf8');
    let kind: string | undefined;
    const blocks = text.split(/^```[a-z]*\n/m);
    for (const [i, block] of blocks.entries()) {
      if (i % 2 === 0) continue; // outside a fence
      const body = block.split('\n```')[0] ?? block;
      const got = [...body.matchAll(/kubectl get (oscnode|osc)\b/g)].at(-1)?.[1];
      if (got) kind = got;
      if (body.startsWith('NAME ') && kind) out.push({ file, kind, lines: body.split('\n') });
    }
  }
  return out;
}

/** A row's cells, cut at the header's column starts (empty cells stay empty). */
function cells(header: string, row: string): string[] {
  const starts = [...header.matchAll(/\S+/g)].map((m) => m.index);
  return starts.map((s, i) => row.slice(s, starts[i + 1]).trim());
}

describe('sample kubectl get outputs in the docs', () => {
  const found = samples();

  it('there are samples of both kinds', () => {
    expect(new Set(found.map((s) => s.kind))).toEqual(new Set(['osc', 'oscnode']));
  });

  it.each(found.map((s) => [`${s.file} (${s.kind})`, s] as const))(
    '%s: the CRD’s columns, 12-character checksums',
    (_name, sample) => {
      const [header = '', ...rows] = sample.lines.filter(Boolean);
      const names = header.split(/\s+/);
      expect(names).toEqual(EXPECTED[sample.kind]);
      for (const row of rows) {
        const values = cells(header, row);
        names.forEach((n, i) => {
          const v = values[i] ?? '';
          if (CHECKSUM_COLUMNS.has(n) && v !== '')
            expect(v, `${n} in "${row}"`).toMatch(/^[0-9a-f]{12}$/);
        });
      }
    },
  );
});
