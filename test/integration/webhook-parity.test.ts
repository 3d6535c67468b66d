// Parity: every example, rendered for every built-in type in every format it offers (plain and
// gzip), gives byte-identical results in process and through `oscar renderer serve` (a real
// separate process) + the HTTP client. Refusals match too. Also a batch of generated configs with
// odd bytes, paths and modes. The built-ins and a provider's renderer speak one contract.
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ValidationError } from '../../api/field-error.js';
import { loadDocuments } from '../../api/load.js';
import { NO_REFERENCES, resolve } from '../../api/resolve.js';
import type { ResolvedConfig } from '../../api/resolved.js';
import type { Format, OperatingSystemConfig } from '../../api/schema.js';
import { validateOperatingSystemConfig } from '../../api/validate.js';
import { BUILTIN_RENDERERS } from '../../renderers/builtin.js';
import {
  defaultRegistry,
  renderDocument,
  renderOsc,
  type RendererRegistry,
} from '../../renderers/registry.js';
import { configArb } from '../../renderers/testdata/arbitraries.js';
import { goldenDir, goldenEntries } from '../../renderers/testdata/golden.js';
import type { RenderResult } from '../../renderers/types.js';
import { RendererError, WebhookRenderer } from '../../renderers/webhook/client.js';
import { registryWithWebhooks, type WebhookEntry } from '../../renderers/webhook/config.js';
import { loopbackServingCert } from '../support/serving-cert.js';
import { repoRoot, requireTool } from '../support/tools.js';
import { startOscarRendererServe, type RendererProcess } from './support/webhook.js';

const local = defaultRegistry();
const TYPES = local.types();
let serve: RendererProcess;
let remote: RendererRegistry;
let closeAll: () => void = () => undefined;

beforeAll(async () => {
  serve = await startOscarRendererServe(TYPES);
  const entries: WebhookEntry[] = TYPES.map((type) => ({
    type,
    url: serve.url,
    formats: [...(local.get(type)?.formats ?? [])],
  }));
  const built = registryWithWebhooks(entries);
  remote = built.registry;
  closeAll = () => {
    for (const r of built.renderers) r.close();
  };
});

afterAll(async () => {
  closeAll();
  await serve.stop();
});

const examplesDir = join(repoRoot, 'examples');
const examples = readdirSync(examplesDir)
  .filter((f) => f.endsWith('.yaml'))
  .flatMap((file) =>
    loadDocuments(readFileSync(join(examplesDir, file), 'utf8')).map((doc, i) => {
      expect(doc.errors).toEqual([]);
      expect(validateOperatingSystemConfig(doc.value)).toEqual([]);
      const osc = doc.value as OperatingSystemConfig;
      const resolved = resolve(osc.spec, NO_REFERENCES);
      if (!resolved.ok) throw new Error(`${file}[${String(i)}] does not resolve`);
      return { name: `${file}#${String(i)}`, osc, config: resolved.config };
    }),
  );

type Outcome = { ok: true; result: RenderResult } | { ok: false; field?: string; message: string };

async function outcome(
  registry: RendererRegistry,
  config: ResolvedConfig,
  format: Format,
  gzip: boolean,
  name: string,
): Promise<Outcome> {
  try {
    return {
      ok: true,
      result: await renderOsc(registry, config, { name, namespace: 'parity', format, gzip }),
    };
  } catch (error) {
    if (error instanceof ValidationError) {
      const only = error.errors.length === 1 ? error.errors[0] : undefined;
      return only
        ? { ok: false, field: only.path, message: only.message }
        : { ok: false, message: error.message.replace(/\n/g, '; ') };
    }
    if (error instanceof RendererError && error.source === 'renderer' && error.code === 'Invalid') {
      return error.field === undefined
        ? { ok: false, message: error.detail }
        : { ok: false, field: error.field, message: error.detail };
    }
    throw error;
  }
}

function expectSame(a: Outcome, b: Outcome): void {
  if (a.ok && b.ok) {
    expect(b.result.userData.equals(a.result.userData), 'userData byte-identical').toBe(true);
    expect(b.result).toEqual(a.result);
  } else {
    expect(b).toEqual(a);
  }
}

