/**
 * A tenant's attacks on a node through what it may write, tried as classes (issue 28/29 hardening):
 * each refusal is checked in both layers — the OSC's checks (`oscar validate`, the controller) and a
 * resolved config's (the agent, on whatever reaches it) — with a positive control beside it.
 */
import { describe, expect, it } from 'vitest';
import { documentOf } from './testing/configs.js';
import {
  AGENT_BINARY_PATH,
  AGENT_INSTALL_PATH,
  AGENT_INSTALL_UNIT,
  AGENT_UNIT,
  BOOTSTRAP_KUBECONFIG_PATH,
  CA_PATH,
} from '../controller/bootstrap/additions.js';
import { checkDesired } from '../agent/desired-check.js';
import { OSCAR_OWNED_FILES, OSCAR_OWNED_UNITS } from './oscar-owned.js';
import type { ResolvedConfig, ResolvedPackage, ResolvedUnit } from './resolved.js';
import { InvalidConfigError, validateConfig } from './validate-config.js';
import { validateOperatingSystemConfig } from './validate.js';

function config(extra: Partial<ResolvedConfig>): ResolvedConfig {
  return { type: 'ubuntu', purpose: 'reconcile', units: [], files: [], packages: [], ...extra };
}

const file = (path: string) => ({
  path,
  mode: 0o644,
  user: 'root',
  group: 'root',
  content: Buffer.from('x'),
});

/** Both layers' errors for one config: the OSC's and the resolved config's. */
function bothLayers(c: ResolvedConfig): { osc: string[]; resolved: string[] } {
  const show = (errors: readonly { path: string; message: string }[]) =>
    errors.map((e) => `${e.path}: ${e.message}`);
  return {
    osc: show(validateOperatingSystemConfig(documentOf(c))),
    resolved: show(validateConfig(c)),
  };
}

describe('package names apt-get reads as something else', () => {
  const packages = (...names: string[]): ResolvedPackage[] => names.map((name) => ({ name }));

  it.each([
    // apt-get install -y NAME- removes NAME (checked: apt-get -s install openssh-client- → Remv)
    ['a removal', 'openssh-server-'],
    ['an option', '-o'],
    ['a long option', '--allow-unauthenticated'],
    ['a version pin in the name', 'tar=1.0'],
    ['a release in the name', 'tar/bookworm'],
    ['a glob', 'ssh*'],
    ['a regular expression anchor', '^ssh'],
    ['two names', 'tar jq'],
  ])('%s ("%s") is refused, naming the field', (_, name) => {
    const { osc, resolved } = bothLayers(config({ packages: packages(name) }));
    for (const errors of [osc, resolved]) {
      expect(errors).toHaveLength(1);
      expect(errors[0]).toMatch(/^spec\.packages\[0\]\.name: must be a package name/);
    }
    expect(resolved[0]).toMatch(/apt-get reads "NAME-" as "remove NAME"/);
  });

  it('real names pass: "+" (g++), "." (python3.11), "-" inside, one character', () => {
    const c = config({ packages: packages('g++', 'libstdc++6', 'python3.11', 'kube-proxy', 'r') });
    expect(bothLayers(c)).toEqual({ osc: [], resolved: [] });
  });
});

