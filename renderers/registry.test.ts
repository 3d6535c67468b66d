import { describe, expect, it } from 'vitest';
import { ValidationError } from '../api/field-error.js';
import type { ResolvedConfig } from '../api/resolved.js';
import { defaultRegistry, RendererRegistry, renderDocument, renderOsc } from './registry.js';
import type { RenderContext, Renderer, RenderResult } from './types.js';

const base: ResolvedConfig = {
  type: 'ubuntu',
  purpose: 'reconcile',
  units: [],
  files: [
    { path: '/etc/motd', mode: 0o644, user: 'root', group: 'root', content: Buffer.from('hi\n') },
  ],
  packages: [],
};

const opts = { name: 'n', namespace: 'ns' };

async function errorsOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(ValidationError);
    return (e as Error).message;
  }
  throw new Error('expected a ValidationError');
}

describe('RendererRegistry', () => {
  it('has the built-in types', () => {
    expect(defaultRegistry().types()).toEqual([
      'debian',
      'flatcar',
      'generic',
      'opensuse',
      'ubuntu',
    ]);
  });

  it('lets a provider add a type by registering a renderer, which renderOsc then uses', async () => {
    const seen: RenderContext[] = [];
    const acme: Renderer = {
      types: ['acme-os'],
      formats: ['script'],
      render(config, context): Promise<RenderResult> {
        seen.push(context);
        return Promise.resolve({
          userData: Buffer.from(`acme ${config.files.length} file(s)\n`),
          format: context.format,
          extraUnits: [],
          extraFiles: [],
          warnings: [],
        });
      },
    };
    const registry = defaultRegistry().register(acme);
    expect(registry.types()).toContain('acme-os');
    const result = await renderOsc(registry, { ...base, type: 'acme-os' }, opts);
    expect(result.userData.toString()).toBe('acme 1 file(s)\n');
    expect(seen).toEqual([{ name: 'n', namespace: 'ns', purpose: 'reconcile', format: 'script' }]);
  });

  it('refuses a second renderer for a type unless replace is asked for', () => {
    const registry = defaultRegistry();
    const other: Renderer = { ...registry.get('ubuntu')!, types: ['ubuntu'] };
    expect(() => registry.register(other)).toThrow(/already has a renderer.*replace: true/);
    expect(() => registry.register(other, { replace: true })).not.toThrow();
    expect(registry.get('ubuntu')).toBe(other);
    expect(() => new RendererRegistry().register({ ...other, types: ['Bad_Type'] })).toThrow(
      /not a valid spec.type/,
    );
  });

  it('names the field when the type is unknown or the format unsupported', async () => {
    const registry = defaultRegistry();
    expect(await errorsOf(renderOsc(registry, { ...base, type: 'plan9' }, opts))).toMatch(
      /^spec.type: no renderer for type "plan9"; known types: debian, flatcar, generic, opensuse, ubuntu/,
    );
    expect(await errorsOf(renderOsc(registry, base, { ...opts, format: 'ignition' }))).toMatch(
      /^spec.format: type "ubuntu" cannot be rendered as "ignition"; its renderer offers "cloud-config", "script"/,
    );
    expect(
      await errorsOf(
        renderOsc(registry, { ...base, type: 'flatcar', format: 'cloud-config' }, opts),
      ),
    ).toMatch(/spec.format/);
  });

  it('picks the format: option, then spec.format, then the renderer default', async () => {
    const registry = defaultRegistry();
    expect((await renderOsc(registry, base, opts)).format).toBe('cloud-config');
    expect((await renderOsc(registry, { ...base, format: 'script' }, opts)).format).toBe('script');
    expect(
      (
        await renderOsc(
          registry,
          { ...base, format: 'script' },
          { ...opts, format: 'cloud-config' },
        )
      ).format,
    ).toBe('cloud-config');
    expect((await renderOsc(registry, { ...base, type: 'flatcar' }, opts)).format).toBe('ignition');
    expect((await renderOsc(registry, { ...base, type: 'generic' }, opts)).format).toBe('script');
  });
});

describe('bad input never renders', () => {
  const registry = defaultRegistry();

  it('a built-in renderer called directly refuses an invalid config with field errors', async () => {
    const bad: ResolvedConfig = {
      ...base,
      files: [
        { path: '/etc/../x', mode: 0o10000, user: 'a b', group: 'root', content: Buffer.from('') },
      ],
      units: [
        {
          name: 'no-suffix',
          enable: true,
          mask: false,
          command: 'start',
          onChange: 'restart',
          content: '[Unit\n',
          dropIns: [{ name: 'x.txt', content: '' }],
          filePaths: [],
        },
      ],
    };
    const renderer = registry.get('ubuntu')!;
    const message = await errorsOf(
      renderer.render(bad, { ...opts, purpose: 'reconcile', format: 'cloud-config' }),
    );
    for (const field of [
      'spec.files[0].path',
      'spec.files[0].permissions',
      'spec.files[0].owner',
      'spec.units[0].name',
      'spec.units[0].content',
      'spec.units[0].dropIns[0].name',
    ]) {
      expect(message).toContain(field);
    }
    await errorsOf(renderOsc(registry, bad, opts));
  });

  it('renderDocument returns the validation errors of an invalid document and no output', async () => {
    const result = await renderDocument(registry, {
      apiVersion: 'oscar.dev/v1alpha1',
      kind: 'OperatingSystemConfig',
      metadata: { name: 'x' },
      spec: {
        type: 'ubuntu',
        purpose: 'provision',
        files: [{ path: '/etc/x', permissions: 420, content: { inline: { data: 'x' } } }],
      },
    });
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.errors.map((e) => e.path)).toContain('spec.files[0].permissions');
    expect('result' in result).toBe(false);
  });

  it('renderDocument reports an unresolvable secretRef by field', async () => {
    const result = await renderDocument(registry, {
      apiVersion: 'oscar.dev/v1alpha1',
      kind: 'OperatingSystemConfig',
      metadata: { name: 'x' },
      spec: {
        type: 'ubuntu',
        purpose: 'provision',
        files: [{ path: '/etc/x', content: { secretRef: { name: 's', key: 'k' } } }],
      },
    });
    expect(result).toEqual({
      ok: false,
      errors: [expect.objectContaining({ path: 'spec.files[0].content.secretRef' })],
    });
  });
});
