/**
 * Whether moving a node from one config to another disturbs anything running: a digest of every
 * input that decides the agent's unit actions (start, stop, restart, reload, enable, disable,
 * mask) and its package installs. Two configs with the same digest differ only in files no unit
 * reacts to, so the agent writes files and at most runs daemon-reload — the MachineConfig
 * disruption policy "None". A rollout policy with nonDisruptive: Immediate lets such a revision
 * skip the waves (docs/rollouts.md). Conservative by design: any doubt makes the digest differ.
 */
import { createHash } from 'node:crypto';
import { canonicalStringify } from './canonical.js';
import type { ResolvedConfig, ResolvedFile, ResolvedUnit } from './resolved.js';
import { packageSpec } from './resolved.js';

function fileDigest(file: ResolvedFile | undefined): string {
  if (!file) return 'absent';
  return createHash('sha256')
    .update(`${file.mode.toString(8)} ${file.user}:${file.group}\0`)
    .update(file.content)
    .digest('hex');
}

/** What of a unit decides the planner's actions on it. */
function unitDescriptor(
  unit: ResolvedUnit,
  files: ReadonlyMap<string, ResolvedFile>,
): Record<string, unknown> {
  const base: Record<string, unknown> = {
    name: unit.name,
    mask: unit.mask,
    enable: unit.enable,
    command: unit.command,
    onChange: unit.onChange,
  };
  // A masked unit is only masked; a change with onChange none restarts nothing.
  if (unit.mask || unit.onChange === 'none') return base;
  return {
    ...base,
    content: unit.content ?? null,
    dropIns: unit.dropIns.map((d) => [d.name, d.content]),
    filePaths: unit.filePaths.map((p) => [p, fileDigest(files.get(p))]),
  };
}

/** The digest of everything in `config` that makes the agent touch a unit or a package. */
export function disruptionDigest(config: ResolvedConfig): string {
  const files = new Map(config.files.map((f) => [f.path, f]));
  const units = [...config.units]
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map((u) => unitDescriptor(u, files));
  const packages = config.packages.map(packageSpec).sort();
  return createHash('sha256')
    .update(canonicalStringify({ units, packages, type: config.type, cri: config.cri ?? null }))
    .digest('hex');
}
