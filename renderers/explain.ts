/**
 * What each declared (or profile-added) file, unit and package became in a rendering: the rows
 * behind `oscar render --explain`. Pure; it re-runs the format with an encoding collector.
 */
import { formatBytes } from '../api/bytes.js';
import type { ResolvedConfig } from '../api/resolved.js';
import { dropInPath, formatMode, packageSpec, unitPath } from '../api/resolved.js';
import { FORMATS } from './formats.js';
import { memoInstallKey, planUnits } from './common.js';
import { enablement } from '../api/systemd/enablement.js';
import { expand } from './profiles.js';
import type { RenderContext } from './types.js';

export interface ExplainRow {
  kind: 'file' | 'unit' | 'drop-in' | 'package';
  name: string;
  /** "declared" or "profile" (added by the OS profile or spec.cri). */
  origin: 'declared' | 'profile';
  became: string;
}

export function explain(config: ResolvedConfig, context: RenderContext): ExplainRow[] {
  const { config: expanded, extraFiles, extraUnits } = expand(config);
  const encodings = new Map<string, string>();
  const format = FORMATS[context.format];
  format.render(expanded, context, encodings);
  const plan = planUnits(expanded.units);
  const addedFiles = new Set(extraFiles.map((f) => f.path));
  const addedUnits = new Set(extraUnits.map((u) => u.name));
  const declaredUnits = new Map(config.units.map((u) => [u.name, u]));
  const rows: ExplainRow[] = [];

  for (const file of expanded.files) {
    rows.push({
      kind: 'file',
      name: file.path,
      origin: addedFiles.has(file.path) ? 'profile' : 'declared',
      became: `${format.carries(file.path)}, ${encodings.get(file.path) ?? '?'}, ${formatMode(file.mode)} ${file.user}:${file.group}, ${formatBytes(file.content.length)}`,
    });
  }
  for (const unit of expanded.units) {
    const actions: string[] = [];
    if (unit.content !== undefined) actions.push(`written to ${unitPath(unit.name)}`);
    else if (!unit.mask) actions.push('ships with the OS');
    if (plan.mask.includes(unit.name)) actions.push('masked');
    const decision = enablement(unit, memoInstallKey);
    if (decision.enable) actions.push('enabled');
    else if (unit.enable && !unit.mask) actions.push(`not enabled (${decision.why})`);
    const command = plan.commands.find((c) => c.unit === unit.name)?.command;
    if (command) {
      actions.push(format.command(command));
    }
    const declared = declaredUnits.get(unit.name);
    rows.push({
      kind: 'unit',
      name: unit.name,
      origin: addedUnits.has(unit.name) && declared === undefined ? 'profile' : 'declared',
      became: actions.join(', '),
    });
    for (const d of unit.dropIns) {
      const own = declared?.dropIns.some((x) => x.name === d.name) ?? false;
      rows.push({
        kind: 'drop-in',
        name: `${unit.name}/${d.name}`,
        origin: own ? 'declared' : 'profile',
        became: `written to ${dropInPath(unit.name, d.name)}`,
      });
    }
  }
  const declaredPackages = new Set(config.packages.map((p) => p.name));
  for (const p of expanded.packages) {
    rows.push({
      kind: 'package',
      name: packageSpec(p),
      origin: declaredPackages.has(p.name) ? 'declared' : 'profile',
      became: format.packages,
    });
  }
  return rows;
}

/** Rows as aligned text columns. */
export function formatExplain(rows: readonly ExplainRow[]): string {
  const table = [
    ['KIND', 'NAME', 'ORIGIN', 'BECAME'],
    ...rows.map((r) => [r.kind, r.name, r.origin, r.became]),
  ];
  const widths = [0, 1, 2].map((i) => Math.max(...table.map((row) => (row[i] ?? '').length)));
  return table
    .map((row) => row.map((cell, i) => (i < 3 ? cell.padEnd(widths[i] ?? 0) : cell)).join('  '))
    .join('\n')
    .concat('\n');
}
