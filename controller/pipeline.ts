/**
 * The rendering step the reconciler calls: OS-profile expansion plus the renderer chosen by
 * spec.type. An interface so reconcile can be unit-tested with a tiny stand-in and so a provider
 * can run the controller with its own registry.
 */
import type { ResolvedConfig } from '../api/resolved.js';
import { expand } from '../renderers/profiles.js';
import { defaultRegistry, renderOsc, type RendererRegistry } from '../renderers/registry.js';
import type { RenderResult } from '../renderers/types.js';

export interface RenderOutput {
  /** The configuration with the OS profile's additions: what the reconcile Secret carries. */
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
      return { expanded: expand(config).config, result };
    },
  };
}
