import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { checkFiles, formatResults, validationRegistry, type DocumentResult } from './validate.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'oscar-validate-cli-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const osc = (name: string, spec: string): string =>
  `apiVersion: oscar.dev/v1alpha1\nkind: OperatingSystemConfig\nmetadata:\n  name: ${name}\nspec:\n${spec}`;
const SECRET = 'apiVersion: v1\nkind: Secret\nmetadata:\n  name: join\nstringData:\n  token: abc\n';

async function validate(
  files: string[],
  options: { strict?: boolean; renderersConfig?: string; refDir?: string; stdin?: string } = {},
): Promise<{ ok: boolean; results: DocumentResult[]; lines: string[] }> {
  const { registry, external } = await validationRegistry(options.renderersConfig);
  const results = await checkFiles(
    files,
    {
      registry,
      external,
      ...(options.refDir ? { refDir: options.refDir } : {}),
      ...(options.stdin !== undefined ? { stdin: Readable.from([options.stdin]) } : {}),
    },
    options.strict,
  );
  return {
    ok: results.every((r) => r.result !== 'invalid'),
    results,
    lines: formatResults(results, options.strict === true),
  };
}

async function file(name: string, text: string): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, text);
  return path;
}

describe('oscar validate', () => {
  it('reads -f - from stdin and names it <stdin>', async () => {
    const good = await validate(['-'], {
      stdin: osc('web', '  type: ubuntu\n  purpose: reconcile\n'),
    });
    expect(good.ok).toBe(true);
    expect(good.results[0]).toMatchObject({ file: '<stdin>', name: 'web', result: 'valid' });
    const bad = await validate(['-'], { stdin: osc('web', '  type: ubuntu\n') });
    expect(bad.ok).toBe(false);
    // a missing field is reported on the line of the object that lacks it
    expect(bad.lines).toEqual(['<stdin>:5: spec.purpose: is required']);
  });

  it('skips a Secret next to the OSC with a note, and a trailing --- silently', async () => {
    const path = await file(
      'mixed.yaml',
      `${SECRET}---\n${osc('web', '  type: ubuntu\n  purpose: reconcile\n')}---\n`,
    );
    const r = await validate([path]);
    expect(r.ok).toBe(true);
    expect(r.results.map((x) => x.result)).toEqual(['skipped', 'valid']);
    expect(r.lines).toEqual([
      `${path}:1: note: skipping document 1 (v1 Secret "join"): not an OperatingSystemConfig`,
    ]);
  });

  it('names file:line and the document in a stream of several', async () => {
    const path = await file(
      'two.yaml',
      `${osc('a', '  type: ubuntu\n  purpose: reconcile\n')}---\n${osc('b', '  type: ubuntu\n  purpose: reconcile\n  files:\n    - path: /etc/x\n      permissions: 0644\n      content: {inline: {data: x}}\n')}`,
    );
    const r = await validate([path]);
    expect(r.ok).toBe(false);
    expect(r.lines).toHaveLength(1);
    expect(r.lines[0]).toMatch(
      new RegExp(
        `^${path.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}:18: document 2: spec\\.files\\[0\\]\\.permissions: must be a quoted octal string`,
      ),
    );
  });

  it('refuses a type no renderer serves, listing the known ones', async () => {
    const path = await file('plan9.yaml', osc('p', '  type: plan9\n  purpose: reconcile\n'));
    const r = await validate([path]);
    expect(r.ok).toBe(false);
    expect(r.lines.join('\n')).toContain(
      `${path}:6: spec.type: no renderer for type "plan9"; known types: debian, flatcar, generic, opensuse, ubuntu; an external renderer's type is known with --renderers-config FILE`,
    );
  });

  it("accepts an external renderer's type from the controller's --renderers-config file", async () => {
    const config = await file(
      'renderers.yaml',
      'plan9:\n  url: https://renderer.example/render\n  formats: [script]\n',
    );
    const path = await file('plan9-ok.yaml', osc('p', '  type: plan9\n  purpose: reconcile\n'));
    expect((await validate([path], { renderersConfig: config })).ok).toBe(true);
    // and its formats: it offers script only
    const cloud = await file(
      'plan9-cc.yaml',
      osc('p', '  type: plan9\n  purpose: reconcile\n  format: cloud-config\n'),
    );
    const r = await validate([cloud], { renderersConfig: config });
    expect(r.ok).toBe(false);
    expect(r.lines.join('\n')).toContain('spec.format: type "plan9" cannot be rendered as');
  });

  it('--strict fails on the warnings of a dry render; without it they are warnings', async () => {
    // 20 KiB of incompressible content: above the 16 KiB many clouds take as user data
    const big = randomBytes(15_000).toString('base64');
    const path = await file(
      'big-provision.yaml',
      osc(
        'b',
        `  type: ubuntu\n  purpose: provision\n  files:\n    - path: /opt/blob\n      content: {inline: {encoding: b64, data: ${big}}}\n`,
      ),
    );
    const loose = await validate([path]);
    expect(loose.ok).toBe(true);
    expect(loose.lines).toHaveLength(1);
    expect(loose.lines[0]).toMatch(
      new RegExp(
        `^${path.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}:1: warning: provision user data is .* above the 16\\.0 KiB`,
      ),
    );
    const strict = await validate([path], { strict: true });
    expect(strict.ok).toBe(false);
    expect(strict.lines[0]).toMatch(/:1: error: provision user data is .*\(--strict\)$/);
  });

  it('dry-renders with --ref-dir, and says the rendering was not checked without it', async () => {
    const path = await file(
      'refs.yaml',
      osc(
        'r',
        '  type: generic\n  purpose: reconcile\n  files:\n    - path: /etc/token\n      permissions: "0600"\n      content: {secretRef: {name: join, key: token}}\n',
      ),
    );
    const without = await validate([path]);
    expect(without.ok).toBe(true);
    expect(without.lines).toEqual([
      `${path}:1: note: the rendering was not checked: it needs Secret "join"; pass --ref-dir DIR to check it with their data`,
    ]);
    const refs = join(dir, 'refs');
    await mkdir(join(refs, 'secrets', 'join'), { recursive: true });
    const missing = await validate([path], { refDir: refs });
    expect(missing.ok).toBe(false);
    expect(missing.lines.join('\n')).toContain('spec.files[0].content.secretRef');
    await writeFile(join(refs, 'secrets', 'join', 'token'), 'abc');
    expect((await validate([path], { refDir: refs })).lines).toEqual([]);
  });

  it('a file of other kinds only is refused: there is nothing to validate', async () => {
    const path = await file('secret.yaml', SECRET);
    const r = await validate([path]);
    expect(r.ok).toBe(false);
    expect(r.lines).toContain(
      `${path}:1: holds no OperatingSystemConfig (every document is of another kind)`,
    );
  });

  it('an unreadable file is one error naming it', async () => {
    const r = await validate([join(dir, 'absent.yaml')]);
    expect(r.ok).toBe(false);
    expect(r.lines[0]).toMatch(/absent\.yaml: cannot read: ENOENT/);
  });

  it('the results as data (-o json|yaml) carry lines, paths and the outcome per document', async () => {
    const path = await file(
      'data.yaml',
      `${SECRET}---\n${osc('web', '  type: ubuntu\n  purpose: reconcile\n  units:\n    - name: bad\n')}`,
    );
    const { results } = await validate([path]);
    const { printStructured } = await import('../support/output.js');
    const data = parse(printStructured({ valid: false, documents: results }, 'yaml')) as {
      documents: DocumentResult[];
    };
    expect(data.documents).toEqual([
      expect.objectContaining({ document: 1, kind: 'Secret', name: 'join', result: 'skipped' }),
      expect.objectContaining({
        document: 2,
        line: 8,
        kind: 'OperatingSystemConfig',
        name: 'web',
        result: 'invalid',
        errors: [
          expect.objectContaining({
            line: 16,
            path: 'spec.units[0].name',
          }) as unknown,
        ],
      }),
    ]);
  });
});
