/**
 * What the node must carry for oscar's drift check, and how a path or unit differs from it.
 * Pure. Built from the last-applied config once per apply: per path the sha256, mode and owner
 * (never the content: the check reads a file and hashes it), per unit its declaration; Ignore
 * paths and units are left out (they are never read, never reported).
 *
 * While an apply is unfinished (it failed and is retried), both what was applied and what it was
 * writing are acceptable: the agent's own half-done work is not drift. A path the unfinished
 * apply removes may also be absent; a unit whose declaration the apply changes is not compared.
 */
import { hash } from 'node:crypto';
import {
  formatMode,
  type ResolvedConfig,
  type ResolvedPackage,
  type ResolvedUnit,
} from '../../api/resolved.js';
import { packageDrift, type InstalledPackage } from '../model/package-drift.js';
import type { WatchedPolicy } from '../model/drift.js';
import { entriesOf } from '../model/entries.js';
import type { Found, ObservedUnit } from '../model/observed.js';

export type { Found } from '../model/observed.js';
import { policiesOf } from '../model/repair.js';
import { unitDrift } from '../model/unit-drift.js';

/** One acceptable state of a path: a file with this hash, mode and owner — or no file. */
export type FileState =
  | { present: true; sha256: string; size: number; mode: number; user: string; group: string }
  | { present: false };

export interface ExpectedPath {
  path: string;
  /** The unit a unit file or drop-in belongs to. */
  unit?: string;
  policy: WatchedPolicy;
  /** The first is what was applied; more while an apply is unfinished. */
  states: FileState[];
}

export interface ExpectedUnit {
  unit: ResolvedUnit;
  policy: WatchedPolicy;
  /** A service whose socket is declared too: inactive is its resting state. */
  socketDeclared: boolean;
}

export interface ExpectedPackage {
  name: string;
  policy: WatchedPolicy;
  /** The first is what was applied; the version an unfinished apply installs is fine too. */
  states: ResolvedPackage[];
}

export interface Expectation {
  paths: ReadonlyMap<string, ExpectedPath>;
  units: ReadonlyMap<string, ExpectedUnit>;
  packages: ReadonlyMap<string, ExpectedPackage>;
}

export const NO_EXPECTATION: Expectation = {
  paths: new Map(),
  units: new Map(),
  packages: new Map(),
};

/** One-shot: no Hash object per file waiting for the GC (an expectation hashes every file). */
export function sha256(content: Uint8Array | string): string {
  return hash('sha256', content);
}

function sameUnit(a: ResolvedUnit, b: ResolvedUnit): boolean {
  return a.mask === b.mask && a.enable === b.enable && a.command === b.command;
}

export function expectationOf(
  applied: ResolvedConfig | undefined,
  unfinished?: ResolvedConfig,
): Expectation {
  if (!applied) return NO_EXPECTATION;
  const policies = policiesOf(applied);
  const pending = unfinished ? entriesOf(unfinished) : undefined;
  const paths = new Map<string, ExpectedPath>();
  for (const e of entriesOf(applied).values()) {
    const policy = policies.paths.get(e.path) ?? 'Report';
    if (policy === 'Ignore') continue;
    const states: FileState[] = [stateOf(e)];
    if (pending) {
      const next = pending.get(e.path);
      states.push(next ? stateOf(next) : { present: false });
    }
    paths.set(e.path, { path: e.path, policy, states, ...(e.unit ? { unit: e.unit } : {}) });
  }
  const declared = new Set(applied.units.map((u) => u.name));
  const changing = new Map(unfinished?.units.map((u) => [u.name, u]));
  const units = new Map<string, ExpectedUnit>();
  for (const u of applied.units) {
    const policy = policies.units.get(u.name) ?? 'Report';
    if (policy === 'Ignore' || u.name.includes('@.')) continue; // a template never runs itself
    const next = changing.get(u.name);
    if (unfinished && (!next || !sameUnit(u, next))) continue;
    const socket = u.name.endsWith('.service') && declared.has(`${u.name.slice(0, -8)}.socket`);
    units.set(u.name, { unit: u, policy, socketDeclared: socket });
  }
  return { paths, units, packages: expectedPackages(applied, unfinished) };
}

