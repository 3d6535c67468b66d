// The agent on real systemd: the cached Debian root boots in systemd-nspawn, the agent (this
// checkout's CLI, bundled with esbuild, its node_modules and the host's Node.js bound read-only)
// applies OperatingSystemConfig YAML from a file inside the node, and the test checks with
// systemctl which units were restarted, reloaded or left alone.
import { mkdir, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bootNode, readNodeFile, uniqueNodeName, type Node } from '../support/nspawn.js';
import { findTool, nodeSuiteGate, repoRoot } from '../support/tools.js';
import { bundleCli } from '../support/bundle.js';
import { buildAptRepo } from './apt-repo.js';

const REPO_IN_NODE = '/opt/oscar';
const CONFIG_DIR_IN_NODE = '/etc/oscar-e2e';

let node: Node | undefined;
let skipReason: string | undefined;
let hostConfigDir: string;
let bundleRel: string;

const unitA = `[Unit]
Description=A: long-running, Restart=always
[Service]
ExecStart=/bin/sh -c 'exec sleep infinity'
Restart=always
[Install]
WantedBy=multi-user.target
`;
const unitB = `[Unit]
Description=B: reloadable
[Service]
ExecStart=/bin/sh -c 'exec sleep infinity'
ExecReload=/bin/sh -c 'echo "reload B=$B" >> /run/e2e-b-reloads'
[Install]
WantedBy=multi-user.target
`;
const unitC = `[Unit]
Description=C: oneshot
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'echo ran >> /run/e2e-c-runs'
[Install]
WantedBy=multi-user.target
`;

function indent(text: string, n: number): string {
  return text
    .split('\n')
    .map((l) => (l === '' ? '' : ' '.repeat(n) + l))
    .join('\n');
}

interface Version {
  aConf: string;
  bDropIn: string;
  withC: boolean;
  extraUnit?: string;
  /** spec.packages, as YAML list items. */
  packages?: string;
}

function osc(v: Version): string {
  const files = [
    { path: '/etc/e2e/a.conf', data: v.aConf, mode: '0640' },
    { path: '/etc/e2e/b.conf', data: 'b\n', mode: '0644' },
    ...(v.withC ? [{ path: '/etc/e2e/c.conf', data: 'c\n', mode: '0600' }] : []),
  ];
  const units = [
    `- name: a.service\n  filePaths: [/etc/e2e/a.conf]\n  content: |\n${indent(unitA, 4)}`,
    `- name: b.service\n  onChange: reload\n  filePaths: [/etc/e2e/b.conf]\n  content: |\n${indent(unitB, 4)}\n  dropIns:\n    - name: 10-env.conf\n      content: |\n${indent(v.bDropIn, 8)}`,
    ...(v.withC
      ? [`- name: c.service\n  filePaths: [/etc/e2e/c.conf]\n  content: |\n${indent(unitC, 4)}`]
      : []),
    ...(v.extraUnit ? [v.extraUnit] : []),
  ];
  return `apiVersion: oscar.dev/v1alpha1
kind: OperatingSystemConfig
metadata:
  name: e2e
  namespace: default
spec:
  type: generic
  purpose: reconcile
  files:
${files.map((f) => `    - path: ${f.path}\n      permissions: '${f.mode}'\n      content:\n        inline:\n          data: ${JSON.stringify(f.data)}`).join('\n')}
  units:
${indent(units.join('\n'), 4)}
${v.packages === undefined ? '' : `  packages:\n${indent(v.packages, 4)}\n`}`;
}

async function agentApply(version: Version): Promise<{ code: number | null; output: string }> {
  if (!node) throw new Error('no node');
  await writeFile(join(hostConfigDir, 'config.yaml'), osc(version));
  const r = await node.exec(
    [
      '/usr/local/bin/node',
      `${REPO_IN_NODE}/${bundleRel}`,
      'agent',
      '--file',
      `${CONFIG_DIR_IN_NODE}/config.yaml`,
      '--once',
    ],
    { timeoutMs: 180_000 },
  );
  return { code: r.code, output: r.stdout + r.stderr };
}

async function show(unit: string): Promise<Record<string, string>> {
  if (!node) throw new Error('no node');
  return node.show(unit, [
    'ActiveState',
    'SubState',
    'MainPID',
    'NRestarts',
    'ExecMainStartTimestampMonotonic',
    'InvocationID',
    'UnitFileState',
    'LoadState',
    'Environment',
  ]);
}

async function lines(path: string): Promise<string[]> {
  if (!node) throw new Error('no node');
  const r = await node.exec(['cat', path]);
  return r.code === 0 ? r.stdout.split('\n').filter((l) => l !== '') : [];
}

