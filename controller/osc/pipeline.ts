/**
 * The rendering step the reconciler calls: OS-profile expansion plus the renderer chosen by
 * spec.type. An interface so reconcile can be unit-tested with a tiny stand-in and so a provider
 * can run the controller with its own registry.
 */
import type { ResolvedConfig } from '../../api/resolved.js';
import { checkAdditions, withAdditions } from '../../renderers/additions.js';
import { checkOscarOwnedPath, checkOscarOwnedUnit } from '../../api/oscar-owned.js';
import {
  defaultRegistry,
  renderOsc,
  selectRenderer,
  type RendererRegistry,
} from '../../renderers/registry.js';
import type { RenderResult } from '../../renderers/types.js';

export interface RenderOutput {
  /**
   * The configuration with the renderer's additions (its extraUnits and extraFiles, a built-in's
   * OS profile or a webhook's): what the reconcile Secret carries and the agent applies.
   */
  expanded: ResolvedConfig;
  result: RenderResult;
}

export interface Pipeline {
  /** Throws api/field-error ValidationError when the config cannot be rendered as declared. */
  render(
    config: ResolvedConfig,
    target: { name: string; namespace: string },
  ): Promise<RenderOutput>;
}

/**
 * What a renderer added that a tenant's OSC could not say: oscar's own files and units (the OSC's
 * checks refuse them in the spec; a renderer — a webhook, compromised or buggy — must not slip them
 * in either). The rest of the additions is checked as any resolved config (checkAdditions).
 */
export function oscarOwnedAdditions(result: RenderResult): string[] {
  const problems: string[] = [];
  for (const f of result.extraFiles) {
    const problem = checkOscarOwnedPath(f.path);
    if (problem) problems.push(`file ${JSON.stringify(f.path)}: ${problem}`);
  }
  for (const u of result.extraUnits) {
    const problem = checkOscarOwnedUnit(u.name);
    if (problem) problems.push(`unit ${JSON.stringify(u.name)}: ${problem}`);
  }
  return problems;
}

export function registryPipeline(registry: RendererRegistry = defaultRegistry()): Pipeline {
  return {
    async render(config, target) {
      const result = await renderOsc(registry, config, target);
      const selected = selectRenderer(registry, config);
      if ('format' in selected && result.format !== selected.format) {
        throw new Error(
          `the renderer for type "${config.type}" answered format "${result.format}" where "${selected.format}" was asked`,
        );
      }
      const expanded = withAdditions(config, result);
      const problems = oscarOwnedAdditions(result);
      if (expanded !== config) problems.push(...checkAdditions(expanded));
      if (problems.length > 0) {
        throw new Error(
          `the renderer for type "${config.type}" added what oscar cannot apply: ${problems.join('; ')}`,
        );
      }
      return { expanded, result };
    },
  };
}
