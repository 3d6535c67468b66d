/**
 * The rendering step the reconciler calls: OS-profile expansion plus the renderer chosen by
 * spec.type. An interface so reconcile can be unit-tested with a tiny stand-in and so a provider
 * can run the controller with its own registry.
 */
import type { ResolvedConfig } from '../../api/resolved.js';
import { checkAdditions, withAdditions } from '../../renderers/additions.js';
import { defaultRegistry, renderOsc, type RendererRegistry } from '../../renderers/registry.js';
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

export function registryPipeline(registry: RendererRegistry = defaultRegistry()): Pipeline {
  return {
    async render(config, target) {
      const result = await renderOsc(registry, config, target);
      const expanded = withAdditions(config, result);
      if (expanded !== config) {
        const problems = checkAdditions(expanded);
        if (problems.length > 0) {
          throw new Error(
            `the renderer for type "${config.type}" added what oscar cannot apply: ${problems.join('; ')}`,
          );
        }
      }
      return { expanded, result };
    },
  };
}