beforeAll(async () => {
  const gate = nodeSuiteGate(['systemd-nspawn', 'nsenter', 'pgrep']);
  if (gate.skip !== undefined) {
    skipReason = gate.skip;
    return;
  }
  const root = gate.root;
  const nodeBin = findTool('node');
  if (!nodeBin) throw new Error('node is not on PATH');
  // the CLI bundled (dependencies stay external and resolve from the repo's node_modules)
  bundleRel = await bundleCli(`oscar-${process.pid}`);
  hostConfigDir = await mkdtemp(join(tmpdir(), 'oscar-e2e-config-'));
  await mkdir(hostConfigDir, { recursive: true });
  node = await bootNode({
    root,
    name: uniqueNodeName('agent'),
    privateNetwork: true,
    binds: [
      { src: repoRoot, dst: REPO_IN_NODE },
      { src: nodeBin, dst: '/usr/local/bin/node' },
      { src: hostConfigDir, dst: CONFIG_DIR_IN_NODE },
    ],
  });
  await node.waitRunning();
});

afterAll(async () => {
  await node?.stop();
  if (hostConfigDir) await rm(hostConfigDir, { recursive: true, force: true });
  if (bundleRel) await rm(join(repoRoot, bundleRel), { force: true });
});

const v1: Version = { aConf: 'a=1\n', bDropIn: '[Service]\nEnvironment=B=1\n', withC: true };
const v2: Version = { ...v1, aConf: 'a=2\n', bDropIn: '[Service]\nEnvironment=B=2\n' };
const v3: Version = { ...v2, withC: false };

