/**
 * The renderer registry: spec.type → renderer. The built-ins are registered by
 * `defaultRegistry()`; a provider adds its own OS type by registering a Renderer (in code, or one
 * that forwards to its webhook). `renderOsc` is the one entry the controller and the CLI use:
 * it checks the config, finds the renderer, settles the format and renders.
 */
import { fieldError, ValidationError, type FieldError } from '../api/field-error.js';
import { type References, NO_REFERENCES } from '../api/resolve.js';
import type { ResolvedConfig } from '../api/resolved.js';
import type { Format } from '../api/schema.js';
import { validateAndResolve } from '../api/validated.js';
import { BUILTIN_RENDERERS } from './builtin.js';
import { checkResolved, withChecked } from './guard.js';
import type { RenderContext, RenderResult, Renderer } from './types.js';

export class RendererRegistry {
  private readonly byType = new Map<string, Renderer>();

  /**
   * Registers `renderer` for each of its types. A type that already has a renderer is refused
   * unless `replace` is set, so a provider overrides a built-in only on purpose.
   */
  register(renderer: Renderer, options: { replace?: boolean } = {}): this {
    if (renderer.types.length === 0) throw new Error('a renderer must serve at least one type');
    if (renderer.formats.length === 0) throw new Error('a renderer must offer at least one format');
    for (const type of renderer.types) {
      if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(type) || type.length > 63) {
        throw new Error(
          `renderer type "${type}" is not a valid spec.type (lowercase a-z, 0-9, "-")`,
        );
      }
      if (this.byType.has(type) && options.replace !== true) {
        throw new Error(
          `type "${type}" already has a renderer; register with { replace: true } to override it`,
        );
      }
    }
    for (const type of renderer.types) this.byType.set(type, renderer);
    return this;
  }

  get(type: string): Renderer | undefined {
    return this.byType.get(type);
  }

  /** The registered types, sorted. */
  types(): string[] {
    return [...this.byType.keys()].sort();
  }
}

/** A registry with oscar's built-in renderers (ubuntu, debian, opensuse, flatcar, generic). */
export function defaultRegistry(): RendererRegistry {
  const registry = new RendererRegistry();
  for (const renderer of BUILTIN_RENDERERS) registry.register(renderer);
  return registry;
}

export interface RenderOptions {
  /** The OperatingSystemConfig's name and namespace. */
  name: string;
  namespace: string;
  /** Overrides spec.format (a CLI flag); else spec.format; else the renderer's default. */
  format?: Format;
  gzip?: boolean;
}

/** The renderer and format for a config, or the field errors that say why there is none. */
export function selectRenderer(
  registry: RendererRegistry,
  config: Pick<ResolvedConfig, 'type' | 'format'>,
  format?: Format,
): { renderer: Renderer; format: Format } | { errors: FieldError[] } {
  const renderer = registry.get(config.type);
  if (renderer === undefined) {
    return {
      errors: [
        fieldError(
          'spec.type',
          `no renderer for type "${config.type}"; known types: ${registry.types().join(', ')} (a provider adds one by registering a renderer)`,
        ),
      ],
    };
  }
  const chosen = format ?? config.format ?? renderer.formats[0];
  if (chosen === undefined || !renderer.formats.includes(chosen)) {
    return {
      errors: [
        fieldError(
          'spec.format',
          `type "${config.type}" cannot be rendered as "${String(chosen)}"; its renderer offers ${renderer.formats.map((f) => `"${f}"`).join(', ')}`,
        ),
      ],
    };
  }
  return { renderer, format: chosen };
}

/**
 * Renders a resolved config. Throws a ValidationError (field errors) when the config is not
 * renderable, the type unknown or the format unsupported for it: nothing is rendered then.
 */
export async function renderOsc(
  registry: RendererRegistry,
  config: ResolvedConfig,
  options: RenderOptions,
): Promise<RenderResult> {
  const invalid = checkResolved(config);
  if (invalid.length > 0) throw new ValidationError(invalid);
  const selected = selectRenderer(registry, config, options.format);
  if ('errors' in selected) throw new ValidationError(selected.errors);
  const context: RenderContext = {
    name: options.name,
    namespace: options.namespace,
    purpose: config.purpose,
    format: selected.format,
  };
  if (options.gzip !== undefined) context.gzip = options.gzip;
  return withChecked(config, () => selected.renderer.render(config, context));
}

export type RenderDocumentResult =
  { ok: true; config: ResolvedConfig; result: RenderResult } | { ok: false; errors: FieldError[] };

/**
 * From a parsed OperatingSystemConfig document to user data: validate, resolve (with the
 * referenced Secrets and ConfigMaps), render. Never renders anything for an invalid document.
 */
export async function renderDocument(
  registry: RendererRegistry,
  doc: unknown,
  refs: References = NO_REFERENCES,
  options: { format?: Format; gzip?: boolean } = {},
): Promise<RenderDocumentResult> {
  const resolved = validateAndResolve(doc, refs);
  if (!resolved.ok) return { ok: false, errors: resolved.errors };
  const { osc, config } = resolved;
  try {
    const result = await renderOsc(registry, config, {
      name: osc.metadata.name,
      namespace: osc.metadata.namespace ?? 'default',
      ...options,
    });
    return { ok: true, config, result };
  } catch (error) {
    if (error instanceof ValidationError) return { ok: false, errors: error.errors };
    throw error;
  }
}