function expectedPackages(
  applied: ResolvedConfig,
  unfinished: ResolvedConfig | undefined,
): Map<string, ExpectedPackage> {
  const policies = policiesOf(applied).packages;
  const pending = new Map(unfinished?.packages.map((p) => [p.name, p]));
  const out = new Map<string, ExpectedPackage>();
  for (const p of applied.packages) {
    const policy = policies.get(p.name) ?? 'Report';
    if (policy === 'Ignore') continue;
    const next = pending.get(p.name);
    out.set(p.name, { name: p.name, policy, states: next ? [p, next] : [p] });
  }
  return out;
}

/** How the database's entry differs from every acceptable state, or undefined when one matches. */
export function packageStateDrift(
  e: ExpectedPackage,
  seen: InstalledPackage | undefined,
): Finding | undefined {
  let first: Finding | undefined;
  for (const s of e.states) {
    const d = packageDrift(s, seen);
    if (d === undefined) return undefined;
    first ??= d;
  }
  return first;
}

function stateOf(e: { content: Buffer; mode: number; user: string; group: string }): FileState {
  return {
    present: true,
    sha256: sha256(e.content),
    size: e.content.length,
    mode: e.mode,
    user: e.user,
    group: e.group,
  };
}

/** Names → ids in the node's own /etc/passwd and /etc/group; undefined: owners not compared. */
export interface OwnerIds {
  uid(user: string): number | undefined;
  gid(group: string): number | undefined;
}

/** How one path or unit differs, in the words a report uses. */
export interface Finding {
  /**
   * content, mode, owner, missing, notRegularFile; stopped, failed, disabled, masked, unmasked;
   * for a package: missing, version, broken.
   */
  reason: string;
  expected: string;
  found: string;
}

const short = (hex: string): string => `sha256:${hex.slice(0, 12)}`;

function describeState(s: FileState): string {
  return s.present ? `${short(s.sha256)} ${formatMode(s.mode)} ${s.user}:${s.group}` : 'absent';
}

function differences(s: FileState, found: Found, ids: OwnerIds | undefined): string[] {
  if (!s.present) return found.kind === 'missing' ? [] : ['present'];
  if (found.kind === 'missing') return ['missing'];
  if (found.kind === 'other') return ['notRegularFile'];
  const out: string[] = [];
  if (found.sha256 !== s.sha256) out.push('content');
  if (found.mode !== s.mode) out.push('mode');
  if (ids) {
    const uid = ids.uid(s.user);
    const gid = ids.gid(s.group);
    if ((uid !== undefined && uid !== found.uid) || (gid !== undefined && gid !== found.gid))
      out.push('owner');
  }
  return out;
}

/** How `found` differs from every acceptable state of `e`, or undefined when it matches one. */
export function pathDrift(
  e: ExpectedPath,
  found: Found,
  ids: OwnerIds | undefined,
): Finding | undefined {
  let first: string[] | undefined;
  for (const s of e.states) {
    const d = differences(s, found, ids);
    if (d.length === 0) return undefined;
    first ??= d;
  }
  const applied = e.states[0] ?? { present: false };
  return {
    reason: (first ?? []).join(', '),
    expected: describeState(applied),
    found: describeFound(found, applied, ids),
  };
}

/** In the expected state's words: its owner names when the ids match, numbers when not. */
function describeFound(found: Found, applied: FileState, ids: OwnerIds | undefined): string {
  if (found.kind === 'missing') return 'missing';
  if (found.kind === 'other') return found.type;
  const user =
    applied.present && ids?.uid(applied.user) === found.uid ? applied.user : String(found.uid);
  const group =
    applied.present && ids?.gid(applied.group) === found.gid ? applied.group : String(found.gid);
  return `${short(found.sha256)} ${formatMode(found.mode)} ${user}:${group}`;
}

/** A unit's drift, folded into one finding (reasons joined) for the report. */
export function unitStateDrift(e: ExpectedUnit, seen: ObservedUnit): Finding | undefined {
  const found = unitDrift(e.unit, seen, e.socketDeclared);
  if (found.length === 0) return undefined;
  return {
    reason: found.map((d) => d.reason).join(', '),
    expected: found.map((d) => d.expected).join(', '),
    found: found.map((d) => d.found).join(', '),
  };
}
