/**
 * Each output format said once: how it is written (render), read back (decode), and explained
 * (`oscar render --explain`), and what it cannot carry. A new format is one entry here; the
 * built-in renderers (./builtin.ts), the explainer (./explain.ts) and the round-trip tests read
 * this table instead of switching on the format's name.
 */
import type { ResolvedConfig } from '../api/resolved.js';
import type { Format, UnitCommand } from '../api/schema.js';
import { renderCloudConfig } from './cloud-config.js';
import { planUnits } from './common.js';
import {
  decodeCloudConfig,
  decodeIgnition,
  decodeScript,
  type Decoded,
  type DecodedFile,
} from './decode.js';
import { IGNITION_MODE_BITS, ignitionWarnings, renderIgnition } from './ignition.js';
import { renderScript } from './script.js';
import type { RenderContext } from './types.js';

export interface FormatSpec {
  /**
   * The text for a config that is already expanded. `encodings` collects, per file path, how its
   * content was carried (text, b64, gz+b64, data URL…), for the explainer.
   */
  render(config: ResolvedConfig, context: RenderContext, encodings?: Map<string, string>): Buffer;
  /** The user data read back: files, unit enablement, masks, commands, packages. */
  decode(userData: Buffer): Decoded;
  /** Where a file travels in it, for the explainer. */
  carries(path: string): string;
  /** What becomes of a unit's start, restart or stop. */
  command(command: UnitCommand): string;
  /** What becomes of a package. */
  packages: string;
  /** The mode bits it keeps. */
  modeBits: number;
  /** It runs unit commands and installs packages (Ignition does neither: units start with boot). */
  runs: boolean;
  /** The whole output may be gzipped (cloud-init recognises gzip user data by its magic bytes). */
  gzip: boolean;
  /** What it will not do for this (expanded) config. */
  warnings(config: ResolvedConfig): string[];
}

const ALL_MODE_BITS = 0o7777;

export const FORMATS: Readonly<Record<Format, FormatSpec>> = {
  'cloud-config': {
    render: renderCloudConfig,
    decode: (userData) => decodeCloudConfig(userData),
    carries: () => 'write_files',
    command: (command) => command,
    packages: 'packages (cloud-init installs it)',
    modeBits: ALL_MODE_BITS,
    runs: true,
    gzip: true,
    warnings: () => [],
  },
  ignition: {
    render: renderIgnition,
    decode: decodeIgnition,
    carries: (path) =>
      path.startsWith('/etc/systemd/system/') ? 'systemd.units' : 'storage.files',
    command: () => 'starts with the boot if enabled',
    packages: 'not installed (Ignition has no packages)',
    modeBits: IGNITION_MODE_BITS,
    runs: false,
    gzip: false,
    warnings: (config) => [
      ...ignitionWarnings(config),
      ...(config.packages.length > 0
        ? [
            `Ignition cannot install packages; ${config.packages.map((p) => p.name).join(', ')} will not be installed`,
          ]
        : []),
    ],
  },
  script: {
    render: renderScript,
    decode: decodeScript,
    carries: () => 'oscar_text/oscar_b64',
    command: (command) => command,
    packages: 'oscar_packages',
    modeBits: ALL_MODE_BITS,
    runs: true,
    gzip: false,
    warnings: () => [],
  },
};

/** The text of one format for a config that is already expanded (see FormatSpec.render). */
export function renderFormat(
  format: Format,
  config: ResolvedConfig,
  context: RenderContext,
  encodings?: Map<string, string>,
): Buffer {
  return FORMATS[format].render(config, context, encodings);
}

export function decode(format: Format, userData: Buffer): Decoded {
  return FORMATS[format].decode(userData);
}

function byPath(a: DecodedFile, b: DecodedFile): number {
  return a.path < b.path ? -1 : a.path > b.path ? 1 : 0;
}

/**
 * What decoding the rendering of `config` (already expanded) must give in `format`. Where a
 * format cannot carry something, its entry says so: Ignition 3.3.0 has no setuid/setgid/sticky
 * bits (the renderer warns), no commands (units start with the boot) and no packages.
 */
export function expectedOutcome(config: ResolvedConfig, format: Format): Decoded {
  const spec = FORMATS[format];
  const plan = planUnits(config.units);
  const files = [...config.files, ...plan.files]
    .map((f) => ({ ...f, mode: f.mode & spec.modeBits }))
    .sort(byPath);
  return {
    files,
    mask: [...plan.mask].sort(),
    enable: [...plan.enable].sort(),
    commands: spec.runs ? plan.commands : [],
    packages: spec.runs ? config.packages.map((p) => ({ ...p })) : [],
  };
}
