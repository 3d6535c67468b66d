import { afterAll, describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import {
  cloudInitSchema,
  cloudInitSchemaCli,
  ignitionValidate,
  shNoexec,
  shellcheck,
  stopValidators,
  systemPython,
  systemdAnalyzeVerify,
} from './validators.js';
import { missing, requireTool } from './tools.js';

const hasCloudInit = (): boolean =>
  (existsSync(systemPython) && existsSync('/usr/lib/python3/dist-packages/cloudinit')) ||
  missing('cloud-init python module', 'run hack/deps.sh (Debian package cloud-init)');

afterAll(() => {
  stopValidators();
});

describe('cloudInitSchema', () => {
  it('accepts a valid document and reports schema errors with the field path', async (ctx) => {
    if (!hasCloudInit()) return ctx.skip('cloud-init missing');
    expect(await cloudInitSchema('#cloud-config\nlocale: C.UTF-8\n')).toBe('');
    const bad = '#cloud-config\nwrite_files:\n- path: /etc/x\n  permissions: 420\n';
    expect(await cloudInitSchema(bad)).toContain(
      "write_files.0.permissions: 420 is not of type 'string'",
    );
  });

  it('refuses a missing header, broken YAML, a non-mapping and deprecated keys', async (ctx) => {
    if (!hasCloudInit()) return ctx.skip('cloud-init missing');
    const outputs = await Promise.all([
      cloudInitSchema('locale: C.UTF-8\n'),
      cloudInitSchema('#cloud-config\n[a\n'),
      cloudInitSchema('#cloud-config\n'),
      cloudInitSchema('#cloud-config\napt_upgrade: true\n'),
    ]);
    expect(outputs[0]).toContain('needs to begin with "#cloud-config"');
    expect(outputs[1]).toContain('is not valid yaml');
    expect(outputs[2]).toContain('not a YAML dict');
    expect(outputs[3]).toContain('apt_upgrade: DEPRECATED');
    // temp file names never leak into messages (they would make golden comparisons flaky)
    for (const o of outputs) expect(o).not.toMatch(/\/tmp\//);
  });

  it('agrees with the cloud-init CLI', async (ctx) => {
    if (!hasCloudInit()) return ctx.skip('cloud-init missing');
    const good = '#cloud-config\nruncmd:\n- [echo, hi]\n';
    const bad = '#cloud-config\nwrite_files:\n- path: /etc/x\n  owner: 5\n';
    expect(await cloudInitSchemaCli(good)).toBe('');
    expect(await cloudInitSchema(good)).toBe('');
    const [cli, fast] = await Promise.all([cloudInitSchemaCli(bad), cloudInitSchema(bad)]);
    expect(cli).toContain('write_files.0.owner');
    expect(fast).toContain('write_files.0.owner');
  });
});

describe('ignitionValidate', () => {
  it('accepts spec 3.3.0 and reports warnings that exit 0', async (ctx) => {
    if (!requireTool('ignition-validate')) return ctx.skip('ignition-validate missing');
    const ok = JSON.stringify({
      ignition: { version: '3.3.0' },
      storage: { files: [{ path: '/etc/x', mode: 420, contents: { source: 'data:,hi' } }] },
    });
    expect(await ignitionValidate(ok)).toBe('');
    const unused = JSON.stringify({ ignition: { version: '3.3.0' }, bogus: 1 });
    expect(await ignitionValidate(unused)).not.toBe('');
    expect(await ignitionValidate('{"ignition":{"version":"2.2.0"}}')).not.toBe('');
  });
});

describe('shell', () => {
  it('shellcheck finds warnings, sh -n finds syntax errors', async (ctx) => {
    if (!requireTool('shellcheck')) return ctx.skip('shellcheck missing');
    expect(await shellcheck('#!/bin/sh\nset -eu\necho "$1"\n')).toBe('');
    expect(await shellcheck('#!/bin/sh\ncd /var/lib/x\nrm -f y\n')).toContain('SC2164');
    expect(await shNoexec('#!/bin/sh\necho ok\n')).toBe('');
    expect(await shNoexec('#!/bin/sh\nif true; then\n')).not.toBe('');
  });
});

describe('systemdAnalyzeVerify', () => {
  it('passes a clean unit and reports unknown keys in units and drop-ins', async (ctx) => {
    if (!requireTool('systemd-analyze')) return ctx.skip('systemd-analyze missing');
    const unit =
      '[Unit]\nDescription=demo\n[Service]\nExecStart=/bin/sleep infinity\n[Install]\nWantedBy=multi-user.target\n';
    expect(await systemdAnalyzeVerify([{ name: 'oscar-demo.service', content: unit }])).toBe('');
    const out = await systemdAnalyzeVerify([
      {
        name: 'oscar-demo.service',
        content: unit.replace('[Install]', 'Bogus=1\n[Install]'),
        dropIns: [{ name: '10-x.conf', content: '[Service]\nAlsoBogus=2\n' }],
      },
    ]);
    expect(out).toContain("oscar-demo.service:5: Unknown key 'Bogus'");
    expect(out).toContain("oscar-demo.service.d/10-x.conf:2: Unknown key 'AlsoBogus'");
  });

  it('reports a missing ExecStart binary and rejects bad names before running', async (ctx) => {
    if (!requireTool('systemd-analyze')) return ctx.skip('systemd-analyze missing');
    const out = await systemdAnalyzeVerify([
      { name: 'oscar-nobin.service', content: '[Service]\nExecStart=/opt/oscar-none\n' },
    ]);
    expect(out).toContain('/opt/oscar-none is not executable');
    await expect(systemdAnalyzeVerify([{ name: '../x.service', content: '' }])).rejects.toThrow(
      /bad unit name/,
    );
  });
});
