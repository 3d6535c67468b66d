import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../api/field-error.js';
import { WebhookRenderer } from './client.js';
import { parseRenderersConfig, parseRenderersConfigMap, registryWithWebhooks } from './config.js';

const PEM = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';

async function errorsOf(text: string, files: Record<string, string> = {}): Promise<string[]> {
  try {
    await parseRenderersConfig(text, {
      source: 'renderers.yaml',
      baseDir: '/etc/oscar',
      readFile: (p) =>
        files[p] === undefined ? Promise.reject(new Error('ENOENT')) : Promise.resolve(files[p]),
    });
  } catch (error) {
    expect(error).toBeInstanceOf(ValidationError);
    return (error as ValidationError).errors.map((e) => `${e.path}: ${e.message}`);
  }
  throw new Error('expected errors');
}

describe('renderers configuration', () => {
  it('parses YAML and JSON: type → url, formats, CA, timeout, retries, size limit', async () => {
    const yaml = `
alpine:
  url: https://alpine.example.svc:8443/render
  formats: [script, cloud-config]
  caFile: ca.pem
  timeoutSeconds: 2.5
  retries: 0
  maxResponseBytes: 65536
nixos:
  url: http://127.0.0.1:9000/render
  formats: [script]
`;
    const entries = await parseRenderersConfig(yaml, {
      source: 'x',
      baseDir: '/etc/oscar',
      readFile: (p) =>
        p === '/etc/oscar/ca.pem' ? Promise.resolve(PEM) : Promise.reject(new Error('no')),
    });
    expect(entries).toEqual([
      {
        type: 'alpine',
        url: 'https://alpine.example.svc:8443/render',
        formats: ['script', 'cloud-config'],
        ca: PEM,
        timeoutMs: 2500,
        retries: 0,
        maxResponseBytes: 65536,
      },
      { type: 'nixos', url: 'http://127.0.0.1:9000/render', formats: ['script'] },
    ]);
    const fromJson = await parseRenderersConfig(
      JSON.stringify({ nixos: { url: 'http://127.0.0.1:9000/render', formats: ['script'] } }),
    );
    expect(fromJson).toEqual([entries[1]]);
    expect(await parseRenderersConfig('')).toEqual([]);
  });

  it('names each bad field and the fix', async () => {
    expect(await errorsOf('Alpine: {url: "http://x/render", formats: [script]}')).toEqual([
      'Alpine: is not a valid spec.type (lowercase a-z, 0-9 and "-")',
    ]);
    const errors = await errorsOf(`
a: {url: "http://x/render"}
b: {url: "http://x/render", formats: [yaml], timeoutSeconds: "10"}
c: {url: "ftp://x", formats: [script]}
d: {url: "https://x/r", formats: [script], caBundle: "${PEM.replace(/\n/g, '\\n')}", caFile: ca.pem}
e: {url: "https://x/r", formats: [script], caFile: missing.pem}
f: {url: "https://x/r", formats: [script], caBundle: "not a pem"}
g: {url: "http://x/r", formats: [script], timeout: 3}
`);
    expect(errors).toContain('a: must have required properties formats');
    expect(
      errors.some((e) => e.startsWith('b.formats[0]: must be equal to one of the allowed values')),
    ).toBe(true);
    expect(errors.some((e) => e.startsWith('b.timeoutSeconds: must be number'))).toBe(true);
    expect(errors).toContain('c.url: must start with http:// or https://');
    expect(errors).toContain('d.caFile: set caBundle or caFile, not both');
    expect(errors.some((e) => e.startsWith('e.caFile: cannot read /etc/oscar/missing.pem'))).toBe(
      true,
    );
    expect(errors).toContain('f.caBundle: holds no PEM certificate (-----BEGIN CERTIFICATE-----)');
    expect(errors.some((e) => e.startsWith('g: ') && e.includes('known: url, formats'))).toBe(true);
    expect(await errorsOf('- a\n- b\n')).toEqual([
      ': renderers.yaml must be a mapping of OS type → { url, formats, … }',
    ]);
  });

  it('reads the same content from a ConfigMap', async () => {
    const entries = await parseRenderersConfigMap(
      { 'renderers.yaml': 'alpine: {url: "http://a/render", formats: [script]}' },
      'oscar-renderers',
    );
    expect(entries.map((e) => e.type)).toEqual(['alpine']);
    await expect(parseRenderersConfigMap({}, 'oscar-renderers')).rejects.toThrow(
      'ConfigMap oscar-renderers has no key renderers.yaml',
    );
  });

  it('adds webhook renderers to the built-ins; an entry for a built-in type replaces it', () => {
    const { registry, renderers } = registryWithWebhooks([
      { type: 'alpine', url: 'http://a/render', formats: ['script'] },
      { type: 'ubuntu', url: 'http://u/render', formats: ['cloud-config'] },
    ]);
    expect(registry.get('alpine')).toBeInstanceOf(WebhookRenderer);
    expect(registry.get('ubuntu')).toBeInstanceOf(WebhookRenderer);
    expect(registry.get('debian')).not.toBeInstanceOf(WebhookRenderer);
    expect(registry.get('alpine')?.formats).toEqual(['script']);
    expect(renderers).toHaveLength(2);
    for (const r of renderers) r.close();
  });
});