/** Every (type, format) the built-ins offer. */
const pairs = BUILTIN_RENDERERS.flatMap((r) =>
  r.types.flatMap((type) => r.formats.map((format) => ({ type, format }))),
);

describe('built-in renderers in process and over HTTP (oscar renderer serve)', () => {
  it('cover every built-in type and format', () => {
    expect(new Set(pairs.map((p) => p.type))).toEqual(new Set(TYPES));
    expect(new Set(pairs.map((p) => p.format))).toEqual(
      new Set(['cloud-config', 'ignition', 'script']),
    );
    expect(examples.length).toBeGreaterThanOrEqual(4);
  });

  it('render every golden file (test/golden) byte for byte over HTTP', async () => {
    const golden = await goldenEntries();
    expect(golden.length).toBeGreaterThanOrEqual(8);
    for (const entry of golden) {
      const r = await renderDocument(remote, entry.osc, undefined, { format: entry.format });
      if (!r.ok) throw new Error(`${entry.file}: ${JSON.stringify(r.errors)}`);
      const onDisk = await readFile(join(goldenDir, entry.file));
      expect(r.result.userData.equals(onDisk), entry.file).toBe(true);
    }
  });

  for (const example of examples) {
    it(`${example.name}: byte-identical for every type × format × gzip`, async () => {
      let rendered = 0;
      for (const { type, format } of pairs) {
        for (const gzip of [false, true]) {
          const config: ResolvedConfig = { ...example.config, type };
          const label = `${example.name} as ${type}/${format}${gzip ? '+gzip' : ''}`;
          const a = await outcome(local, config, format, gzip, example.osc.metadata.name);
          const b = await outcome(remote, config, format, gzip, example.osc.metadata.name);
          try {
            expectSame(a, b);
          } catch (error) {
            throw new Error(`${label}: ${(error as Error).message}`, { cause: error });
          }
          if (a.ok) rendered++;
        }
      }
      // most combinations render; the rest (packages on flatcar) must be refused the same way
      expect(rendered).toBeGreaterThan(pairs.length);
    });
  }

  it('byte-identical for generated configs with odd bytes, paths, modes and units', async () => {
    await fc.assert(
      fc.asyncProperty(
        configArb({ types: TYPES, packages: true }),
        fc.constantFrom(...pairs),
        fc.boolean(),
        async (generated, pair, gzip) => {
          const config = { ...generated, type: pair.type };
          expectSame(
            await outcome(local, config, pair.format, gzip, 'prop'),
            await outcome(remote, config, pair.format, gzip, 'prop'),
          );
        },
      ),
      { numRuns: 150 },
    );
  });
});

describe('oscar renderer serve over HTTPS (--tls-cert/--tls-key)', () => {
  it('serves TLS that the client verifies against the CA bundle, and refuses without it', async (ctx) => {
    if (!requireTool('openssl', 'apt-get install openssl (hack/deps.sh)')) {
      ctx.skip('openssl is missing');
      return;
    }
    const dir = await mkdtemp(join(tmpdir(), 'oscar-serve-tls-'));
    const serving = await loopbackServingCert(dir, ['localhost']);
    const tls = await startOscarRendererServe(
      ['generic'],
      ['--tls-cert', serving.certPath, '--tls-key', serving.keyPath],
    );
    const config = examples[0]?.config;
    if (!config) throw new Error('no example');
    const context = {
      name: 'tls',
      namespace: 'parity',
      purpose: config.purpose,
      format: 'script' as const,
    };
    const trusted = new WebhookRenderer({
      url: tls.url,
      types: ['generic'],
      formats: ['script'],
      ca: serving.ca.toString('utf8'),
    });
    const untrusted = new WebhookRenderer({
      url: tls.url,
      types: ['generic'],
      formats: ['script'],
    });
    try {
      expect(tls.url.startsWith('https://127.0.0.1:')).toBe(true);
      const generic = { ...config, type: 'generic' };
      const remoteResult = await trusted.render(generic, context);
      const localResult = await local.get('generic')?.render(generic, context);
      expect(remoteResult.userData.equals(localResult?.userData ?? Buffer.alloc(0))).toBe(true);
      await expect(untrusted.render(generic, context)).rejects.toMatchObject({ code: 'TLSError' });
    } finally {
      trusted.close();
      untrusted.close();
      await tls.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