describe("oscar's own files and units: not a config's to write, mask, stop or drop", () => {
  const unit = (name: string, extra: Partial<ResolvedUnit> = {}): ResolvedUnit => ({
    name,
    enable: true,
    mask: false,
    command: 'start',
    onChange: 'restart',
    dropIns: [],
    filePaths: [],
    ...extra,
  });
  /** The OSC's checks, and the agent's check of a desired state (a forged reconcile Secret). */
  function refusals(c: ResolvedConfig): { osc: string[]; agent: string[] } {
    let agent: string[] = [];
    try {
      checkDesired(c, 'Secret ns/s');
    } catch (error) {
      expect(error).toBeInstanceOf(InvalidConfigError);
      agent = (error as InvalidConfigError).errors.map((e) => `${e.path}: ${e.message}`);
    }
    return { osc: bothLayers(c).osc, agent };
  }

  it.each([
    '/opt/oscar/bin/oscar-agent',
    '/opt/oscar/bin/oscar-agent-install',
    '/etc/oscar/bootstrap-kubeconfig',
    '/etc/oscar/ca.crt',
    '/opt/oscar',
    '/opt/oscar/bin',
    '/etc/oscar',
    '/etc/systemd/system/oscar-agent.service',
    '/etc/systemd/system/oscar-agent.service.d/override.conf',
    '/run/systemd/system/oscar-agent.service.d/override.conf',
    '/etc/systemd/system.control/oscar-agent.service.d/50-x.conf',
    '/usr/lib/systemd/system/oscar-agent-install.service',
    '/etc/systemd/system/multi-user.target.wants/oscar-agent.service',
  ])('a file at %s', (path) => {
    const { osc, agent } = refusals(config({ files: [file(path)] }));
    for (const errors of [osc, agent]) {
      expect(errors).toEqual([expect.stringMatching(/^spec\.files\[0\]\.path: .*oscar/)]);
    }
  });

  it.each([
    ['stopped', unit('oscar-agent.service', { command: 'stop' })],
    ['masked', unit('oscar-agent.service', { mask: true, enable: false })],
    ['rewritten', unit('oscar-agent.service', { content: '[Service]\nExecStart=/bin/true\n' })],
    [
      'given a drop-in',
      unit('oscar-agent.service', {
        dropIns: [{ name: '10-x.conf', content: '[Service]\nEnvironment=A=1\n' }],
      }),
    ],
    ['its installer disabled', unit('oscar-agent-install.service', { enable: false })],
  ])('oscar-agent.service %s', (_, u) => {
    const { osc, agent } = refusals(config({ units: [u] }));
    for (const errors of [osc, agent]) {
      expect(errors).toEqual([
        expect.stringMatching(/^spec\.units\[0\]\.name: .* is oscar's own unit/),
      ]);
    }
  });

  it('what only looks alike passes: /etc/oscar/node.env (the examples), other units and names', () => {
    const c = config({
      files: [
        file('/etc/oscar/node.env'),
        file('/opt/oscar/bin/helper'),
        file('/opt/oscar-agent'),
        file('/etc/systemd/system/oscar-agent.service.bak/x'),
      ],
      units: [unit('oscar-agentx.service'), unit('oscar-agent@x.service'), unit('sshd.service')],
    });
    expect(refusals(c)).toEqual({ osc: [], agent: [] });
  });

  it('the sets name exactly what the bootstrap additions write', () => {
    expect([...OSCAR_OWNED_FILES].sort()).toEqual(
      [CA_PATH, BOOTSTRAP_KUBECONFIG_PATH, AGENT_INSTALL_PATH, AGENT_BINARY_PATH].sort(),
    );
    expect([...OSCAR_OWNED_UNITS].sort()).toEqual([AGENT_INSTALL_UNIT, AGENT_UNIT].sort());
  });
});

describe('paths that display as something they are not', () => {
  it.each([
    ['a carriage return (overwrites the line shown)', '/etc/cron.d/job\r/etc/motd'],
    ['a backspace', '/etc/ab\b'],
    ['an escape sequence', '/etc/\u001b[2Jx'],
    ['DEL', '/etc/a\u007f'],
    ['a C1 control', '/etc/a\u0085b'],
    ['a right-to-left override ("Trojan source")', '/etc/\u202egnp.sh'],
    ['a left-to-right isolate', '/etc/a\u2066b'],
    ['a right-to-left mark', '/etc/a\u200fb'],
  ])('%s is refused in both layers, naming the character', (_, path) => {
    const { osc, resolved } = bothLayers(config({ files: [file(path)] }));
    for (const errors of [osc, resolved]) {
      expect(errors).toEqual([
        expect.stringMatching(/^spec\.files\[0\]\.path: contains the character U\+[0-9A-F]{4}/),
      ]);
    }
  });

  it('what is merely unusual passes: spaces, accents, CJK, a look-alike hyphen, emoji, a tab or newline (shown as they are, quoted everywhere)', () => {
    const c = config({
      files: [
        '/opt/odd dir/ü.txt',
        '/etc/設定.conf',
        '/etc/oscar\u2010agent',
        '/etc/🙂',
        '/etc/a\tb',
        '/etc/a\nb',
      ].map(file),
    });
    expect(bothLayers(c)).toEqual({ osc: [], resolved: [] });
  });
});
