import { lstat, mkdir, mkdtemp, readFile, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { applyDesired } from '../../agent/apply.js';
import { desiredFromText } from '../../agent/desired.js';
import { depsFor } from '../../agent/local.js';
import { EXIT_CHANGES, EXIT_ERROR, EXIT_NO_CHANGES, runPlan, type PlanOptions } from './plan.js';

let dir: string;
let root: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'oscar-plan-cli-'));
  root = join(dir, 'root');
  await mkdir(root);
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const osc = (files: string): string =>
  `apiVersion: oscar.dev/v1alpha1\nkind: OperatingSystemConfig\nmetadata:\n  name: web\nspec:\n  type: generic\n  purpose: reconcile\n  files:\n${files}`;
const fileEntry = (path: string, data: string, permissions = '0644'): string =>
  `    - path: ${path}\n      permissions: "${permissions}"\n      content: {inline: {data: ${JSON.stringify(data)}}}\n`;

async function plan(
  text: string,
  options: Partial<PlanOptions> = {},
): Promise<{ code: number; out: string; err: string }> {
  const path = join(dir, 'osc.yaml');
  await writeFile(path, text);
  let out = '';
  const err: string[] = [];
  const code = await runPlan(
    { file: options.file ?? path, root, ...options },
    {
      stdout: (t) => (out += t),
      stderr: (l) => err.push(l),
      stdin: Readable.from([text]),
    },
  );
  return { code, out, err: err.join('\n') };
}

/** Applies `text` to the root, as the agent would. */
async function apply(text: string): Promise<void> {
  await applyDesired(depsFor({ root }), await desiredFromText(text, 'osc.yaml'));
}

