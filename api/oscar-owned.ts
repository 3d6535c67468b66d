/**
 * What oscar itself installs on a node — the agent, its installer, the bootstrap credentials and
 * their two units — is not a config's to write, mask, stop or drop: a reconcile OSC declaring
 * `oscar-agent.service` with `command: stop` would have the agent stop itself for good (systemd
 * does not restart a unit stopped on purpose), a drop-in could rewrite its command line, a file
 * at `/opt/oscar/bin/oscar-agent` would replace it, and a declaration that later leaves the
 * config would have the agent remove its own unit file (it removes what it wrote). An OSC author
 * is root on their own machines and may still do any of that by hand; what oscar refuses is
 * making oscar the tool that cuts a node off from oscar.
 *
 * The provision OSC's bootstrap additions (controller/bootstrap/additions.ts) write exactly these,
 * laid over the config after it is checked, so the renderers' guard does not apply this rule; the
 * OSC's checks (api/deep-validate.ts) and the agent's check of every desired state
 * (agent/desired-check.ts) do.
 */
import { fieldError, type FieldError } from './field-error.js';
import { checkReachesOwnedUnit } from './oscar-reach.js';
import type { ResolvedConfig } from './resolved.js';

/** The files the bootstrap additions write, and the agent's binary their installer puts in place. */
export const OSCAR_OWNED_FILES: ReadonlySet<string> = new Set([
  '/etc/oscar/ca.crt',
  '/etc/oscar/bootstrap-kubeconfig',
  '/opt/oscar/bin/oscar-agent',
  '/opt/oscar/bin/oscar-agent-install',
]);

/** The directories holding them: a file there would stand where they must be. */
const OSCAR_OWNED_DIRS: ReadonlySet<string> = new Set([
  '/etc/oscar',
  '/opt/oscar',
  '/opt/oscar/bin',
]);

/** The units the bootstrap additions install. */
export const OSCAR_OWNED_UNITS: ReadonlySet<string> = new Set([
  'oscar-agent.service',
  'oscar-agent-install.service',
]);

/**
 * systemd also reads the drop-ins of every dash-prefix of a unit's name: for
 * `oscar-agent.service`, `oscar-.service.d/` (systemd.unit(5), "prefix drop-ins"). A drop-in
 * there, or a unit of that name with drop-ins, rewrites oscar's unit as its own drop-in would.
 * By prefix name, the owned units it reaches ("oscar-agent.service and …").
 */
const OSCAR_PREFIX_UNITS: ReadonlyMap<string, string> = (() => {
  const reached = new Map<string, string[]>();
  for (const unit of OSCAR_OWNED_UNITS) {
    const dot = unit.lastIndexOf('.');
    const stem = unit.slice(0, dot);
    for (let i = stem.indexOf('-'); i > 0; i = stem.indexOf('-', i + 1)) {
      const prefix = `${stem.slice(0, i + 1)}${unit.slice(dot)}`;
      reached.set(prefix, [...(reached.get(prefix) ?? []), unit]);
    }
  }
  return new Map([...reached].map(([prefix, units]) => [prefix, units.join(' and ')]));
})();

/**
 * A name on a path that is one of oscar's units or its drop-in directory (its own or a prefix
 * drop-in directory that reaches it), in whichever unit directory (/etc/systemd/system,
 * /run/systemd/system, /usr/lib/systemd/system, a .wants or .requires link directory).
 */
function ownedUnitSegment(path: string): string | undefined {
  for (const name of path.split('/')) {
    const unit = name.endsWith('.d') ? name.slice(0, -2) : name;
    if (OSCAR_OWNED_UNITS.has(unit)) return unit;
    if (name.endsWith('.d') && OSCAR_PREFIX_UNITS.has(unit)) return OSCAR_PREFIX_UNITS.get(unit);
  }
  return undefined;
}

