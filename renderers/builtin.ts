/**
 * The built-in renderers: one per family of OS, each offering the formats that OS can boot with.
 * They share one pipeline: guard → OS profile (expand) → format → optional gzip → size warnings.
 */
import { gzipSync } from 'node:zlib';
import { fieldError, ValidationError } from '../api/field-error.js';
import type { ResolvedConfig } from '../api/resolved.js';
import type { Format } from '../api/schema.js';
import { sizeWarnings } from './common.js';
import { assertRenderable } from './guard.js';
import { FORMATS } from './formats.js';
import { expand, type OsProfile, PROFILES } from './profiles.js';
import type { RenderContext, RenderResult, Renderer } from './types.js';

export { renderFormat } from './formats.js';

/** A renderer for `types` producing `formats` (the first is the default) with oscar's profiles. */
export function builtinRenderer(
  types: readonly string[],
  formats: readonly Format[],
  profiles: readonly OsProfile[] = PROFILES,
): Renderer {
  return {
    types,
    formats,
    render(config: ResolvedConfig, context: RenderContext): Promise<RenderResult> {
      // async only by contract (a webhook renderer needs it); the work here is synchronous, and
      // the executor turns a thrown ValidationError into a rejection
      return new Promise((resolve) => {
        resolve(renderBuiltin(formats, profiles, config, context));
      });
    },
  };
}

function renderBuiltin(
  formats: readonly Format[],
  profiles: readonly OsProfile[],
  config: ResolvedConfig,
  context: RenderContext,
): RenderResult {
  assertRenderable(config);
  if (!formats.includes(context.format)) {
    throw new ValidationError([
      fieldError(
        'spec.format',
        `type "${config.type}" cannot be rendered as "${context.format}"; use one of ${formats.map((f) => `"${f}"`).join(', ')}`,
      ),
    ]);
  }
  const { config: expanded, extraUnits, extraFiles } = expand(config, profiles);
  const warnings: string[] = [];
  const format = FORMATS[context.format];
  let userData = format.render(expanded, context);
  if (context.gzip) {
    if (format.gzip) {
      // mtime 0 keeps the output stable
      userData = gzipSync(userData, { level: 9 });
    } else {
      warnings.push(
        `gzip applies to cloud-config only; the ${context.format} output is not compressed`,
      );
    }
  }
  warnings.push(...format.warnings(expanded));
  warnings.push(...sizeWarnings(context.purpose, userData.length));
  return { userData, format: context.format, extraUnits, extraFiles, warnings };
}

/** Ubuntu, Debian, openSUSE: cloud-init images; the script for images without it. */
export const cloudConfigRenderer: Renderer = builtinRenderer(
  ['ubuntu', 'debian', 'opensuse'],
  ['cloud-config', 'script'],
);

/** Flatcar: Ignition; the script for a Flatcar that is already running. */
export const flatcarRenderer: Renderer = builtinRenderer(['flatcar'], ['ignition', 'script']);

/** Any systemd Linux: the script; cloud-config when the image has cloud-init. */
export const genericRenderer: Renderer = builtinRenderer(['generic'], ['script', 'cloud-config']);

export const BUILTIN_RENDERERS: readonly Renderer[] = [
  cloudConfigRenderer,
  flatcarRenderer,
  genericRenderer,
];
