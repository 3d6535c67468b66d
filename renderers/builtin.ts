/**
 * The built-in renderers: one per family of OS, each offering the formats that OS can boot with.
 * They share one pipeline: guard → OS profile (expand) → format → optional gzip → size warnings.
 */
import { gzipSync } from 'node:zlib';
import { fieldError, ValidationError } from '../api/field-error.js';
import type { ResolvedConfig } from '../api/resolved.js';
import type { Format } from '../api/schema.js';
import { renderCloudConfig } from './cloud-config.js';
import { sizeWarnings } from './common.js';
import { assertRenderable } from './guard.js';
import { ignitionWarnings, renderIgnition } from './ignition.js';
import { expand, type OsProfile, PROFILES } from './profiles.js';
import { renderScript } from './script.js';
import type { RenderContext, RenderResult, Renderer } from './types.js';

/**
 * The text of one format for a config that is already expanded. `encodings` collects, per file
 * path, how its content was carried (text, b64, gz+b64, data URL…), for `oscar render --explain`.
 */
export function renderFormat(
  format: Format,
  config: ResolvedConfig,
  context: RenderContext,
  encodings?: Map<string, string>,
): Buffer {
  switch (format) {
    case 'cloud-config':
      return renderCloudConfig(config, context, encodings);
    case 'ignition':
      return renderIgnition(config, context, encodings);
    case 'script':
      return renderScript(config, context, encodings);
  }
}

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
  let userData = renderFormat(context.format, expanded, context);
  if (context.gzip) {
    if (context.format === 'cloud-config') {
      // cloud-init recognises gzip user data by its magic bytes; mtime 0 keeps output stable
      userData = gzipSync(userData, { level: 9 });
    } else {
      warnings.push(
        `gzip applies to cloud-config only; the ${context.format} output is not compressed`,
      );
    }
  }
  if (context.format === 'ignition') warnings.push(...ignitionWarnings(expanded));
  if (context.format === 'ignition' && expanded.packages.length > 0) {
    warnings.push(
      `Ignition cannot install packages; ${expanded.packages.map((p) => p.name).join(', ')} will not be installed`,
    );
  }
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