describe('agent on real systemd (nspawn)', () => {
  const afterV1: Record<string, Record<string, string>> = {};
  const afterV2: Record<string, Record<string, string>> = {};

  it('applies three services and their files; all run', async (ctx) => {
    if (!node) return ctx.skip(skipReason);
    const r = await agentApply(v1);
    expect(r.code, r.output).toBe(0);
    for (const u of ['a.service', 'b.service', 'c.service']) afterV1[u] = await show(u);
    expect(afterV1['a.service']).toMatchObject({
      ActiveState: 'active',
      SubState: 'running',
      UnitFileState: 'enabled',
    });
    expect(afterV1['b.service']).toMatchObject({
      ActiveState: 'active',
      SubState: 'running',
      Environment: 'B=1',
    });
    expect(afterV1['c.service']).toMatchObject({
      ActiveState: 'active',
      SubState: 'exited',
      NRestarts: '0',
    });
    expect(Number(afterV1['a.service']?.MainPID)).toBeGreaterThan(0);
    expect(await readNodeFile(node, '/etc/e2e/a.conf')).toBe('a=1\n');
    expect((await stat(node.hostPath('/etc/e2e/a.conf'))).mode & 0o7777).toBe(0o640);
    expect((await stat(node.hostPath('/etc/e2e/c.conf'))).mode & 0o7777).toBe(0o600);
    expect(await lines('/run/e2e-c-runs')).toEqual(['ran']);
    // files oscar did not write, which must survive everything below
    await node.execOk(['sh', '-c', 'echo mine > /etc/e2e/foreign.conf']);
  });

  it("a change to A's file restarts A; B's drop-in change reloads B; C is untouched", async (ctx) => {
    if (!node) return ctx.skip(skipReason);
    const r = await agentApply(v2);
    expect(r.code, r.output).toBe(0);
    for (const u of ['a.service', 'b.service', 'c.service']) afterV2[u] = await show(u);
    const [a1, a2] = [afterV1['a.service'], afterV2['a.service']];
    expect(a2?.ActiveState).toBe('active');
    expect(a2?.MainPID).not.toBe(a1?.MainPID);
    expect(a2?.InvocationID).not.toBe(a1?.InvocationID);
    expect(a2?.NRestarts).toBe('0'); // a restart by the agent, not a crash
    const [b1, b2] = [afterV1['b.service'], afterV2['b.service']];
    expect(b2?.MainPID).toBe(b1?.MainPID);
    expect(b2?.InvocationID).toBe(b1?.InvocationID);
    expect(b2?.Environment).toBe('B=2'); // daemon-reload picked up the drop-in
    expect(await lines('/run/e2e-b-reloads')).toEqual(['reload B=2']);
    const [c1, c2] = [afterV1['c.service'], afterV2['c.service']];
    expect(c2).toEqual(c1);
    expect(c2?.NRestarts).toBe('0');
    expect(await lines('/run/e2e-c-runs')).toEqual(['ran']);
    expect(await readNodeFile(node, '/etc/e2e/a.conf')).toBe('a=2\n');
  });

  it('the same config again changes nothing', async (ctx) => {
    if (!node) return ctx.skip(skipReason);
    const r = await agentApply(v2);
    expect(r.code, r.output).toBe(0);
    for (const u of ['a.service', 'b.service', 'c.service'])
      expect(await show(u)).toEqual(afterV2[u]);
  });

  it('a removed unit is stopped, disabled and its files gone; files oscar did not write stay', async (ctx) => {
    if (!node) return ctx.skip(skipReason);
    const r = await agentApply(v3);
    expect(r.code, r.output).toBe(0);
    const c = await show('c.service');
    expect(c.ActiveState).toBe('inactive');
    expect(c.LoadState).toBe('not-found');
    await expect(stat(node.hostPath('/etc/systemd/system/c.service'))).rejects.toThrow(/ENOENT/);
    await expect(
      stat(node.hostPath('/etc/systemd/system/multi-user.target.wants/c.service')),
    ).rejects.toThrow(/ENOENT/);
    await expect(stat(node.hostPath('/etc/e2e/c.conf'))).rejects.toThrow(/ENOENT/);
    expect(await readNodeFile(node, '/etc/e2e/foreign.conf')).toBe('mine\n');
    expect(await show('a.service')).toEqual(afterV2['a.service']);
    expect(await show('b.service')).toEqual(afterV2['b.service']);
  });

  it('a unit that fails to start fails the apply with its journal lines; the last good state stays; a fix converges', async (ctx) => {
    if (!node) return ctx.skip(skipReason);
    const broken = `- name: d.service\n  content: |\n    [Service]\n    Type=oneshot\n    ExecStart=/bin/sh -c 'echo d-is-broken-on-purpose; exit 3'\n    [Install]\n    WantedBy=multi-user.target\n`;
    const r = await agentApply({ ...v3, extraUnit: broken });
    expect(r.code).toBe(1);
    expect(r.output).toMatch(/start d.service failed/);
    expect(r.output).toMatch(/d-is-broken-on-purpose/); // the unit's journal, in the report
    const last = await readNodeFile(node, '/var/lib/oscar/last-applied.json');
    expect(last).not.toMatch(/d\.service/);
    const fixed = broken.replace('exit 3', 'exit 0');
    const r2 = await agentApply({ ...v3, extraUnit: fixed });
    expect(r2.code, r2.output).toBe(0);
    expect((await show('d.service')).ActiveState).toBe('inactive'); // oneshot, ran and exited 0
    expect(await readNodeFile(node, '/var/lib/oscar/last-applied.json')).toMatch(/d\.service/);
  });

  it('installs spec.packages with apt before the units that need them start; a second apply installs nothing', async (ctx) => {
    if (!node) return ctx.skip(skipReason);
    // a package of our own in a file repository inside the node: the test stays off the network
    await buildAptRepo(join(hostConfigDir, 'repo'), [
      {
        name: 'oscar-e2e-hello',
        version: '1.0',
        description: 'a package the oscar agent e2e test installs',
        files: {
          'usr/bin/oscar-e2e-hello': {
            content: "#!/bin/sh\necho 'hello from a package oscar installed'\n",
            mode: 0o755,
          },
        },
      },
    ]);
    await node.execOk([
      'sh',
      '-c',
      `rm -f /etc/apt/sources.list /etc/apt/sources.list.d/*; echo 'deb [trusted=yes] file:${CONFIG_DIR_IN_NODE}/repo ./' > /etc/apt/sources.list.d/oscar-e2e.list`,
    ]);
    const hello = `- name: hello.service\n  content: |\n    [Service]\n    Type=oneshot\n    RemainAfterExit=yes\n    ExecStart=/bin/sh -c '/usr/bin/oscar-e2e-hello > /run/e2e-hello'\n    [Install]\n    WantedBy=multi-user.target\n`;
    const withPackage = {
      ...v3,
      extraUnit: hello,
      packages: '- name: oscar-e2e-hello\n  version: "1.0"',
    };
    await writeFile(join(hostConfigDir, 'config.yaml'), osc(withPackage));
    const planned = await node.execOk([
      '/usr/local/bin/node',
      `${REPO_IN_NODE}/${bundleRel}`,
      'plan',
      '--no-diff',
      '--file',
      `${CONFIG_DIR_IN_NODE}/config.yaml`,
    ]);
    // cloud-init's order: the unit file, then the package, then the unit that needs it starts
    expect(planned.stdout).toMatch(
      /\n +\d+\. write \/etc\/systemd\/system\/hello\.service .*\n +\d+\. install oscar-e2e-hello=1\.0 — oscar-e2e-hello new\n(.*\n)* +\d+\. start hello\.service/,
    );
    const r = await agentApply(withPackage);
    expect(r.code, r.output).toBe(0);
    const status = await node.execOk([
      'dpkg-query',
      '-W',
      '-f',
      '${Status} ${Version}',
      'oscar-e2e-hello',
    ]);
    expect(status.stdout).toBe('install ok installed 1.0');
    expect((await show('hello.service')).ActiveState).toBe('active');
    expect(await lines('/run/e2e-hello')).toEqual(['hello from a package oscar installed']);
    const again = await agentApply(withPackage);
    expect(again.code, again.output).toBe(0);
    // nothing applied again (the agent's JSON records: no apply with actions)
    expect(again.output).toMatch(/"msg":"(restored from the state directory|applied)"/);
    expect(again.output).not.toMatch(/"actions":[1-9]/);
  });
});
