import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { configArb, fileArb, unitArb } from '../testdata/arbitraries.js';
import type { RenderContext } from '../types.js';
import {
  asRenderError,
  decodeRequest,
  decodeResponse,
  encodeError,
  encodeRequest,
  encodeResponse,
  jsonSchemas,
  ProtocolError,
} from './protocol.js';

const contextArb = fc
  .record({
    name: fc.stringMatching(/^[a-z][a-z0-9-]{0,20}$/),
    namespace: fc.stringMatching(/^[a-z][a-z0-9-]{0,20}$/),
    purpose: fc.constantFrom('provision' as const, 'reconcile' as const),
    format: fc.constantFrom('cloud-config' as const, 'ignition' as const, 'script' as const),
    gzip: fc.option(fc.boolean(), { nil: undefined }),
  })
  .map((c) => {
    const out: RenderContext = {
      name: c.name,
      namespace: c.namespace,
      purpose: c.purpose,
      format: c.format,
    };
    if (c.gzip !== undefined) out.gzip = c.gzip;
    return out;
  });

/** Through JSON text, as on the wire. */
const wire = (value: unknown): unknown => JSON.parse(JSON.stringify(value));

describe('the render/v1 protocol', () => {
  it('committed JSON Schemas match protocol.ts (regenerate: node --import tsx renderers/webhook/gen-schemas.ts)', () => {
    for (const [name, schema] of Object.entries(jsonSchemas())) {
      const committed = readFileSync(join(import.meta.dirname, 'schemas', name), 'utf8');
      expect(JSON.parse(committed), name).toEqual(schema);
    }
  });

  it('a request decodes to exactly the config and context it was encoded from', () => {
    fc.assert(
      fc.property(
        configArb({ types: ['ubuntu', 'flatcar', 'alpine'] }),
        contextArb,
        (config, context) => {
          const decoded = decodeRequest(wire(encodeRequest(config, context)));
          expect(decoded.config).toEqual(config);
          expect(decoded.context).toEqual(context);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('a response decodes to exactly the result it was encoded from (bytes included)', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 4096 }),
        fc.array(unitArb, { maxLength: 3 }),
        fc.array(fileArb(), { maxLength: 3 }),
        fc.array(fc.string(), { maxLength: 3 }),
        (bytes, extraUnits, extraFiles, warnings) => {
          const result = {
            userData: Buffer.from(bytes),
            format: 'script' as const,
            extraUnits,
            extraFiles,
            warnings,
          };
          const decoded = decodeResponse(wire(encodeResponse(result)));
          expect(decoded).toEqual(result);
          expect(decoded.userData.equals(result.userData)).toBe(true);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('refuses a request that breaks the schema, naming the fields', () => {
    const good = wire(
      encodeRequest(
        {
          type: 'x',
          purpose: 'provision',
          units: [],
          files: [
            { path: '/a', mode: 0o644, user: 'root', group: 'root', content: Buffer.from('a') },
          ],
          packages: [],
        },
        { name: 'n', namespace: 'ns', purpose: 'provision', format: 'script' },
      ),
    ) as {
      config: { files: { mode: unknown; content: unknown }[] };
      context: Record<string, unknown>;
    };
    const bad = structuredClone(good);
    (bad.config.files[0] as { mode: unknown }).mode = '0644';
    delete bad.context.format;
    expect(() => decodeRequest(bad)).toThrow(ProtocolError);
    expect(() => decodeRequest(bad)).toThrow(/request\.config\.files\[0\]\.mode: must be integer/);
    expect(() => decodeRequest(bad)).toThrow(
      /request\.context: must have required properties format/,
    );
    for (const text of ['QQ==QQ==', 'ab c', 'a*bc', 'Q===', 'YWJj_w==']) {
      const b = structuredClone(good);
      (b.config.files[0] as { content: unknown }).content = text;
      expect(() => decodeRequest(b), text).toThrow(
        /files\[0\]\.content: is not standard padded base64/,
      );
    }
    const badBase64 = structuredClone(good);
    (badBase64.config.files[0] as { content: unknown }).content = 'YQ';
    expect(() => decodeRequest(badBase64)).toThrow(
      /request\.config\.files\[0\]\.content: is not standard padded base64/,
    );
    expect(() => decodeRequest({ ...good, apiVersion: 'oscar.dev/render/v0' })).toThrow(
      /speaks apiVersion "oscar.dev\/render\/v0"/,
    );
  });

  it('recognises a RenderError and nothing else as one', () => {
    expect(
      asRenderError(
        wire(encodeError({ code: 'Unsupported', message: 'm', field: 'spec.units[0]' })),
      ),
    ).toEqual({
      code: 'Unsupported',
      message: 'm',
      field: 'spec.units[0]',
    });
    expect(asRenderError(wire(encodeError({ code: 'X', message: 'm' })))).toEqual({
      code: 'X',
      message: 'm',
    });
    expect(asRenderError({ error: { code: 'X', message: 'm' } })).toBeUndefined();
    expect(
      asRenderError(
        wire(
          encodeResponse({
            userData: Buffer.alloc(0),
            format: 'script',
            extraUnits: [],
            extraFiles: [],
            warnings: [],
          }),
        ),
      ),
    ).toBeUndefined();
  });
});
