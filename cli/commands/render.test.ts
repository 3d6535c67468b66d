import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decode } from '../../renderers/formats.js';
import { goldenDir, repoRoot } from '../../renderers/testdata/golden.js';
import { runRender, type RenderOptions } from './render.js';

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'oscar-render-cli-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function cli(
  opts: RenderOptions,
  stdin?: string,
): Promise<{ code: number; out: Buffer; err: string }> {
  const out: Buffer[] = [];
  const err: string[] = [];
  const code = await runRender(opts, {
    stdout: (d) => out.push(Buffer.from(d)),
    stderr: (l) => err.push(l),
    ...(stdin === undefined ? {} : { stdin: Readable.from([stdin]) }),
  });
  return { code, out: Buffer.concat(out), err: err.join('\n') };
}

const osc = (spec: string): string =>
  `apiVersion: oscar.dev/v1alpha1\nkind: OperatingSystemConfig\nmetadata:\n  name: t\n  namespace: ns\nspec:\n${spec}`;

describe('oscar render', () => {
  it('prints the user data of an example, equal to its golden file, and reports the size', async () => {
    const r = await cli({ file: join(repoRoot, 'examples', 'ubuntu-provision.yaml') });
    expect(r.code).toBe(0);
    expect(
      r.out.equals(await readFile(join(goldenDir, 'ubuntu-provision.cloud-config.yaml'))),
    ).toBe(true);
    expect(r.err).toMatch(/default\/worker-provision: cloud-config, .* \(\d+ bytes\)/);
    const s = await cli({
      file: join(repoRoot, 'examples', 'ubuntu-provision.yaml'),
      format: 'script',
    });
    expect(s.out.equals(await readFile(join(goldenDir, 'ubuntu-provision.sh')))).toBe(true);
  });

  it('on invalid input prints the field errors, no user data, and exits 1', async () => {
    const file = join(dir, 'bad.yaml');
    await writeFile(
      file,
      osc(
        '  type: ubuntu\n  purpose: provision\n  files:\n    - path: /etc/x\n      permissions: 0644\n      content: {inline: {data: x}}\n',
      ),
    );
    const r = await cli({ file });
    expect(r.code).toBe(1);
    expect(r.out.length).toBe(0);
    // the line of the field itself, the form editors jump to
    expect(r.err).toContain(`${file}:11: spec.files[0].permissions: must be a quoted octal string`);
  });

  it('refuses an unknown format, a format the type lacks, and several documents', async () => {
    const file = join(dir, 'ok.yaml');
    await writeFile(file, osc('  type: flatcar\n  purpose: provision\n'));
    expect((await cli({ file, format: 'rpm' })).err).toMatch(
      /--format must be one of cloud-config, ignition, script/,
    );
    const r = await cli({ file, format: 'cloud-config' });
    expect(r.code).toBe(1);
    expect(r.err).toContain('spec.format: type "flatcar" cannot be rendered as "cloud-config"');
    const two = join(dir, 'two.yaml');
    await writeFile(
      two,
      `${osc('  type: ubuntu\n  purpose: provision\n')}---\n${osc('  type: ubuntu\n  purpose: provision\n')}`,
    );
    expect((await cli({ file: two })).err).toMatch(/has 2 OperatingSystemConfigs/);
  });

  it('resolves secretRef and configMapRef from --ref-dir, and says how when it is missing', async () => {
    const file = join(dir, 'refs.yaml');
    await writeFile(
      file,
      osc(
        '  type: generic\n  purpose: reconcile\n  files:\n' +
          '    - path: /etc/token\n      permissions: "0600"\n      content: {secretRef: {name: join, key: token}}\n' +
          '    - path: /etc/ca.crt\n      content: {configMapRef: {name: ca, key: ca.crt}}\n',
      ),
    );
    const missing = await cli({ file });
    expect(missing.code).toBe(1);
    expect(missing.err).toContain(
      'Secret "join" is referenced but cannot be looked up offline; pass --ref-dir DIR',
    );
    const refs = join(dir, 'refs');
    await mkdir(join(refs, 'secrets', 'join'), { recursive: true });
    await mkdir(join(refs, 'configmaps', 'ca'), { recursive: true });
    await writeFile(join(refs, 'secrets', 'join', 'token'), Buffer.from([0, 1, 2, 255]));
    await writeFile(join(refs, 'configmaps', 'ca', 'ca.crt'), '-----BEGIN CERTIFICATE-----\n');
    const r = await cli({ file, refDir: refs });
    expect(r.err).not.toMatch(/error/i);
    expect(r.code).toBe(0);
    const files = decode('script', r.out).files;
    expect(files.find((f) => f.path === '/etc/token')?.content).toEqual(
      Buffer.from([0, 1, 2, 255]),
    );
    expect(files.find((f) => f.path === '/etc/ca.crt')?.content.toString()).toBe(
      '-----BEGIN CERTIFICATE-----\n',
    );
    await rm(join(refs, 'secrets', 'join', 'token'));
    const noKey = await cli({ file, refDir: refs });
    expect(noKey.err).toContain('spec.files[0].content.secretRef');
  });

  it('--explain prints what each file and unit became; --out writes the user data with mode 0600', async () => {
    const out = join(dir, 'user-data');
    const r = await cli({
      file: join(repoRoot, 'examples', 'ubuntu-kubeadm-reconcile.yaml'),
      explain: true,
      out,
    });
    expect(r.code).toBe(0);
    const table = r.out.toString();
    expect(table.split('\n')[0]).toMatch(/^KIND\s+NAME\s+ORIGIN\s+BECAME$/);
    expect(table).toMatch(
      /file\s+\/etc\/containerd\/config.toml\s+profile\s+write_files, text, 0644 root:root/,
    );
    expect(table).toMatch(
      /unit\s+kubelet.service\s+declared\s+written to \/etc\/systemd\/system\/kubelet.service, enabled, start/,
    );
    expect(table).toMatch(/drop-in\s+containerd.service\/10-oscar-cri.conf\s+profile/);
    expect(table).toMatch(/package\s+kubelet=1.31.2-1.1\s+declared/);
    expect(((await stat(out)).mode & 0o777).toString(8)).toBe('600');
    expect((await readFile(out)).toString()).toMatch(/^#cloud-config\n/);
  });

  it('--gzip compresses a cloud-config payload', async () => {
    const r = await cli({ file: join(repoRoot, 'examples', 'ubuntu-provision.yaml'), gzip: true });
    expect(r.out.subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b]));
    expect(decode('cloud-config', r.out).packages.map((p) => p.name)).toEqual([
      'ca-certificates',
      'curl',
    ]);
  });

  it('--values, --machine, --cluster and --api-server substitute placeholders; a missing value names the field', async () => {
    const file = join(dir, 'placeholders.yaml');
    await writeFile(
      file,
      osc(
        '  type: ubuntu\n  purpose: provision\n  files:\n    - path: /etc/m\n      content: {inline: {data: "{{ machine.name }}.{{ machine.namespace }} {{ cluster.name }} {{ apiServer.url }} {{ values.region }}"}}\n',
      ),
    );
    const r = await cli({
      file,
      values: ['region=eu-1'],
      machine: 'm1',
      cluster: 'c1',
      apiServer: 'https://api:6443',
    });
    expect(r.err).not.toMatch(/error/);
    expect(r.code).toBe(0);
    const files = decode('cloud-config', r.out).files;
    expect(files.find((f) => f.path === '/etc/m')?.content.toString()).toBe(
      'm1.ns c1 https://api:6443 eu-1',
    );
    const missing = await cli({ file, machine: 'm1', cluster: 'c1', apiServer: 'x' });
    expect(missing.code).toBe(1);
    expect(missing.out.length).toBe(0);
    expect(missing.err).toContain(
      'spec.files[0].content.inline.data: line 1: {{ values.region }}: no value "region" is given',
    );
    // Without any placeholder flag the document is rendered as written.
    const asWritten = await cli({ file });
    expect(asWritten.code).toBe(0);
    expect(asWritten.out.toString()).toContain('{{ machine.name }}');
  });

  it('reads -f - from stdin; skips a Secret beside the OSC with a note', async () => {
    const text = `apiVersion: v1\nkind: Secret\nmetadata: {name: join}\n---\n${await readFile(join(repoRoot, 'examples', 'ubuntu-provision.yaml'), 'utf8')}---\n`;
    const r = await cli({ file: '-' }, text);
    expect(r.code).toBe(0);
    expect(r.err).toContain(
      '<stdin>:1: note: skipping document 1 (v1 Secret "join"): not an OperatingSystemConfig',
    );
    expect(
      r.out.equals(await readFile(join(goldenDir, 'ubuntu-provision.cloud-config.yaml'))),
    ).toBe(true);
  });

  it('--explain -o json|yaml gives the rows as data; -o without --explain is refused', async () => {
    const file = join(repoRoot, 'examples', 'ubuntu-kubeadm-reconcile.yaml');
    const r = await cli({ file, explain: true, output: 'json' });
    expect(r.code).toBe(0);
    const data = JSON.parse(r.out.toString()) as {
      format: string;
      items: { kind: string; name: string; origin: string; became: string }[];
    };
    expect(data.format).toBe('cloud-config');
    expect(data.items).toContainEqual(
      expect.objectContaining({ kind: 'unit', name: 'kubelet.service', origin: 'declared' }),
    );
    const yaml = await cli({ file, explain: true, output: 'yaml' });
    expect(yaml.out.toString()).toMatch(/^items:$/m);
    const bare = await cli({ file, output: 'json' });
    expect(bare.code).toBe(1);
    expect(bare.err).toContain('-o json|yaml formats --explain');
    const legacy = await cli({ file, output: 'user-data' });
    expect(legacy.err).toContain('write the user data to a file with --out user-data');
  });
});
