// Red-team round 3, "external renderer output": what a compromised or buggy renderer (a webhook,
// or any renderer a provider registers) answers is checked as strictly as a tenant's OSC before
// anything of it reaches a Secret. A stand-in renderer answers what each case says.
import { describe, expect, it } from 'vitest';
import type { ResolvedConfig, ResolvedFile, ResolvedUnit } from '../../api/resolved.js';
import { RendererRegistry } from '../../renderers/registry.js';
import type { Format } from '../../api/constants.js';
import type { RenderContext, RenderResult } from '../../renderers/types.js';
import { registryPipeline } from './pipeline.js';

const config: ResolvedConfig = {
  type: 'acme',
  purpose: 'reconcile',
  units: [],
  files: [
    { path: '/etc/motd', mode: 0o644, user: 'root', group: 'root', content: Buffer.from('hi\n') },
  ],
  packages: [],
};

function file(path: string, mode = 0o644): ResolvedFile {
  return { path, mode, user: 'root', group: 'root', content: Buffer.from('x') };
}

function unit(name: string, over: Partial<ResolvedUnit> = {}): ResolvedUnit {
  return {
    name,
    enable: true,
    mask: false,
    command: 'start',
    onChange: 'restart',
    dropIns: [],
    filePaths: [],
    content: '[Service]\nExecStart=/bin/true\n',
    ...over,
  };
}

/** A pipeline whose one renderer (type acme) answers `answer` for every request. */
function hostile(answer: Partial<RenderResult> & { format?: Format }) {
  const registry = new RendererRegistry().register({
    types: ['acme'],
    formats: ['script'],
    render: (_: ResolvedConfig, context: RenderContext) =>
      Promise.resolve({
        userData: Buffer.from('#!/bin/sh\n'),
        format: context.format,
        extraUnits: [],
        extraFiles: [],
        warnings: [],
        ...answer,
      }),
  });
  return registryPipeline(registry).render(config, { name: 'a', namespace: 'ns' });
}

describe('renderer output is checked like tenant input (red-team round 3)', () => {
  it('positive control: a renderer adding an ordinary file and unit is taken', async () => {
    const out = await hostile({
      extraFiles: [file('/etc/acme-release')],
      extraUnits: [unit('acme.service')],
    });
    expect(out.expanded.files.map((f) => f.path)).toEqual(['/etc/acme-release', '/etc/motd']);
  });

  it.each([
    [
      "oscar's own executable",
      { extraFiles: [file('/opt/oscar/bin/oscar-agent')] },
      'file "/opt/oscar/bin/oscar-agent"',
    ],
    [
      'the bootstrap kubeconfig',
      { extraFiles: [file('/etc/oscar/bootstrap-kubeconfig')] },
      'file "/etc/oscar/bootstrap-kubeconfig"',
    ],
    [
      'the agent state directory',
      { extraFiles: [file('/var/lib/oscar/state.json')] },
      'file "/var/lib/oscar/state.json"',
    ],
    ['a path with ..', { extraFiles: [file('/etc/../etc/shadow')] }, 'file "/etc/../etc/shadow"'],
    ['a relative path', { extraFiles: [file('etc/passwd')] }, 'file "etc/passwd"'],
    [
      'a world-writable file',
      { extraFiles: [file('/etc/acme.conf', 0o666)] },
      'file "/etc/acme.conf"',
    ],
    [
      'a unit named oscar-agent.service (masking the agent)',
      { extraUnits: [unit('oscar-agent.service', { mask: true, enable: false, content: '' })] },
      'unit "oscar-agent.service"',
    ],
    [
      'a drop-in for the agent',
      {
        extraUnits: [
          unit('oscar-agent.service', {
            content: '',
            dropIns: [{ name: 'x.conf', content: '[Service]\nExecStart=\n' }],
          }),
        ],
      },
      'unit "oscar-agent.service"',
    ],
    [
      'a unit name with a slash',
      { extraUnits: [unit('../evil.service')] },
      'unit "../evil.service"',
    ],
  ])('refuses %s, naming it', async (_, answer, named) => {
    await expect(hostile(answer)).rejects.toThrow(
      new RegExp(
        `the renderer for type "acme" added what oscar cannot apply: .*${named.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}`,
      ),
    );
  });

  it('refuses an answer in another format than the one asked', async () => {
    await expect(hostile({ format: 'cloud-config' })).rejects.toThrow(/format/);
  });
});
