import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkEveryField, checkResolved } from '../renderers/guard.js';
import { configArb } from '../renderers/testdata/arbitraries.js';
import { loadExamples } from '../renderers/testdata/golden.js';
import { API_VERSION } from './constants.js';
import type { ResolvedConfig } from './resolved.js';
import { documentOf } from './testing/configs.js';
import { NO_REFERENCES } from './resolve.js';
import { isValidated, validateAndResolve } from './validated.js';

describe('validateAndResolve', () => {
  it('returns a frozen, marked config for a valid document', async () => {
    for (const { osc } of await loadExamples()) {
      const r = validateAndResolve(osc, NO_REFERENCES);
      if (!r.ok) throw new Error(JSON.stringify(r.errors));
      expect(isValidated(r.config)).toBe(true);
      expect(Object.isFrozen(r.config)).toBe(true);
      expect(() => {
        (r.config.files as unknown[]).push({});
      }).toThrow(TypeError);
      const unit = r.config.units[0];
      if (unit) {
        expect(() => {
          unit.enable = !unit.enable;
        }).toThrow(TypeError);
      }
      // the guard's own checks agree: nothing is skipped that would have failed
      expect(checkEveryField(r.config)).toEqual([]);
    }
  });

  it('says which stage failed, and marks nothing', () => {
    const bad = validateAndResolve({ kind: 'OperatingSystemConfig' }, NO_REFERENCES);
    expect(bad).toMatchObject({ ok: false, stage: 'validate' });
    const missing = validateAndResolve(
      {
        apiVersion: API_VERSION,
        kind: 'OperatingSystemConfig',
        metadata: { name: 'x' },
        spec: {
          type: 'ubuntu',
          purpose: 'reconcile',
          files: [{ path: '/etc/a', content: { secretRef: { name: 's', key: 'k' } } }],
        },
      },
      (spec) => {
        expect(spec.files?.[0]?.path).toBe('/etc/a');
        return NO_REFERENCES;
      },
    );
    expect(missing).toMatchObject({ ok: false, stage: 'resolve' });
  });

  it('passes only configs the guard would pass too (the guard skips marked ones)', () => {
    let validated = 0;
    fc.assert(
      fc.property(configArb({ types: ['ubuntu', 'flatcar', 'generic'] }), (config) => {
        const r = validateAndResolve(documentOf(config), NO_REFERENCES);
        if (!r.ok) return;
        validated++;
        expect(checkResolved(r.config)).toEqual([]);
        expect(checkEveryField(r.config)).toEqual([]);
      }),
      { numRuns: 500 },
    );
    // the property means something only if most generated configs get through validation
    expect(validated).toBeGreaterThan(250);
  });

  it('leaves configs built in code to the guard', () => {
    const config: ResolvedConfig = {
      type: 'ubuntu',
      purpose: 'reconcile',
      units: [],
      files: [{ path: 'relative', mode: 0o644, user: 'root', group: 'root', content: Buffer.of() }],
      packages: [],
    };
    expect(isValidated(config)).toBe(false);
    expect(checkResolved(config)).toEqual([
      expect.objectContaining({ path: 'spec.files[0].path' }),
    ]);
  });
});
