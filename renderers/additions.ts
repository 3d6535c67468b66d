/**
 * What a node must carry when its renderer added to the config: the declared units and files
 * with the renderer's `extraUnits` (by name) and `extraFiles` (by path) laid over them. The
 * reconcile Secret carries this, so the agent applies exactly what the renderer added — a
 * built-in's OS profile or a provider's webhook alike (one mechanism, one set of features).
 * Packages stay as declared (the agent installs those): a profile's own packages, such as
 * containerd for spec.cri, are installed by the provision user data, which carries them.
 */
import { formatFieldError } from '../api/field-error.js';
import { compare } from '../api/resolve.js';
import type { ResolvedConfig } from '../api/resolved.js';
import { checkResolved } from './guard.js';
import type { RenderResult } from './types.js';

export function withAdditions(
  config: ResolvedConfig,
  result: Pick<RenderResult, 'extraUnits' | 'extraFiles'>,
): ResolvedConfig {
  if (result.extraUnits.length === 0 && result.extraFiles.length === 0) return config;
  const units = new Map(config.units.map((u) => [u.name, u]));
  for (const u of result.extraUnits) units.set(u.name, u);
  const files = new Map(config.files.map((f) => [f.path, f]));
  for (const f of result.extraFiles) files.set(f.path, f);
  return {
    ...config,
    units: [...units.values()].sort((a, b) => compare(a.name, b.name)),
    files: [...files.values()].sort((a, b) => compare(a.path, b.path)),
  };
}

/**
 * The checks a renderer's input gets, run on the config with the renderer's additions: a
 * webhook's extra file with a relative path or a unit with a broken name must not reach the
 * nodes. Problems name the unit or file (an index into the merged lists would mean nothing to
 * the operator), such as `file "etc/x": path: must be absolute`.
 */
export function checkAdditions(merged: ResolvedConfig): string[] {
  return checkResolved(merged).map((e) => {
    const m = /^spec\.(files|units)\[(\d+)\]\.?(.*)$/.exec(e.path);
    if (!m) return formatFieldError(e);
    const i = Number(m[2]);
    const what =
      m[1] === 'files'
        ? `file ${JSON.stringify(merged.files[i]?.path ?? '')}`
        : `unit ${JSON.stringify(merged.units[i]?.name ?? '')}`;
    return `${what}: ${m[3] ? `${m[3]}: ` : ''}${e.message}`;
  });
}