describe('oscar plan', () => {
  it('shows a unified diff of a text file it would change, and exits 2 with --detailed-exitcode', async () => {
    await apply(osc(fileEntry('/etc/app.conf', 'a\nb\nc\n')));
    const next = osc(fileEntry('/etc/app.conf', 'a\nB\nc\n'));
    const r = await plan(next, { detailedExitcode: true });
    expect(r.code).toBe(EXIT_CHANGES);
    expect(r.out).toContain('write /etc/app.conf (0644 root:root, 6 B) — content changed');
    expect(r.out).toContain(
      ['--- /etc/app.conf', '+++ /etc/app.conf', '@@ -1,3 +1,3 @@', ' a', '-b', '+B', ' c']
        .map((l) => `       ${l}`)
        .join('\n'),
    );
    // without the flag, changes are a success like any other plan
    expect((await plan(next)).code).toBe(EXIT_NO_CHANGES);
  });

  it('exits 0 with --detailed-exitcode when there is nothing to do', async () => {
    const same = osc(fileEntry('/etc/app.conf', 'x\n'));
    await apply(same);
    const r = await plan(same, { detailedExitcode: true });
    expect(r.code).toBe(EXIT_NO_CHANGES);
    expect(r.out).toContain('nothing to do');
  });

  it('exits 1 on an error, with the file and the line', async () => {
    const r = await plan(osc(fileEntry('/etc/app.conf', 'x\n').replace('"0644"', '0644')), {
      detailedExitcode: true,
    });
    expect(r.code).toBe(EXIT_ERROR);
    expect(r.err).toMatch(/osc\.yaml:10: spec\.files\[0\]\.permissions: must be a quoted octal/);
  });

  it('diffs a new file against /dev/null; hides the content of a private file unless asked', async () => {
    const text = osc(
      fileEntry('/etc/motd', 'hello\n') + fileEntry('/etc/token', 's3cr3t-token\n', '0600'),
    );
    const r = await plan(text);
    expect(r.out).toContain('--- /dev/null\n       +++ /etc/motd');
    expect(r.out).toContain('+hello');
    expect(r.out).toContain(
      '(content not shown: mode 0600 is not world-readable; --diff-private shows it)',
    );
    expect(r.out).not.toContain('s3cr3t-token');
    expect((await plan(text, { diffPrivate: true })).out).toContain('+s3cr3t-token');
    expect((await plan(text, { diff: false })).out).not.toContain('+hello');
  });

  it('says binary content changed instead of diffing it', async () => {
    await mkdir(join(root, 'etc'), { recursive: true });
    await writeFile(join(root, 'etc/blob'), Buffer.from([0, 1, 2, 3]));
    const r = await plan(
      osc(
        '    - path: /etc/blob\n      permissions: "0644"\n      content: {inline: {encoding: b64, data: AAECAwQF}}\n',
      ),
    );
    expect(r.out).toContain('(binary content: 4 B → 6 B)');
  });

  it('never reads through a link at a declared path, nor a file larger than oscar declares', async () => {
    await mkdir(join(root, 'etc'), { recursive: true });
    await writeFile(join(dir, 'elsewhere'), 'not-oscars-to-show\n');
    await symlink(join(dir, 'elsewhere'), join(root, 'etc/linked'));
    await writeFile(join(root, 'etc/huge'), Buffer.alloc(1024 * 1024 + 1, 'h'));
    const r = await plan(osc(fileEntry('/etc/linked', 'a\n') + fileEntry('/etc/huge', 'b\n')));
    expect(r.out).not.toContain('not-oscars-to-show');
    expect(r.out).not.toContain('hhhh');
    expect(
      r.out.match(/\(current content not read: not a regular file, or larger than/g),
    ).toHaveLength(2);
  });

  it('reads -f - from stdin, skips a Secret beside the OSC with a note', async () => {
    const text = `apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n---\n${osc(fileEntry('/etc/a', 'a\n'))}`;
    const r = await plan(text, { file: '-' });
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^plan for <stdin> \([0-9a-f]{12}\) on /);
    expect(r.err).toContain(
      '<stdin>:1: note: skipping document 1 (v1 Secret "s"): not an OperatingSystemConfig',
    );
  });

  it('-o json and -o yaml give the actions as data, with the diffs and no content', async () => {
    await apply(osc(fileEntry('/etc/app.conf', 'one\n')));
    const r = await plan(osc(fileEntry('/etc/app.conf', 'two\n')), { output: 'json' });
    const data = JSON.parse(r.out) as {
      changes: boolean;
      checksum: string;
      actions: Record<string, unknown>[];
      restarts: string[];
    };
    expect(data.changes).toBe(true);
    expect(data.checksum).toMatch(/^[0-9a-f]{64}$/);
    expect(data.actions[0]).toMatchObject({
      kind: 'writeFile',
      path: '/etc/app.conf',
      mode: '0644',
      owner: 'root:root',
      bytes: 4,
      reason: 'content changed',
    });
    expect(String(data.actions[0]?.diff)).toContain('-one\n+two\n');
    expect(data.actions[0]).not.toHaveProperty('content');
    const yaml = await plan(osc(fileEntry('/etc/app.conf', 'two\n')), { output: 'yaml' });
    expect(yaml.out).toMatch(/^file: /m);
    expect((await plan('x', { output: 'xml' })).err).toContain('must be one of json, yaml');
  });

  it("prints the disruption level: None for a plain file, Reboot for onChange: reboot or the node's flag", async () => {
    await apply(osc(fileEntry('/etc/app.conf', 'one\n')));
    expect((await plan(osc(fileEntry('/etc/app.conf', 'two\n')))).out).toContain(
      'disruption: None\n',
    );
    const grub = `${fileEntry('/etc/default/grub.d/oscar.cfg', 'GRUB_CMDLINE_LINUX=x\n')}      onChange: reboot\n`;
    const r = await plan(osc(`${fileEntry('/etc/app.conf', 'one\n')}${grub}`), { output: 'json' });
    expect((JSON.parse(r.out) as { disruption: unknown }).disruption).toEqual({
      level: 'Reboot',
      reasons: ['file /etc/default/grub.d/oscar.cfg (onChange: reboot)'],
    });
    // nothing to do, but the node's packages asked for a reboot
    await mkdir(join(root, 'run'));
    await writeFile(join(root, 'run/reboot-required'), '');
    const flagged = await plan(osc(fileEntry('/etc/app.conf', 'one\n')));
    expect(flagged.out).toContain('nothing to do');
    expect(flagged.out).toContain(
      'disruption: Reboot (the node requires a reboot (/var/run/reboot-required))',
    );
  });

  it('writes nothing: the root, its state directory and the host are as they were', async () => {
    await mkdir(join(root, 'etc'), { recursive: true });
    await writeFile(join(root, 'etc/app.conf'), 'old\n');
    const hostState = await exists('/var/lib/oscar');
    const before = await snapshot(root);
    const r = await plan(osc(fileEntry('/etc/app.conf', 'new\n') + fileEntry('/etc/b', 'b\n')), {
      detailedExitcode: true,
    });
    expect(r.code).toBe(EXIT_CHANGES);
    expect(await snapshot(root)).toEqual(before); // no var/lib/oscar beneath the root, no log
    expect(await exists('/var/lib/oscar')).toBe(hostState);
  });

  it('refuses a root that does not exist instead of creating it', async () => {
    const missing = join(dir, 'no-such-root');
    const r = await plan(osc(fileEntry('/etc/a', 'a\n')), { root: missing });
    expect(r.code).toBe(EXIT_ERROR);
    expect(r.err).toContain(`the root ${missing} does not exist; a plan creates nothing`);
    expect(await exists(missing)).toBe(false);
  });
});

async function exists(path: string): Promise<boolean> {
  return lstat(path).then(
    () => true,
    () => false,
  );
}

/** Every entry beneath `top`: its path, type, mode, size, mtime and content. */
async function snapshot(top: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (path: string): Promise<void> => {
    const st = await lstat(path);
    const content = st.isFile() ? (await readFile(path)).toString('base64') : '';
    out.push(`${path} ${st.mode.toString(8)} ${st.size} ${st.mtimeMs} ${content}`);
    if (st.isDirectory()) {
      for (const name of (await readdir(path)).sort()) await walk(join(path, name));
    }
  };
  await walk(top);
  return out;
}
