// The example external renderer (examples/renderer, an OS oscar does not ship: Alpine), run as
// a separate process and called through oscar's HTTP client: its script passes sh -n and
// shellcheck, and running it writes exactly the declared bytes, modes and owners; what it cannot
// render comes back as a structured error naming the field.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ResolvedConfig } from '../../api/resolved.js';
import type { RenderContext } from '../../renderers/types.js';
import { RendererError, WebhookRenderer } from '../../renderers/webhook/client.js';
import { requireTool } from '../support/tools.js';
import { shellcheck, shNoexec } from '../support/validators.js';
import { startExampleRenderer, type RendererProcess } from './support/webhook.js';

const run = promisify(execFile);
let example: RendererProcess;
let alpine: WebhookRenderer;

beforeAll(async () => {
  example = await startExampleRenderer();
  alpine = new WebhookRenderer({
    url: example.url,
    types: ['alpine'],
    formats: ['script'],
    retries: 0,
  });
});
afterAll(async () => {
  alpine.close();
  await example.stop();
});

const context: RenderContext = {
  name: 'edge',
  namespace: 'prod',
  purpose: 'provision',
  format: 'script',
};

function configWith(root: string, extra: Partial<ResolvedConfig> = {}): ResolvedConfig {
  return {
    type: 'alpine',
    purpose: 'provision',
    units: [],
    files: [
      {
        path: `${root}/etc/motd`,
        mode: 0o644,
        user: 'root',
        group: 'root',
        content: Buffer.from('welcome\n'),
      },
      {
        path: `${root}/etc/it's a dir/key`,
        mode: 0o600,
        user: '0',
        group: '0',
        content: Buffer.from([0, 0xff, 10, 39, 13]),
      },
    ],
    packages: [],
    ...extra,
  };
}

describe('the example Alpine renderer (examples/renderer/server.mjs)', () => {
  it('renders a script that sh -n and shellcheck accept, and that writes exactly the declared files', async (ctx) => {
    const root = await mkdtemp(join(tmpdir(), 'oscar-alpine-'));
    try {
      const config = configWith(root);
      const result = await alpine.render(config, context);
      expect(result.format).toBe('script');
      const script = result.userData.toString('utf8');
      expect(script.startsWith('#!/bin/sh\n')).toBe(true);
      expect(script).toContain('OperatingSystemConfig prod/edge (provision)');
      expect(await shNoexec(script)).toBe('');
      if (requireTool('shellcheck', 'run hack/deps.sh')) expect(await shellcheck(script)).toBe('');
      if (process.getuid?.() !== 0) {
        ctx.skip('running the script needs root (chown root:root)');
        return;
      }
      await run('sh', ['-c', script]);
      for (const f of config.files) {
        expect((await readFile(f.path)).equals(f.content), f.path).toBe(true);
        const st = await stat(f.path);
        expect(st.mode & 0o7777, f.path).toBe(f.mode);
        expect(st.uid).toBe(0);
      }
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });

  it('installs packages with apk', async () => {
    const result = await alpine.render(
      configWith('/srv', { packages: [{ name: 'chrony' }, { name: 'curl', version: '8.5.0-r0' }] }),
      context,
    );
    expect(result.userData.toString()).toContain("apk add --no-cache 'chrony' 'curl=8.5.0-r0'");
  });

  it('refuses systemd units and other formats with structured errors naming the field', async () => {
    const unit = {
      name: 'kubelet.service',
      enable: true,
      mask: false,
      command: 'start' as const,
      onChange: 'restart' as const,
      content: '[Service]\nExecStart=/bin/true\n',
      dropIns: [],
      filePaths: [],
    };
    const refusal = await alpine
      .render(configWith('/srv', { units: [unit] }), context)
      .catch((e: unknown) => e);
    expect(refusal).toBeInstanceOf(RendererError);
    const e = refusal as RendererError;
    expect(e).toMatchObject({ source: 'renderer', code: 'Unsupported', field: 'spec.units[0]' });
    expect(e.detail).toContain('Alpine runs OpenRC, not systemd: cannot install kubelet.service');

    const cloud = new WebhookRenderer({
      url: example.url,
      types: ['alpine'],
      formats: ['cloud-config'],
      retries: 0,
    });
    try {
      const f = await cloud
        .render(configWith('/srv'), { ...context, format: 'cloud-config' })
        .catch((x: unknown) => x);
      expect(f).toMatchObject({ code: 'UnsupportedFormat', field: 'spec.format' });
    } finally {
      cloud.close();
    }
  });
});
