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

  it.each([
    ['an option after a space', '1.0 -o'],
    ['a release', '1.0/bookworm'],
    ['a glob', '1.*'],
    ['a second pin', '1=2'],
    ['a shell word', '1;reboot'],
  ])('a version with %s ("%s") is refused in both layers (red-team round 2)', (_, version) => {
    const { osc, resolved } = bothLayers(config({ packages: [{ name: 'tar', version }] }));
    for (const errors of [osc, resolved]) {
      expect(errors).toEqual([expect.stringMatching(/^spec\.packages\[0\]\.version: must be/)]);
    }
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

describe('names that display as nothing, or that are two names at once (red-team round 2)', () => {
  const unitWithDropIn = (name: string): ResolvedUnit => ({
    name: 'kubelet.service',
    enable: true,
    mask: false,
    command: 'start',
    onChange: 'restart',
    dropIns: [{ name, content: '[Service]\nEnvironment=A=1\n' }],
    filePaths: [],
  });

  it.each([
    ['a zero-width space (shows as the file sshd reads)', '/etc/ssh/sshd_config\u200b', '200B'],
    ['a soft hyphen', '/etc/ssh/sshd\u00adconfig', '00AD'],
    ['a byte order mark', '/etc/\ufeffsudoers.d/x', 'FEFF'],
    ['a word joiner', '/etc/cron.d/a\u2060b', '2060'],
    ['a Hangul filler (drawn blank)', '/etc/a\u3164', '3164'],
    ['a variation selector', '/etc/a\ufe0fb', 'FE0F'],
    ['a line separator (breaks the line shown)', '/etc/a\u2028/etc/motd', '2028'],
    ['a paragraph separator', '/etc/a\u2029b', '2029'],
  ])('a path with %s is refused in both layers, naming the character', (_, path, code) => {
    const { osc, resolved } = bothLayers(config({ files: [file(path)] }));
    for (const errors of [osc, resolved]) {
      expect(errors).toEqual([
        expect.stringMatching(
          new RegExp(`^spec\\.files\\[0\\]\\.path: contains the character U\\+${code} .*remove it`),
        ),
      ]);
    }
  });

  it.each([
    ['a zero-width space', '10-\u200boverride.conf', '200B'],
    ['a right-to-left override', '10-\u202efnoc.x.conf', '202E'],
    ['a C1 control', '10-a\u0085.conf', '0085'],
  ])('a drop-in name with %s is refused in both layers', (_, name, code) => {
    const { osc, resolved } = bothLayers(config({ units: [unitWithDropIn(name)] }));
    for (const errors of [osc, resolved]) {
      expect(errors).toEqual([
        expect.stringMatching(
          new RegExp(
            `^spec\\.units\\[0\\]\\.dropIns\\[0\\]\\.name: drop-in name contains the character U\\+${code}`,
          ),
        ),
      ]);
    }
  });

  it('a lone surrogate (a Secret\'s JSON may spell "\\ud800"): two paths that would be one file on disk', () => {
    // Node writes U+FFFD for either half, so both would land on /etc/a\uFFFD
    expect(Buffer.from('/etc/a\ud800').equals(Buffer.from('/etc/a\udc00'))).toBe(true);
    const { osc, resolved } = bothLayers(
      config({ files: [file('/etc/a\ud800'), file('/etc/a\udc00')] }),
    );
    for (const errors of [osc, resolved]) {
      expect(errors).toEqual([
        expect.stringMatching(/^spec\.files\[0\]\.path: contains a lone UTF-16 surrogate U\+D800/),
        expect.stringMatching(/^spec\.files\[1\]\.path: contains a lone UTF-16 surrogate U\+DC00/),
      ]);
    }
  });

  it('one path in two Unicode forms: the decomposed one is refused, naming the composed spelling', () => {
    const composed = '/etc/caf\u00e9.conf';
    const decomposed = '/etc/cafe\u0301.conf';
    const { osc, resolved } = bothLayers(config({ files: [file(composed), file(decomposed)] }));
    for (const errors of [osc, resolved]) {
      expect(errors).toEqual([
        `spec.files[1].path: is not in Unicode's composed form (NFC): it would name a different file than the same text typed on Linux; write "${composed}"`,
      ]);
    }
    const dropIn = bothLayers(config({ units: [unitWithDropIn('cafe\u0301.conf')] }));
    expect(dropIn.resolved).toEqual([
      expect.stringMatching(/^spec\.units\[0\]\.dropIns\[0\]\.name: drop-in name is not in .*NFC/),
    ]);
    expect(dropIn.osc).toEqual(dropIn.resolved);
  });

  it('composed accents, CJK, emoji and a no-break space pass (they show as what they are)', () => {
    const c = config({
      files: ['/etc/caf\u00e9.conf', '/etc/設定.conf', '/etc/🙂', '/opt/a\u00a0b'].map(file),
      units: [unitWithDropIn('10-caf\u00e9.conf')],
    });
    expect(bothLayers(c)).toEqual({ osc: [], resolved: [] });
  });
});

describe('owners chown cannot give (red-team round 2)', () => {
  const owned = (user: string, group: string) => ({ ...file('/etc/app.conf'), user, group });

  it.each([
    // (uid_t)-1: chown(2) leaves the owner as it is, so the file would stay root's
    ['user 4294967295', '4294967295', '0', /the user id 4294967295 is above 4294967294/],
    ['group 4294967295', '1000', '4294967295', /the group id 4294967295 is above 4294967294/],
    ['a user id past 32 bits', '4294967296', '0', /the user id 4294967296/],
    ['twenty digits', '99999999999999999999', '1000', /the user id 99999999999999999999/],
  ])('%s is refused in both layers, naming the field', (_, user, group, message) => {
    const { osc, resolved } = bothLayers(config({ files: [owned(user, group)] }));
    for (const errors of [osc, resolved]) {
      expect(errors).toEqual([expect.stringMatching(/^spec\.files\[0\]\.owner: /)]);
      expect(errors[0]).toMatch(message);
    }
  });

  it('ids a file can have pass: 0, 65534, 4294967294, leading zeros, names', () => {
    const c = config({
      files: [
        { ...owned('0', '0'), path: '/etc/a' },
        { ...owned('65534', '65534'), path: '/etc/b' },
        { ...owned('4294967294', '4294967294'), path: '/etc/c' },
        { ...owned('0000001000', '1000'), path: '/etc/d' },
        { ...owned('nobody', 'nogroup'), path: '/etc/e' },
      ],
    });
    expect(bothLayers(c)).toEqual({ osc: [], resolved: [] });
  });
});

describe('modes that hand root to another local account (red-team round 2)', () => {
  const moded = (mode: number) => ({ ...file('/usr/local/bin/tool'), mode });

  it.each([
    ['0666', 0o666, /"0666" lets every local account write this file.*\("0664"\)/],
    ['0777', 0o777, /"0777" lets every local account write.*\("0775"\)/],
    ['0002', 0o002, /"0002" lets every local account write.*\("0000"\)/],
    ['1777', 0o1777, /"1777" lets every local account write.*\("1775"\)/],
    ['4777', 0o4777, /"4777" lets every local account write.*\("4755"\)/],
    ['4775', 0o4775, /"4775" is set-user-id or set-group-id and writable by its group.*\("4755"\)/],
    ['2770', 0o2770, /"2770" is set-user-id or set-group-id and writable by its group.*\("2750"\)/],
  ])('%s is refused in both layers, naming the field and the mode to use', (_, mode, message) => {
    const { osc, resolved } = bothLayers(config({ files: [moded(mode)] }));
    for (const errors of [osc, resolved]) {
      expect(errors).toEqual([expect.stringMatching(/^spec\.files\[0\]\.permissions: /)]);
      expect(errors[0]).toMatch(message);
    }
  });

  it('modes that keep writing to the owner and its group pass: 0644, 0664, 0775, 4755, 2755, 1755, 0600, 0000', () => {
    const modes = [0o644, 0o664, 0o775, 0o4755, 0o2755, 0o1755, 0o600, 0];
    const c = config({
      files: modes.map((mode, i) => ({ ...file(`/etc/m${String(i)}`), mode })),
    });
    expect(bothLayers(c)).toEqual({ osc: [], resolved: [] });
  });
});

describe("a unit's own text that makes the agent act on oscar's unit (red-team round 3)", () => {
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
  const service = '[Service]\nExecStart=/bin/true\n';
  /** The OSC's checks and the agent's check of a desired state (a forged reconcile Secret). */
  function refusals(c: ResolvedConfig): { osc: string[]; agent: string[] } {
    let agent: string[] = [];
    try {
      checkDesired(c, 'Secret ns/s');
    } catch (error) {
      agent = (error as InvalidConfigError).errors.map((e) => `${e.path}: ${e.message}`);
    }
    return { osc: bothLayers(c).osc, agent };
  }

  it.each([
    // systemctl enable links app.service as oscar-agent.service
    ['Alias=', 'app.service', `${service}[Install]\nAlias=oscar-agent.service\n`, 'Alias'],
    [
      'Alias= among others',
      'app.service',
      `${service}[Install]\nWantedBy=multi-user.target\nAlias=app2.service oscar-agent.service\n`,
      'Alias',
    ],
    // disabling app.service (it left the config) disables the agent too
    [
      'Also=',
      'app.service',
      `${service}[Install]\nWantedBy=multi-user.target\nAlso=oscar-agent.service\n`,
      'Also',
    ],
    // the agent's unit requires app.service: a stop or restart of it reaches the agent
    [
      'RequiredBy=',
      'app.service',
      `${service}[Install]\nRequiredBy=oscar-agent.service\n`,
      'RequiredBy',
    ],
    ['Conflicts=', 'app.service', `[Unit]\nConflicts=oscar-agent.service\n${service}`, 'Conflicts'],
    [
      'PropagatesStopTo=',
      'app.service',
      `[Unit]\nPropagatesStopTo=oscar-agent-install.service\n${service}`,
      'PropagatesStopTo',
    ],
    // specifiers of the unit's own name: %p of oscar.service is "oscar"
    [
      'Alias= through %p',
      'oscar.service',
      `${service}[Install]\nAlias=%p-agent.service\n`,
      'Alias',
    ],
    [
      'Also= through %i',
      'x@oscar-agent.service',
      `${service}[Install]\nDefaultInstance=a\nAlso=%i.service\n`,
      'Also',
    ],
  ])('%s naming oscar-agent in the content is refused in both layers', (_, name, content, key) => {
    const { osc, agent } = refusals(config({ units: [unit(name, { content })] }));
    for (const errors of [osc, agent]) {
      expect(errors).toEqual([
        expect.stringMatching(
          new RegExp(
            `^spec\\.units\\[0\\]\\.content: line \\d+: ${key}=.* names oscar-agent(-install)?\\.service, oscar's own unit: .*; remove`,
          ),
        ),
      ]);
    }
  });

  it('the same in a drop-in, naming the drop-in', () => {
    const u = unit('sshd.service', {
      dropIns: [
        { name: '10-ok.conf', content: '[Service]\nRestart=always\n' },
        { name: '20-x.conf', content: '[Unit]\nConflicts=oscar-agent.service\n' },
      ],
    });
    const { osc, agent } = refusals(config({ units: [u] }));
    for (const errors of [osc, agent]) {
      expect(errors).toEqual([
        expect.stringMatching(/^spec\.units\[0\]\.dropIns\[1\]\.content: line 2: Conflicts=/),
      ]);
    }
  });

  it("what leaves oscar's unit as it is passes: ordering, WantedBy=, PartOf=, BindsTo=, other aliases, a comment", () => {
    const content =
      '[Unit]\nAfter=oscar-agent.service\nBefore=oscar-agent.service\nPartOf=oscar-agent.service\nBindsTo=oscar-agent.service\n# Conflicts=oscar-agent.service\nConflicts=oscar-agentx.service\n' +
      `${service}[Install]\nWantedBy=oscar-agent.service multi-user.target\nAlias=app-alias.service\nAlso=other.service\n`;
    expect(refusals(config({ units: [unit('app.service', { content })] }))).toEqual({
      osc: [],
      agent: [],
    });
  });
});

describe('unit and drop-in bytes systemd reads otherwise than people do (red-team round 3)', () => {
  const unit = (content: string, dropIn?: string): ResolvedUnit => ({
    name: 'app.service',
    enable: true,
    mask: false,
    command: 'start',
    onChange: 'restart',
    dropIns: dropIn === undefined ? [] : [{ name: '10-x.conf', content: dropIn }],
    filePaths: [],
    content,
  });
  const ok = '[Service]\nExecStart=/bin/true\n';

  it.each([
    // systemd ends a line at NUL: the second setting is real, and no tool shows it as a line
    ['in the content', unit('[Unit]\nDescription=x\0ExecStartPre=/bin/sh -c id\n' + ok), 'content'],
    ['in a drop-in', unit(ok, '[Service]\nEnvironment=A=1\0\n'), 'dropIns[0].content'],
  ])('a NUL byte %s is refused in both layers, naming the line', (_, u, field) => {
    const { osc, resolved } = bothLayers(config({ units: [u] }));
    for (const errors of [osc, resolved]) {
      expect(errors).toContainEqual(
        `spec.units[0].${field}: line 2: contains a NUL byte, which systemd reads as the end of the line (what follows becomes another line that tools do not show): remove it`,
      );
    }
  });

  it('CRLF line ends, tabs, non-ASCII and a 200,000-character line pass (systemd takes lines up to 1 MiB; a unit is at most 256 KiB)', () => {
    const content = `[Unit]\r\nDescription=café\tx\r\n[Service]\nEnvironment=A=${'x'.repeat(200_000)}\nExecStart=/bin/true\n`;
    expect(
      bothLayers(config({ units: [unit(content, '[Service]\r\nRestart=always\r\n')] })),
    ).toEqual({
      osc: [],
      resolved: [],
    });
  });
});

describe('owner and mode strings other parsers read as numbers (red-team round 3)', () => {
  const owned = (user: string, group = 'root') => ({ ...file('/etc/app.conf'), user, group });

  it.each([
    ['a space before an id', ' 0'],
    ['a sign', '+5'],
    ['a negative id', '-1'],
    ['Arabic-Indic digits', '٣'],
    ['fullwidth digits', '１０'],
    ['a trailing space', 'root '],
    ['a newline', 'root\nadmin'],
    ['a third field', 'a:b:c'],
    ['a NSS compat entry', '+@admins'],
    ['an empty user', ''],
  ])('an owner with %s (%j) is refused in both layers, naming the field', (_, user) => {
    const { osc, resolved } = bothLayers(config({ files: [owned(user)] }));
    for (const errors of [osc, resolved]) {
      expect(errors).toEqual([expect.stringMatching(/^spec\.files\[0\]\.owner: /)]);
    }
  });

  it('"0x10", "1e3" and "010" pass as what chown reads: names for the first two (not 16, 1000), id 10 for the last', () => {
    const c = config({
      files: [
        { ...owned('0x10'), path: '/etc/a' },
        { ...owned('1e3'), path: '/etc/b' },
        { ...owned('010', '010'), path: '/etc/c' },
      ],
    });
    expect(bothLayers(c)).toEqual({ osc: [], resolved: [] });
  });

  it.each([
    ['"0o644"', '0o644'],
    ['"644 " (a trailing space)', '644 '],
    ['" 644"', ' 644'],
    ['"+644"', '+644'],
    ['"0x1a4"', '0x1a4'],
    ['five digits above 07777', '17777'],
    ['six digits', '000644'],
    ['"0644\\n"', '0644\n'],
    ['Arabic-Indic digits', '٠٦٤٤'],
    ['"1e3"', '1e3'],
    ['"u+rw"', 'u+rw'],
  ])('permissions %s are refused by the OSC checks, naming the field', (_, permissions) => {
    const doc = documentOf(config({ files: [file('/etc/app.conf')] })) as {
      spec: { files: Record<string, unknown>[] };
    };
    const spec = doc.spec.files[0];
    if (spec) spec.permissions = permissions;
    const errors = validateOperatingSystemConfig(doc).map((e) => `${e.path}: ${e.message}`);
    expect(errors).toEqual([expect.stringMatching(/^spec\.files\[0\]\.permissions: /)]);
  });

  it('"0644", "644", "00644" and "07777"-style modes with the safe bits pass (positive control)', () => {
    for (const permissions of ['0644', '644', '00644', '0755', '04755']) {
      const doc = documentOf(config({ files: [file('/etc/app.conf')] })) as {
        spec: { files: Record<string, unknown>[] };
      };
      const spec = doc.spec.files[0];
      if (spec) spec.permissions = permissions;
      expect(validateOperatingSystemConfig(doc)).toEqual([]);
    }
  });
});

describe('a tampered reconcile Secret past the node limits (red-team round 3)', () => {
  /** The agent's check of a desired state: its errors, or [] when it passes. */
  function agentErrors(c: ResolvedConfig): string[] {
    try {
      checkDesired(c, 'Secret ns/s');
      return [];
    } catch (error) {
      return (error as InvalidConfigError).errors.map((e) => `${e.path}: ${e.message}`);
    }
  }
  const unit = (name: string): ResolvedUnit => ({
    name,
    enable: true,
    mask: false,
    command: 'start',
    onChange: 'restart',
    dropIns: [],
    filePaths: [],
    content: '[Service]\nExecStart=/bin/true\n',
  });

  it('16,385 files, 257 units, 513 packages: each count refused by its limit', () => {
    const files = Array.from({ length: 16_385 }, (_, i) => file(`/etc/f/${String(i)}`));
    expect(agentErrors(config({ files }))).toEqual([
      expect.stringMatching(/^spec\.files: .*16384/),
    ]);
    const units = Array.from({ length: 257 }, (_, i) => unit(`u${String(i)}.service`));
    expect(agentErrors(config({ units }))).toEqual([expect.stringMatching(/^spec\.units: .*256/)]);
    const packages = Array.from({ length: 513 }, (_, i) => ({ name: `p${String(i)}` }));
    expect(agentErrors(config({ packages }))).toEqual([
      expect.stringMatching(/^spec\.packages: .*512/),
    ]);
  });

  it('one huge string: a 1 MiB path, unit name, owner or unit content is refused, naming the field', () => {
    const huge = 'a'.repeat(1024 * 1024);
    expect(agentErrors(config({ files: [file(`/etc/${huge}`)] }))).toEqual([
      expect.stringMatching(/^spec\.files\[0\]\.path: /),
    ]);
    expect(agentErrors(config({ units: [unit(`${huge}.service`)] }))).toEqual([
      expect.stringMatching(/^spec\.units\[0\]\.name: /),
    ]);
    expect(agentErrors(config({ files: [{ ...file('/etc/a'), user: huge }] }))).toEqual([
      expect.stringMatching(/^spec\.files\[0\]\.owner: /),
    ]);
    const content = `[Service]\nExecStart=/bin/true\nEnvironment=A=${huge}\n`;
    expect(agentErrors(config({ units: [{ ...unit('a.service'), content }] }))).toEqual([
      expect.stringMatching(/^spec\.units\[0\]\.content: must have at most 262144 characters/),
    ]);
  });

  it('16,384 files pass: the node limit, not one OSC’s 1,024 (positive control)', () => {
    const files = Array.from({ length: 16_384 }, (_, i) => file(`/etc/f/${String(i)}`));
    expect(agentErrors(config({ files }))).toEqual([]);
  });
});

describe("prefix drop-ins that reach oscar's unit (red-team round 3)", () => {
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
  function refusals(c: ResolvedConfig): { osc: string[]; agent: string[] } {
    let agent: string[] = [];
    try {
      checkDesired(c, 'Secret ns/s');
    } catch (error) {
      agent = (error as InvalidConfigError).errors.map((e) => `${e.path}: ${e.message}`);
    }
    return { osc: bothLayers(c).osc, agent };
  }

  // systemd reads oscar-.service.d/ for every "oscar-…" service: ExecStart= reset there stops the agent
  it.each([
    '/etc/systemd/system/oscar-.service.d/override.conf',
    '/run/systemd/system/oscar-.service.d/override.conf',
    '/etc/systemd/system/oscar-agent-.service.d/override.conf',
  ])('a file at %s is refused in both layers', (path) => {
    const { osc, agent } = refusals(config({ files: [file(path)] }));
    for (const errors of [osc, agent]) {
      expect(errors).toEqual([
        expect.stringMatching(/^spec\.files\[0\]\.path: .* belongs to oscar-agent/),
      ]);
    }
  });

  it.each(['oscar-.service', 'oscar-agent-.service'])(
    'a unit named %s (its drop-ins land in the prefix directory) is refused in both layers',
    (name) => {
      const u = unit(name, {
        dropIns: [{ name: '10-x.conf', content: '[Service]\nExecStart=\n' }],
      });
      const { osc, agent } = refusals(config({ units: [u] }));
      for (const errors of [osc, agent]) {
        expect(errors).toEqual([
          expect.stringMatching(
            new RegExp(
              `^spec\\.units\\[0\\]\\.name: ${name} is a prefix of oscar-agent.*; choose another name`,
            ),
          ),
        ]);
      }
    },
  );

  it('other prefixes, other types and look-alikes pass: oscar.service, oscar-.socket, app-.service.d, oscar-agentx.service.d', () => {
    const c = config({
      files: [
        file('/etc/systemd/system/app-.service.d/x.conf'),
        file('/etc/systemd/system/oscar-agentx.service.d/x.conf'),
        file('/etc/systemd/system/oscar.service.d/x.conf'),
      ],
      units: [
        unit('oscar.service', { dropIns: [{ name: '10-x.conf', content: '[Service]\nNice=1\n' }] }),
        unit('oscar-.socket', {
          dropIns: [{ name: '10-x.conf', content: '[Socket]\nBacklog=1\n' }],
        }),
      ],
    });
    expect(refusals(c)).toEqual({ osc: [], agent: [] });
  });
});
