// The order of a real install, on real systemd (nspawn), through the agent and through the rendered
// script: an OperatingSystemConfig that declares a vendor's apt repository (a sources-list file and
// its keyring, the usual way to install kubelet and kubeadm) and a package from it, a file owned by
// the user that package's postinst creates, a unit that runs the package's binary, and a template
// unit with a declared instance. Files must be written before the install (or apt cannot find the
// package) and the package's user's file after it (or the user does not exist yet); the template is
// never started, its instance is, and a change to the template restarts the instance.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadDocuments } from '../../api/load.js';
import { defaultRegistry, renderDocument } from '../../renderers/registry.js';
import { bootNode, uniqueNodeName, type Node } from '../support/nspawn.js';
import { findTool, missing, nodeRoot, repoRoot, requireTools } from '../support/tools.js';
import { bundleCli } from '../support/bundle.js';
import { buildAptRepo } from './apt-repo.js';

const REPO_IN_NODE = '/opt/oscar';
const CONFIG_IN_NODE = '/etc/oscar-e2e';
const APT_REPO_IN_NODE = '/srv/oscar-e2e-repo';

let skipReason: string | undefined;
let work: string;
let bundleRel: string;
let nodeBin: string;
let keyring: Buffer;

const workerTemplate = (greeting: string): string => `[Unit]
Description=worker %i
[Service]
Environment=GREETING=${greeting}
ExecStart=/bin/sh -c 'echo "$GREETING %i" >> /run/e2e-worker; exec sleep infinity'
[Install]
WantedBy=multi-user.target
`;

function indent(text: string, n: number): string {
  return text
    .split('\n')
    .map((l) => (l === '' ? '' : ' '.repeat(n) + l))
    .join('\n');
}

/** The OSC under test; `greeting` changes the template unit, `workers` false drops it. */
function osc(greeting: string, workers = true): string {
  const sources = `deb [signed-by=/etc/apt/keyrings/oscar-e2e.gpg] file:${APT_REPO_IN_NODE} ./\n`;
  const units = [
    `- name: app.service\n  content: |\n${indent(`[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/sh -c '/usr/bin/oscar-e2e-app > /run/e2e-app'\n[Install]\nWantedBy=multi-user.target\n`, 4)}`,
    ...(workers
      ? [
          `- name: worker@.service\n  content: |\n${indent(workerTemplate(greeting), 4)}`,
          '- name: worker@one.service',
        ]
      : []),
  ];
  return `apiVersion: oscar.dev/v1alpha1
kind: OperatingSystemConfig
metadata:
  name: install-order
  namespace: default
spec:
  type: debian
  purpose: reconcile
  packages:
    - name: oscar-e2e-app
      version: "1.0"
  files:
    - path: /etc/apt/keyrings/oscar-e2e.gpg
      content:
        inline:
          encoding: b64
          data: ${keyring.toString('base64')}
    - path: /etc/apt/sources.list.d/oscar-e2e.list
      content:
        inline:
          data: ${JSON.stringify(sources)}
    - path: /etc/oscar-e2e-app/owned.conf
      owner: oscar-e2e:oscar-e2e
      permissions: '0640'
      content:
        inline:
          data: "owned by the package's user\\n"
  units:
${indent(units.join('\n'), 4)}
`;
}

beforeAll(async () => {
  if (!requireTools(['systemd-nspawn', 'nsenter', 'pgrep', 'dpkg-deb', 'gpg'])) {
    skipReason = 'systemd-nspawn/nsenter/pgrep/dpkg-deb/gpg missing (run hack/deps.sh)';
    return;
  }
  if (process.getuid?.() !== 0) {
    missing('root', 'booting a node needs root');
    skipReason = 'not root';
    return;
  }
  const bin = findTool('node');
  if (!bin) throw new Error('node is not on PATH');
  nodeBin = bin;
  work = await mkdtemp(join(tmpdir(), 'oscar-e2e-order-'));
  // a package whose postinst creates its own system user, as daemons' packages do
  ({ keyring = Buffer.alloc(0) } = await buildAptRepo(
    join(work, 'repo'),
    [
      {
        name: 'oscar-e2e-app',
        version: '1.0',
        description: 'a package the oscar install-order e2e test installs',
        files: {
          'usr/bin/oscar-e2e-app': {
            content: "#!/bin/sh\necho 'app from a package oscar installed'\n",
            mode: 0o755,
          },
        },
        postinst:
          '#!/bin/sh\nset -e\ngetent passwd oscar-e2e >/dev/null || useradd --system --no-create-home --shell /usr/sbin/nologin oscar-e2e\n',
      },
    ],
    { sign: true },
  ));
  bundleRel = await bundleCli(`oscar-order-${process.pid}`);
}, 120_000);

afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
  if (bundleRel) await rm(join(repoRoot, bundleRel), { force: true });
});

/** A fresh node with the repository, this checkout, node and a config directory bound in. */
async function freshNode(name: string, configDir: string): Promise<Node> {
  const root = nodeRoot();
  if (root === undefined) throw new Error('no node root');
  const node = await bootNode({
    root,
    name: uniqueNodeName(name),
    privateNetwork: true,
    disableCloudInit: true,
    binds: [
      { src: repoRoot, dst: REPO_IN_NODE },
      { src: nodeBin, dst: '/usr/local/bin/node' },
      { src: configDir, dst: CONFIG_IN_NODE },
      { src: join(work, 'repo'), dst: APT_REPO_IN_NODE },
    ],
  });
  await node.waitRunning();
  // the image's own Debian mirror is unreachable here (no network): only the declared source
  await node.execOk(['sh', '-c', 'rm -f /etc/apt/sources.list /etc/apt/sources.list.d/*']);
  return node;
}

