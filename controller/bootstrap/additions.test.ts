// The bootstrap additions rendered in every format: accepted by the real validators, decoded back
// to exactly the files and units they declare, and within the user-data budget.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import type { Format, OperatingSystemConfigSpec } from '../../api/schema.js';
import { decode } from '../../renderers/formats.js';
import { defaultRegistry } from '../../renderers/registry.js';
import { missing, repoRoot, requireTool } from '../../test/support/tools.js';
import {
  cloudInitSchema,
  ignitionValidate,
  shellcheck,
  shNoexec,
  stopValidators,
  systemPython,
} from '../../test/support/validators.js';
import { existsSync } from 'node:fs';
import {
  agentInstallScript,
  AGENT_BINARY_PATH,
  AGENT_INSTALL_PATH,
  AGENT_UNIT,
  CA_PATH,
  BOOTSTRAP_KUBECONFIG_PATH,
  bootstrapAdditions,
  type BootstrapInputs,
} from './additions.js';
import { renderMachine } from './render.js';
import { sampleBootstrapInputs, userDataSizes } from './sizes.js';

afterAll(() => {
  stopValidators();
});

const registry = defaultRegistry();

async function exampleSpec(): Promise<OperatingSystemConfigSpec> {
  const doc = parse(
    await readFile(join(repoRoot, 'examples', 'ubuntu-provision.yaml'), 'utf8'),
  ) as {
    spec: OperatingSystemConfigSpec;
  };
  return doc.spec;
}

async function render(
  type: string,
  format: Format,
  inputs: BootstrapInputs = sampleBootstrapInputs(),
) {
  const spec = { ...(await exampleSpec()), type };
  if (type === 'flatcar') delete spec.packages;
  const r = await renderMachine(registry, {
    provision: { name: 'worker-provision', namespace: 'default', spec },
    refs: { secrets: new Map(), configMaps: new Map() },
    placeholders: { machine: inputs.machine, values: {} },
    bootstrap: inputs,
    format,
  });
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.userData;
}

const cases: [string, Format][] = [
  ['ubuntu', 'cloud-config'],
  ['flatcar', 'ignition'],
  ['generic', 'script'],
];