/** A message when `path` is oscar's own, or undefined. */
export function checkOscarOwnedPath(path: string): string | undefined {
  if (OSCAR_OWNED_FILES.has(path)) {
    return `"${path}" is written by oscar's bootstrap (the agent, its installer or its credentials); a config may not replace it: choose another path`;
  }
  if (OSCAR_OWNED_DIRS.has(path)) {
    return `"${path}" is the directory oscar's bootstrap installs into; name a file elsewhere`;
  }
  const unit = ownedUnitSegment(path);
  if (unit !== undefined) {
    return `"${path}" belongs to ${unit}, oscar's own unit; a config may not override it (the agent would be managing itself)`;
  }
  return undefined;
}

/** A message when `name` is one of oscar's units, or undefined. */
export function checkOscarOwnedUnit(name: string): string | undefined {
  const reached = OSCAR_PREFIX_UNITS.get(name);
  if (reached !== undefined) {
    return `${name} is a prefix of ${reached}, oscar's own unit: systemd reads ${name}.d/ as drop-ins of ${reached} too, so this unit's drop-ins would rewrite it; choose another name`;
  }
  if (!OSCAR_OWNED_UNITS.has(name)) return undefined;
  return `${name} is oscar's own unit, installed by its bootstrap; a config may not declare, mask, stop or drop it (the agent would be managing itself): remove this entry`;
}

/** Every file and unit of a resolved config that is oscar's own, as field errors. */
export function oscarOwnedErrors(config: ResolvedConfig): FieldError[] {
  const out: FieldError[] = [];
  config.files.forEach((f, i) => {
    const problem = typeof f.path === 'string' ? checkOscarOwnedPath(f.path) : undefined;
    if (problem) out.push(fieldError(`spec.files[${i}].path`, problem));
  });
  config.units.forEach((u, i) => {
    const problem = typeof u.name === 'string' ? checkOscarOwnedUnit(u.name) : undefined;
    if (problem) out.push(fieldError(`spec.units[${i}].name`, problem));
    out.push(...unitTextErrors(u, `spec.units[${i}]`));
  });
  return out;
}

/** A unit's content and drop-ins that would have oscar act on its own units (api/oscar-reach.ts). */
function unitTextErrors(unit: unknown, base: string): FieldError[] {
  const field = (item: unknown, key: string): unknown =>
    typeof item === 'object' && item !== null ? (item as Record<string, unknown>)[key] : undefined;
  const name = field(unit, 'name');
  if (typeof name !== 'string') return [];
  const out: FieldError[] = [];
  const check = (text: unknown, path: string): void => {
    const problem =
      typeof text === 'string' ? checkReachesOwnedUnit(text, name, OSCAR_OWNED_UNITS) : undefined;
    if (problem) out.push(fieldError(path, problem));
  };
  check(field(unit, 'content'), `${base}.content`);
  const dropIns = field(unit, 'dropIns');
  if (Array.isArray(dropIns)) {
    dropIns.forEach((d, j) => {
      check(field(d, 'content'), `${base}.dropIns[${j}].content`);
    });
  }
  return out;
}

/** The same, on an OSC's raw spec (which may also have failed the schema: every access guarded). */
export function oscarOwnedSpecErrors(spec: Record<string, unknown>): FieldError[] {
  const out: FieldError[] = [];
  const items = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
  const field = (item: unknown, key: string): unknown =>
    typeof item === 'object' && item !== null ? (item as Record<string, unknown>)[key] : undefined;
  items(spec.files).forEach((f, i) => {
    const path = field(f, 'path');
    const problem = typeof path === 'string' ? checkOscarOwnedPath(path) : undefined;
    if (problem) out.push(fieldError(`spec.files[${i}].path`, problem));
  });
  items(spec.units).forEach((u, i) => {
    const name = field(u, 'name');
    const problem = typeof name === 'string' ? checkOscarOwnedUnit(name) : undefined;
    if (problem) out.push(fieldError(`spec.units[${i}].name`, problem));
    out.push(...unitTextErrors(u, `spec.units[${i}]`));
  });
  return out;
}
