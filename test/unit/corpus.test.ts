/**
 * The bad-input corpus and the examples, through the real `oscar validate` code path: every
 * invalid fixture must fail with its paired message (its first line, `# expect: …`), and every
 * example must pass.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { validateFiles } from '../../cli/commands/validate.js';
import { loadDocuments } from '../../api/load.js';

const root = join(import.meta.dirname, '..', '..');
const invalidDir = join(root, 'test', 'fixtures', 'invalid');
const examplesDir = join(root, 'examples');

async function run(files: string[]): Promise<{ ok: boolean; lines: string[] }> {
  const lines: string[] = [];
  const ok = await validateFiles(files, (line) => lines.push(line));
  return { ok, lines };
}

describe('the invalid corpus', () => {
  const fixtures = readdirSync(invalidDir).filter((f) => f.endsWith('.yaml'));

  it('has at least 40 cases', () => {
    expect(fixtures.length).toBeGreaterThanOrEqual(40);
  });

  it.each(fixtures)('%s is refused with its paired message', async (name) => {
    const path = join(invalidDir, name);
    const expected = /^# expect: (.+)$/m.exec(readFileSync(path, 'utf8'))?.[1];
    expect(expected, `${name} needs a "# expect: …" first line`).toBeTruthy();
    const { ok, lines } = await run([path]);
    expect(ok).toBe(false);
    expect(lines.join('\n')).toContain(expected);
    for (const line of lines) expect(line.startsWith(`${path}:`)).toBe(true);
  });

  it('refuses a 5 MiB file content quickly, with a size message', () => {
    const big = 'x'.repeat(5 * 1024 * 1024);
    const text = `apiVersion: oscar.dev/v1alpha1
kind: OperatingSystemConfig
metadata: {name: huge}
spec:
  type: ubuntu
  purpose: reconcile
  files:
    - path: /var/lib/big
      content:
        inline:
          data: ${big}
`;
    // The size is checked before the document is validated (hack/bench/validate.ts times it).
    const docs = loadDocuments(text);
    expect(docs).toHaveLength(1);
    expect(docs[0]?.errors[0]?.message).toMatch(
      /the document is 5\.0 MiB; an OperatingSystemConfig must fit in 1\.5 MiB/,
    );
  });

  it('refuses an inline data field above 1 MiB in an otherwise small document', async () => {
    const data = Buffer.alloc(1100 * 1024, 1)
      .toString('base64')
      .slice(0, 1100 * 1024);
    const { validateOperatingSystemConfig } = await import('../../api/validate.js');
    const errors = validateOperatingSystemConfig({
      apiVersion: 'oscar.dev/v1alpha1',
      kind: 'OperatingSystemConfig',
      metadata: { name: 'x' },
      spec: {
        type: 'ubuntu',
        purpose: 'reconcile',
        files: [{ path: '/x', content: { inline: { encoding: 'b64', data } } }],
      },
    });
    expect(errors.map((e) => `${e.path}: ${e.message}`).join('\n')).toContain(
      'spec.files[0].content.inline.data: inline data is 1.1 MiB, above the 1.0 MiB limit',
    );
  });
});

describe('the examples', () => {
  const examples = readdirSync(examplesDir)
    .filter((f) => f.endsWith('.yaml'))
    .map((f) => join(examplesDir, f));

  it('include the four kinds the docs promise', () => {
    expect(examples.length).toBeGreaterThanOrEqual(4);
  });

  it('all validate', async () => {
    const { ok, lines } = await run(examples);
    expect(lines).toEqual([]);
    expect(ok).toBe(true);
  });
});