/** What both paths must leave on the node. */
async function expectInstalled(node: Node): Promise<void> {
  const status = await node.execOk([
    'dpkg-query',
    '-W',
    '-f',
    '${Status} ${Version}',
    'oscar-e2e-app',
  ]);
  expect(status.stdout).toBe('install ok installed 1.0');
  const owned = await node.execOk(['stat', '-c', '%U:%G %a', '/etc/oscar-e2e-app/owned.conf']);
  expect(owned.stdout.trim()).toBe('oscar-e2e:oscar-e2e 640');
  expect((await node.show('app.service', ['ActiveState'])).ActiveState).toBe('active');
  expect((await node.execOk(['cat', '/run/e2e-app'])).stdout).toBe(
    'app from a package oscar installed\n',
  );
  expect(await node.show('worker@one.service', ['ActiveState', 'UnitFileState'])).toEqual({
    ActiveState: 'active',
    UnitFileState: 'enabled',
  });
  expect((await node.execOk(['cat', '/run/e2e-worker'])).stdout).toBe('hello one\n');
}

describe('install order on real systemd: an apt source declared with the package it serves', () => {
  it("through the agent: files, install, the package user's file, units; templates never started; a template change restarts its instance", async (ctx) => {
    if (skipReason) return ctx.skip(skipReason);
    const configDir = join(work, 'agent');
    await mkdir(configDir);
    const node = await freshNode('order-agent', configDir);
    try {
      const agent = async (text: string): Promise<{ code: number | null; output: string }> => {
        await writeFile(join(configDir, 'config.yaml'), text);
        const r = await node.exec(
          [
            '/usr/local/bin/node',
            `${REPO_IN_NODE}/${bundleRel}`,
            'agent',
            '--file',
            `${CONFIG_IN_NODE}/config.yaml`,
            '--once',
          ],
          { timeoutMs: 240_000 },
        );
        return { code: r.code, output: r.stdout + r.stderr };
      };
      await writeFile(join(configDir, 'config.yaml'), osc('hello'));
      const planned = await node.execOk([
        '/usr/local/bin/node',
        `${REPO_IN_NODE}/${bundleRel}`,
        'plan',
        '--file',
        `${CONFIG_IN_NODE}/config.yaml`,
      ]);
      const line = (pattern: RegExp): number => {
        const m = pattern.exec(planned.stdout);
        expect(m, `${String(pattern)} in\n${planned.stdout}`).not.toBeNull();
        return Number(m?.[1]);
      };
      const keyringAt = line(/ +(\d+)\. write \/etc\/apt\/keyrings\/oscar-e2e\.gpg/);
      const sourcesAt = line(/ +(\d+)\. write \/etc\/apt\/sources\.list\.d\/oscar-e2e\.list/);
      const installAt = line(/ +(\d+)\. install oscar-e2e-app=1\.0/);
      const ownedAt = line(/ +(\d+)\. write \/etc\/oscar-e2e-app\/owned\.conf/);
      const startAt = line(/ +(\d+)\. start app\.service/);
      expect(keyringAt).toBeLessThan(installAt);
      expect(sourcesAt).toBeLessThan(installAt);
      expect(installAt).toBeLessThan(ownedAt);
      expect(ownedAt).toBeLessThan(startAt);
      expect(planned.stdout).not.toMatch(/(enable|start|restart) worker@\.service/);

      const first = await agent(osc('hello'));
      expect(first.code, first.output).toBe(0);
      await expectInstalled(node);
      const before = await node.show('worker@one.service', ['MainPID', 'InvocationID']);

      // the template changes: its declared instance restarts, the apply succeeds
      const changed = await agent(osc('hi'));
      expect(changed.code, changed.output).toBe(0);
      expect(changed.output).toMatch(/restart worker@one\.service/);
      const after = await node.show('worker@one.service', [
        'MainPID',
        'InvocationID',
        'ActiveState',
      ]);
      expect(after.ActiveState).toBe('active');
      expect(after.InvocationID).not.toBe(before.InvocationID);
      expect((await node.execOk(['cat', '/run/e2e-worker'])).stdout).toBe('hello one\nhi one\n');

      // template and instance leave the config: the instance stops, the template file goes
      const gone = await agent(osc('hi', false));
      expect(gone.code, gone.output).toBe(0);
      expect((await node.show('worker@one.service', ['ActiveState'])).ActiveState).toBe('inactive');
      expect((await node.exec(['test', '-e', '/etc/systemd/system/worker@.service'])).code).toBe(1);
      // and nothing is left to do
      const again = await agent(osc('hi', false));
      expect(again.code, again.output).toBe(0);
      expect(again.output).not.toMatch(/[1-9]\d* action\(s\)/);
    } finally {
      await node.stop();
    }
  });

  it('through the rendered script: the same order, the same result', async (ctx) => {
    if (skipReason) return ctx.skip(skipReason);
    const configDir = join(work, 'script');
    await mkdir(configDir);
    const doc = loadDocuments(osc('hello'))[0]?.value;
    const rendered = await renderDocument(defaultRegistry(), doc, undefined, { format: 'script' });
    if (!rendered.ok) throw new Error(JSON.stringify(rendered.errors));
    await writeFile(join(configDir, 'render.sh'), rendered.result.userData);
    const node = await freshNode('order-script', configDir);
    try {
      const r = await node.exec(['sh', `${CONFIG_IN_NODE}/render.sh`], { timeoutMs: 240_000 });
      expect(r.code, r.stdout + r.stderr).toBe(0);
      await expectInstalled(node);
    } finally {
      await node.stop();
    }
  });
});
