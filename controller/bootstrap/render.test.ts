import { describe, expect, it } from 'vitest';
import { NO_REFERENCES } from '../../api/resolve.js';
import type { ResolvedConfig } from '../../api/resolved.js';
import { RendererRegistry } from '../../renderers/registry.js';
import { renderMachine } from './render.js';

const TOKEN = 'abcdef.0123456789abcdef';

/** A renderer that echoes every file it was sent: in its error, or in its warnings. */
function echoing(where: 'error' | 'warning') {
  const echo = (config: ResolvedConfig) =>
    config.files.map((f) => `${f.path}: ${f.content.toString()}`).join('; ');
  return new RendererRegistry().register({
    types: ['acme'],
    formats: ['script'],
    render: (config: ResolvedConfig) =>
      where === 'error'
        ? Promise.reject(new Error(`cannot render ${echo(config)}`))
        : Promise.resolve({
            userData: Buffer.from('#!/bin/sh\n'),
            format: 'script' as const,
            extraUnits: [],
            extraFiles: [],
            warnings: [echo(config)],
          }),
  });
}

const input = {
  provision: {
    name: 'prov',
    namespace: 'ns',
    spec: {
      type: 'acme',
      purpose: 'provision' as const,
      files: [
        {
          path: '/etc/kubeadm-join.yaml',
          permissions: '0600',
          content: { inline: { data: 'token: {{ bootstrap.token }}\n' } },
        },
        { path: '/etc/motd', content: { inline: { data: 'machine {{ machine.name }}\n' } } },
      ],
    },
  },
  refs: NO_REFERENCES,
  placeholders: { machine: { name: 'm1', namespace: 'ns' }, bootstrap: { token: TOKEN } },
};

describe("a renderer echoing the machine's token (red-team round 3)", () => {
  it('its error reaches no message with the token; the rest of what it said stays', async () => {
    const error = await renderMachine(echoing('error'), input).then(
      () => new Error('rendered'),
      (e: unknown) => e as Error,
    );
    expect(error.message).not.toContain(TOKEN);
    expect(error.message).not.toContain('0123456789abcdef');
    expect(error.message).toContain('[redacted');
    expect(error.message).toContain('machine m1'); // positive control: not a secret
  });

  it('nor do its warnings', async () => {
    const out = await renderMachine(echoing('warning'), input);
    expect(out.ok).toBe(true);
    const warnings = out.ok ? out.warnings.join('\n') : '';
    expect(warnings).not.toContain('0123456789abcdef');
    expect(warnings).toContain('machine m1');
  });
});