describe('bootstrap additions', () => {
  for (const [type, format] of cases) {
    it(`${format}: the machine's user data carries the additions exactly (decoded back)`, async () => {
      const inputs = sampleBootstrapInputs();
      const decoded = decode(format, await render(type, format, inputs));
      const byPath = new Map(decoded.files.map((f) => [f.path, f]));
      expect(byPath.get(CA_PATH)?.content.toString()).toBe(inputs.apiServer.caPem);
      const install = byPath.get(AGENT_INSTALL_PATH);
      expect(install?.mode).toBe(0o755);
      expect(install?.content.toString()).toContain(`\nurl=${inputs.agent.url}\n`);
      expect(install?.content.toString()).toContain(`\nsum=${inputs.agent.sha256}\n`);
      const agentUnit = byPath.get(`/etc/systemd/system/${AGENT_UNIT}`)?.content.toString();
      // grant mode: the rollout controller paces the node's changes (docs/identity.md)
      expect(agentUnit).toContain(
        `\nExecStart=${AGENT_BINARY_PATH} agent --bootstrap-kubeconfig ${BOOTSTRAP_KUBECONFIG_PATH} --namespace ${inputs.machine.namespace} --osc ${inputs.reconcileOsc} --node ${inputs.machine.name} --config-uid ${inputs.configUid}\n`,
      );
      expect(agentUnit).not.toContain('--secret');
      // its memory limit: the agent's bomb test keeps its peak RSS under it
      expect(agentUnit).toContain('\nMemoryMax=512M\n');
      // glibc's malloc: one arena, large blocks mapped apart (docs/performance.md)
      expect(agentUnit).toContain(
        '\nEnvironment=MALLOC_ARENA_MAX=1 MALLOC_MMAP_THRESHOLD_=32768\n',
      );
      const kubeconfig = byPath.get(BOOTSTRAP_KUBECONFIG_PATH);
      expect(kubeconfig?.mode).toBe(0o600);
      const kc = parse(kubeconfig?.content.toString() ?? '') as {
        clusters: { cluster: { server: string; 'certificate-authority': string } }[];
        users: { user: { token: string } }[];
      };
      expect(kc.clusters[0]?.cluster.server).toBe(inputs.apiServer.url);
      expect(kc.clusters[0]?.cluster['certificate-authority']).toBe(CA_PATH);
      expect(kc.users[0]?.user.token).toBe(`${inputs.token.id}.${inputs.token.secret}`);
      expect(decoded.enable).toEqual(
        expect.arrayContaining([AGENT_UNIT, 'oscar-agent-install.service']),
      );
      expect(byPath.get('/etc/oscar/node.env')).toBeDefined(); // the provision OSC's own file
    });
  }

  it('cloud-config with the additions passes cloud-init schema', async (ctx) => {
    const ok =
      (existsSync(systemPython) && existsSync('/usr/lib/python3/dist-packages/cloudinit')) ||
      missing('cloud-init python module', 'run hack/deps.sh (Debian package cloud-init)');
    if (!ok) return ctx.skip('cloud-init missing');
    expect(await cloudInitSchema((await render('ubuntu', 'cloud-config')).toString())).toBe('');
  });

  it('Ignition with the additions passes ignition-validate', async (ctx) => {
    if (!requireTool('ignition-validate')) return ctx.skip('ignition-validate missing');
    expect(await ignitionValidate((await render('flatcar', 'ignition')).toString())).toBe('');
  });

  it('the script with the additions, and the install script itself, pass sh -n and shellcheck', async (ctx) => {
    if (!requireTool('shellcheck')) return ctx.skip('shellcheck missing');
    const script = (await render('generic', 'script')).toString();
    expect(await shNoexec(script)).toBe('');
    expect(await shellcheck(script)).toBe('');
    const install = agentInstallScript('https://example.com/a', 'e'.repeat(64));
    expect(await shNoexec(install)).toBe('');
    expect(await shellcheck(install)).toBe('');
  });

  // 4.5 KiB since cloud-config's private-files guard (renderers/private-files.ts, ~360 B) joined
  it('fit the budget: the provision example with the additions ≤ 16 KiB, the additions alone ≤ 4.5 KiB, in every format', async () => {
    for (const s of await userDataSizes(registry)) {
      expect(s.withAdditions, `${s.format} example + additions`).toBeLessThanOrEqual(16 * 1024);
      expect(s.additions, `${s.format} additions`).toBeLessThanOrEqual(4.5 * 1024);
    }
  });

  it('refuse values that would need quoting, a bad sha256 or a non-PEM CA, naming each', () => {
    const bad = sampleBootstrapInputs();
    bad.agent = { url: 'ftp://x/y z', sha256: 'ABC' };
    bad.apiServer = { url: 'https://h:6443', caPem: 'not a cert' };
    bad.reconcileOsc = 'a;rm -rf /';
    const r = bootstrapAdditions(bad);
    expect('errors' in r && r.errors.map((e) => e.path).sort()).toEqual([
      'agent.sha256',
      'agent.url',
      'agent.url',
      'apiServer.caPem',
      'reconcileOsc',
    ]);
  });

  it("a provision OSC that declares one of oscar's own paths or units is refused, not overwritten", async () => {
    const spec = await exampleSpec();
    spec.files = [
      ...(spec.files ?? []),
      { path: BOOTSTRAP_KUBECONFIG_PATH, content: { inline: { data: 'mine' } } },
    ];
    const inputs = sampleBootstrapInputs();
    const r = await renderMachine(registry, {
      provision: { name: 'p', namespace: 'default', spec },
      refs: { secrets: new Map(), configMaps: new Map() },
      placeholders: { machine: inputs.machine },
      bootstrap: inputs,
    });
    // refused by the OSC's own checks already (api/oscar-owned.ts), before any machine's additions
    expect(r.ok).toBe(false);
    expect(!r.ok && r.stage).toBe('validate');
    expect(!r.ok && r.errors[0]?.message).toMatch(/written by oscar's bootstrap/);
  });
});
