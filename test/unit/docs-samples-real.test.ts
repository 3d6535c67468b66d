/**
 * The docs' sample outputs that need no cluster, produced by real runs of `oscar` (a process, as
 * a reader runs it) and compared with the docs after normalizing (test/support/docs-samples.ts).
 * The cluster's samples are in test/integration/docs-samples.test.ts. Also: every block of output
 * in the docs is a marked sample, and every marked sample has a test that produces it.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyDesired } from '../../agent/apply.js';
import { desiredFromText } from '../../agent/desired.js';
import { depsFor } from '../../agent/local.js';
import {
  docSample,
  docSamples,
  normalize,
  SAMPLE_IDS,
  unmarkedOutputs,
} from '../support/docs-samples.js';
import { repoRoot } from '../support/tools.js';

const execFileP = promisify(execFile);
let dir = '';

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'oscar-samples-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** `oscar ARGS` as a process; stdout and stderr as a terminal shows them, and the exit code. */
async function oscar(args: string[]): Promise<{ out: string; code: number }> {
  try {
    const r = await execFileP(process.execPath, ['--import', 'tsx', 'cli/oscar.ts', ...args], {
      cwd: repoRoot,
    });
    return { out: `${r.stdout}${r.stderr}`, code: 0 };
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string; code?: number };
    return { out: `${e.stdout ?? ''}${e.stderr ?? ''}`, code: e.code ?? -1 };
  }
}

function expectSample(id: string, real: string): void {
  const sample = docSample(id);
  const subs: [string, string][] = [[`${dir}/`, '']];
  expect(normalize(sample.text), `${sample.file}:${String(sample.line)} (${id})`).toBe(
    normalize(real, subs),
  );
}

describe('the docs’ sample outputs (offline, real runs)', () => {
  it('every output block in the docs is a marked sample, and each has its test', () => {
    expect(unmarkedOutputs()).toEqual([]);
    const marked = docSamples()
      .map((s) => s.id)
      .sort();
    expect(marked).toEqual([...SAMPLE_IDS.unit, ...SAMPLE_IDS.integration].sort());
  });

  it('README: oscar validate’s errors', async () => {
    await writeFile(
      join(dir, 'my-osc.yaml'),
      [
        'apiVersion: oscar.dev/v1alpha1',
        'kind: OperatingSystemConfig',
        'metadata:',
        '  name: web',
        'spec:',
        '  type: ubuntu',
        '  purpose: reconcile',
        '  files:',
        '    - path: /etc/app.conf',
        '      permissions: 0644',
        '      content:',
        '        inline: { data: "x\\n" }',
        '  units:',
        '    - name: app.service',
        '      content: "[Service]\\nExecStart=/bin/true\\n"',
        '      filePaths: [/etc/app.conf]',
        '      onChange: reload',
        '',
      ].join('\n'),
    );
    const r = await oscar(['validate', join(dir, 'my-osc.yaml')]);
    expect(r.code).toBe(1);
    expectSample('readme-validate-errors', r.out);
  });

  it('api.md: unknown fields and unit syntax, by line', async () => {
    await writeFile(
      join(dir, 'osc.yaml'),
      [
        'apiVersion: oscar.dev/v1alpha1',
        'kind: OperatingSystemConfig',
        'metadata:',
        '  name: web',
        'spec:',
        '  type: ubuntu',
        '  fromat: script',
        '  purpose: reconcile',
        '  units:',
        '    - content: "[Service]\\nExecStart /bin/true\\n"',
        '      name: app.service',
        '',
      ].join('\n'),
    );
    const r = await oscar(['validate', join(dir, 'osc.yaml')]);
    expect(r.code).toBe(1);
    expectSample('api-validate-errors', r.out);
  });

  it('cli.md: oscar plan with a diff, on a root that has the last version applied', async () => {
    const web = (b: string): string =>
      [
        'apiVersion: oscar.dev/v1alpha1',
        'kind: OperatingSystemConfig',
        'metadata:',
        '  name: web',
        'spec:',
        '  type: generic',
        '  purpose: reconcile',
        '  files:',
        `    - path: /etc/app.conf`,
        `      content: { inline: { data: "a\\n${b}\\nc\\n" } }`,
        '  units:',
        '    - name: app.service',
        '      content: "[Service]\\nExecStart=/bin/sleep infinity\\n"',
        '      filePaths: [/etc/app.conf]',
        '',
      ].join('\n');
    const root = join(dir, 'node');
    await mkdir(root);
    await applyDesired(depsFor({ root }), await desiredFromText(web('b'), 'web.yaml'));
    await writeFile(join(dir, 'web.yaml'), web('B'));
    const r = await oscar([
      'plan',
      '-f',
      join(dir, 'web.yaml'),
      '--root',
      root,
      '--detailed-exitcode',
    ]);
    const sample = docSample('cli-plan');
    // the sample shows the command and `echo "exit $?"`: the same, from this run
    const real = `$ oscar plan -f web.yaml --root /tmp/node --detailed-exitcode; echo "exit $?"\n${r.out.split(root).join('/tmp/node')}exit ${String(r.code)}\n`;
    expect(normalize(sample.text), `${sample.file}:${String(sample.line)}`).toBe(
      normalize(real, [[`${dir}/`, '']]),
    );
  });
});
