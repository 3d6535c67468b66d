// Round trip, exact: whatever a renderer writes decodes back to exactly the declared files
// (bytes, mode, owner) and units (content, drop-ins, enable, mask, commands), for arbitrary
// contents, odd but legal paths and every mode.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Format } from '../api/schema.js';
import { comparable } from './decode.js';
import { decode, expectedOutcome } from './formats.js';
import { expand } from './profiles.js';
import { defaultRegistry, renderOsc } from './registry.js';
import { configArb } from './testdata/arbitraries.js';

const registry = defaultRegistry();
const RUNS = 1000;

const cases: { format: Format; types: string[]; packages: boolean }[] = [
  { format: 'cloud-config', types: ['ubuntu', 'debian', 'opensuse', 'generic'], packages: true },
  { format: 'ignition', types: ['flatcar'], packages: false },
  { format: 'script', types: ['ubuntu', 'opensuse', 'flatcar', 'generic'], packages: true },
];

describe.each(cases)('$format round trip', ({ format, types, packages }) => {
  it(`decodes to exactly what was declared (${RUNS} generated configs)`, async () => {
    await fc.assert(
      fc.asyncProperty(
        configArb({ types, packages }).filter(
          (c) => packages || c.type !== 'flatcar' || c.packages.length === 0,
        ),
        fc.boolean(),
        async (config, gzip) => {
          if (config.type === 'flatcar') config.packages = [];
          const result = await renderOsc(registry, config, {
            name: 'prop',
            namespace: 'test',
            format,
            gzip,
          });
          const decoded = decode(format, result.userData);
          expect(comparable(decoded)).toEqual(
            comparable(expectedOutcome(expand(config).config, format)),
          );
        },
      ),
      { numRuns: RUNS },
    );
  });
});
