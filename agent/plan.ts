/**
 * The planner: (what oscar last applied, what is desired now, what is on disk) → the ordered
 * list of actions that brings the node to the desired state, each with a reason a person can
 * read. Pure: no I/O, no clock. The executor (agent/apply.ts) runs the actions; `oscar plan`
 * prints them.
 *
 * Rules (docs/agent.md explains them for operators), each a function in RULES below:
 * - writeChangedPaths: a file, unit file or drop-in is written when it is new, differs from what
 *   was last applied, or differs on disk (drift is repaired);
 * - removeAbandonedPaths: it is removed only if oscar wrote it before;
 * - releaseDepartedUnits: a unit that left the config is unmasked (oscar masked it), stopped and
 *   disabled (oscar wrote it), or try-restarted (oscar only added drop-ins);
 * - maskAndEnable: masking and enablement follow the declaration;
 * - runChangedUnits: a unit whose content, drop-ins or any file in its filePaths changed gets its
 *   onChange (restart, reload, stopStart, none); a unit that did not change is never touched; a
 *   new unit is started when it is enabled and its command is start/restart;
 * - repairUnitDrift: drift enters as observed state, and `repair` (agent/model/repair.ts) says
 *   which of it this plan puts back: a unit whose declaration did not change but whose state
 *   drifted (stopped, failed, disabled, masked) gets the start, enable, unmask or mask that puts
 *   it back — each with the drift as its reason (a file that differs on disk is written again by
 *   writeChangedPaths, unless its policy is Ignore);
 * - restartThroughSockets: a socket-activated service (x.socket and x.service both declared) is
 *   restarted through its socket: the service is stopped and the socket restarted, so the next
 *   connection starts the new version and no connection is refused.
 * And in how the steps are ordered (plan()):
 * - `daemon-reload` runs only when a unit file or drop-in was written or removed;
 * - packages that are new or whose version changed are installed after the files, unit files and
 *   drop-ins owned by root or by numeric ids (an apt source and its keyring must be in place) and
 *   before the files owned by other user or group names (a package may create the user): the
 *   order cloud-init and the rendered script follow too; a package that leaves the config is not
 *   removed; a declared package the package manager's database shows missing, at another
 *   version or half-installed is installed again when `repair` allows (drift);
 * - a template unit (name@.service) is written, enabled (only with DefaultInstance=), masked and
 *   disabled, never started, stopped or restarted — systemd refuses that; its declared instances
 *   are, and a change to the template counts as a change to each of them.
 */
import { compare } from '../api/resolve.js';
import type { ResolvedConfig, ResolvedPackage, ResolvedUnit } from '../api/resolved.js';
import { formatMode, writtenAfterPackages } from '../api/resolved.js';
import { enablability } from '../api/systemd/enablement.js';
import { RESTARTING, type Action } from './model/actions.js';
import { entriesOf, type Entry } from './model/entries.js';
import type { ObservedDisk, ObservedFile } from './model/observed.js';
import { REPAIR_ALL, type DriftRepair } from './model/repair.js';
import { describeUnitDrift, isUp, unitDrift } from './model/unit-drift.js';
import { packageDrift } from './model/package-drift.js';

// The planner's vocabulary lives on the ground floor (agent/model/); `oscar plan` and the tests
// read it from here too.
export {
  describeAction,
  formatPlan,
  isUnitAction,
  RESTARTING,
  restartedUnits,
  type Action,
  type UnitAction,
  type UnitActionKind,
} from './model/actions.js';
export { entriesOf, type Entry } from './model/entries.js';
export type { ObservedDisk, ObservedFile } from './model/observed.js';
export { REPAIR_ALL } from './model/repair.js';

/** Why an entry must be written, or undefined when disk and last-applied both match. */
function writeReason(
  entry: Entry,
  last: Entry | undefined,
  seen: ObservedFile | undefined,
  repair: DriftRepair,
): string | undefined {
  if (!last) return seen ? 'new (replaces the file on disk)' : 'new';
  // The common case — nothing changed, nothing drifted — allocates nothing.
  const contentChanged = last.content !== entry.content && !last.content.equals(entry.content);
  const ownerChanged = last.user !== entry.user || last.group !== entry.group;
  if (contentChanged || last.mode !== entry.mode || ownerChanged) {
    const changes: string[] = [];
    if (contentChanged) changes.push('content changed');
    if (last.mode !== entry.mode)
      changes.push(`mode ${formatMode(last.mode)} → ${formatMode(entry.mode)}`);
    if (ownerChanged)
      changes.push(`owner ${last.user}:${last.group} → ${entry.user}:${entry.group}`);
    return changes.join(', ');
  }
  if (!repair.path(entry.path)) return undefined; // its drift is not this plan's to repair
  if (!seen) return 'drift: missing on disk';
  const contentDrift = seen.content === undefined || !seen.content.equals(entry.content);
  const ownerDrift =
    (seen.user !== undefined && seen.user !== entry.user) ||
    (seen.group !== undefined && seen.group !== entry.group);
  if (!contentDrift && seen.mode === entry.mode && !ownerDrift) return undefined;
  const drift: string[] = [];
  if (contentDrift) drift.push('content');
  if (seen.mode !== entry.mode) drift.push(`mode ${formatMode(seen.mode)}`);
  if (ownerDrift) drift.push(`owner ${seen.user ?? '?'}:${seen.group ?? '?'}`);
  return `drift on disk: ${drift.join(', ')} differ`;
}

function byName<T extends { name: string }>(units: readonly T[]): Map<string, T> {
  return new Map(units.map((u) => [u.name, u]));
}

/** "x.socket" → "x.service"; any other name is returned unchanged. */
function serviceOf(unit: string): string {
  return unit.endsWith('.socket') ? `${unit.slice(0, -'.socket'.length)}.service` : unit;
}

/** A unit that is wanted running: not masked, enabled, command start or restart. */
function wantsRunning(u: ResolvedUnit): boolean {
  return !u.mask && u.enable && u.command !== 'stop';
}

/** "x.service" → "x.socket" when a socket of that name is declared too (not for templates). */
function socketOf(service: string, desired: ReadonlyMap<string, ResolvedUnit>): string | undefined {
  if (!service.endsWith('.service') || service.includes('@')) return undefined;
  const socket = `${service.slice(0, -'.service'.length)}.socket`;
  return desired.has(socket) ? socket : undefined;
}

/** "getty@.service" → true; instances ("getty@tty1.service") and plain units → false. */
export function isTemplate(name: string): boolean {
  const at = name.indexOf('@');
  return at > 0 && name.lastIndexOf('.') === at + 1;
}

/** "getty@tty1.service" → "getty@.service"; undefined for anything but an instance. */
export function templateOf(name: string): string | undefined {
  const at = name.indexOf('@');
  const dot = name.lastIndexOf('.');
  if (at <= 0 || dot <= at + 1) return undefined;
  return `${name.slice(0, at + 1)}${name.slice(dot)}`;
}

/** Whether `systemctl enable` can do anything with the unit: the renderers' own decision. */
function enablable(u: ResolvedUnit): boolean {
  return enablability(u).enable;
}

const NONE: readonly string[] = [];

/** The unit's filePaths (now or when last applied) that were written or removed, each once. */
function changedFilePaths(
  u: ResolvedUnit,
  lu: ResolvedUnit | undefined,
  touched: ReadonlySet<string>,
): readonly string[] {
  const out: string[] = [];
  for (const p of u.filePaths) if (touched.has(p) && !out.includes(p)) out.push(p);
  for (const p of lu?.filePaths ?? NONE) if (touched.has(p) && !out.includes(p)) out.push(p);
  return out;
}

/**
 * The install for packages that are new or pinned to another version, if any, and for those
 * the package manager's database shows drifted (missing, another version, half-installed) when
 * `repair` allows it.
 */
function packageInstall(
  last: readonly ResolvedPackage[],
  want: readonly ResolvedPackage[],
  observed: ObservedDisk,
  repair: DriftRepair,
): Action[] {
  const before = new Map(last.map((p) => [p.name, p]));
  const install: ResolvedPackage[] = [];
  const why: string[] = [];
  for (const p of want) {
    const was = before.get(p.name);
    const drift =
      observed.packages && repair.package(p.name)
        ? packageDrift(p, observed.packages.get(p.name))
        : undefined;
    if (!was) {
      install.push(p);
      why.push(`${p.name} new`);
    } else if (was.version !== p.version) {
      install.push(p);
      why.push(`${p.name} ${was.version ?? 'any version'} → ${p.version ?? 'any version'}`);
    } else if (drift) {
      install.push(p);
      why.push(`${p.name} drifted: ${drift.found}, expected ${drift.expected}`);
    }
  }
  return install.length === 0
    ? []
    : [{ kind: 'installPackages', packages: install, reason: why.join(', ') }];
}

/** The unit's declaration is the same as when it was applied: only then is its state drift. */
function settled(u: ResolvedUnit, lu: ResolvedUnit | undefined): lu is ResolvedUnit {
  return (
    lu !== undefined && u.mask === lu.mask && u.enable === lu.enable && u.command === lu.command
  );
}

/** Actions that leave a unit running, whatever state it was in. */
const STARTS: ReadonlySet<string> = new Set(['start', 'restart', 'stopStart', 'reload']);

/** What a plan is made from: the three inputs, indexed once. */
interface PlanInput {
  readonly desired: ResolvedConfig;
  readonly lastApplied: ResolvedConfig | undefined;
  readonly observed: ObservedDisk;
  readonly repair: DriftRepair;
  readonly lastEntries: ReadonlyMap<string, Entry>;
  readonly wantEntries: ReadonlyMap<string, Entry>;
  readonly lastUnits: ReadonlyMap<string, ResolvedUnit>;
  readonly wantUnits: ReadonlyMap<string, ResolvedUnit>;
}

/** The plan while the rules write it: one list per step, in the order the steps run. */
interface Draft {
  /** unmask, stop and disable before files change */
  readonly before: Action[];
  readonly writes: Action[];
  readonly unitWrites: Action[];
  /** owned by names a package may create: after the install */
  readonly deferredWrites: Action[];
  readonly removes: Action[];
  /** after daemon-reload */
  readonly enablement: Action[];
  /** per unit, after enablement */
  readonly runtime: Map<string, Action[]>;
  /** paths written or removed */
  readonly touched: Set<string>;
  /** units whose unit file or drop-ins were touched */
  readonly touchedUnits: Set<string>;
  /** services restarted through their socket */
  readonly viaSocket: Set<string>;
}

/** One rule of the file header: reads the inputs, adds its actions to the draft. */
type Rule = (input: PlanInput, draft: Draft) => void;

function addRuntime(draft: Draft, unit: string, action: Action): void {
  draft.runtime.set(unit, [...(draft.runtime.get(unit) ?? []), action]);
}

const sortedEntries = (m: ReadonlyMap<string, Entry>): Entry[] =>
  [...m.values()].sort((a, b) => compare(a.path, b.path));
const sortedUnits = (m: ReadonlyMap<string, ResolvedUnit>): ResolvedUnit[] =>
  [...m.values()].sort((a, b) => compare(a.name, b.name));

/**
 * A file, unit file or drop-in is written when it is new, differs from what was last applied,
 * or differs on disk (drift is repaired). Files come first: what is written and removed decides
 * which units changed.
 */
const writeChangedPaths: Rule = (input, draft) => {
  for (const entry of sortedEntries(input.wantEntries)) {
    const reason = writeReason(
      entry,
      input.lastEntries.get(entry.path),
      input.observed.files.get(entry.path),
      input.repair,
    );
    if (reason === undefined) continue;
    draft.touched.add(entry.path);
    if (entry.unit !== undefined) draft.touchedUnits.add(entry.unit);
    const action: Action = {
      kind: 'writeFile',
      path: entry.path,
      content: entry.content,
      mode: entry.mode,
      user: entry.user,
      group: entry.group,
      reason,
    };
    if (entry.unit !== undefined) action.unit = entry.unit;
    (entry.unit !== undefined
      ? draft.unitWrites
      : writtenAfterPackages(entry)
        ? draft.deferredWrites
        : draft.writes
    ).push(action);
  }
};

/** A path is removed only if oscar wrote it before (it was in the last-applied config). */
const removeAbandonedPaths: Rule = (input, draft) => {
  for (const entry of sortedEntries(input.lastEntries)) {
    if (input.wantEntries.has(entry.path)) continue;
    draft.touched.add(entry.path); // gone from the config: a change even if already gone from disk
    if (entry.unit !== undefined) draft.touchedUnits.add(entry.unit);
    if (!input.observed.files.has(entry.path)) continue;
    const action: Action = {
      kind: 'removeFile',
      path: entry.path,
      reason: 'no longer in the config (oscar wrote it)',
    };
    if (entry.unit !== undefined) action.unit = entry.unit;
    draft.removes.push(action);
  }
};

/**
 * A unit that left the config is unmasked (oscar masked it), stopped and disabled (oscar wrote
 * it), or try-restarted back onto its own config (an OS unit oscar only changed by drop-ins).
 */
const releaseDepartedUnits: Rule = (input, draft) => {
  // An instance (name@x.service) runs from its template's unit file: when oscar wrote that, the
  // instance is oscar's as much as a unit with content.
  const fromOscarTemplate = (name: string): boolean => {
    const template = templateOf(name);
    const t = template === undefined ? undefined : input.lastUnits.get(template);
    return t?.content !== undefined && !t.mask;
  };
  for (const lu of sortedUnits(input.lastUnits)) {
    if (input.wantUnits.has(lu.name)) continue;
    if (lu.mask) {
      draft.before.push({
        kind: 'unmask',
        unit: lu.name,
        reason: 'no longer in the config (oscar masked it)',
      });
    } else if (lu.content !== undefined || fromOscarTemplate(lu.name)) {
      // a template has no unit to stop: its instances are units of their own
      if (!isTemplate(lu.name))
        draft.before.push({ kind: 'stop', unit: lu.name, reason: 'removed from the config' });
      if (lu.enable && enablable(lu))
        draft.before.push({ kind: 'disable', unit: lu.name, reason: 'removed from the config' });
    } else if (lu.dropIns.length > 0 && !isTemplate(lu.name)) {
      addRuntime(draft, lu.name, {
        kind: 'tryRestart',
        unit: lu.name,
        reason: "oscar's drop-ins were removed",
      });
    }
  }
};

/**
 * Masking and enablement follow the declaration: a unit newly masked is stopped, disabled and
 * masked; unmasked when the mask goes; enabled or disabled when `enable` (or a template's
 * DefaultInstance=) changes.
 */
const maskAndEnable: Rule = (input, draft) => {
  for (const u of sortedUnits(input.wantUnits)) {
    const lu = input.lastUnits.get(u.name);
    if (u.mask) {
      if (!lu?.mask) {
        if (!isTemplate(u.name))
          draft.before.push({ kind: 'stop', unit: u.name, reason: 'masked by the config' });
        if (lu?.enable && enablable(lu))
          draft.before.push({ kind: 'disable', unit: u.name, reason: 'masked by the config' });
        draft.enablement.push({
          kind: 'mask',
          unit: u.name,
          reason: lu ? 'mask set' : 'new, masked',
        });
      }
      continue;
    }
    if (lu?.mask) draft.before.push({ kind: 'unmask', unit: u.name, reason: 'mask removed' });
    const canEnable = enablable(u);
    const couldEnable = lu !== undefined && enablable(lu);
    if (u.enable && canEnable && (!lu || !lu.enable || lu.mask || !couldEnable)) {
      draft.enablement.push({ kind: 'enable', unit: u.name, reason: lu ? 'enable set' : 'new' });
    } else if (lu && lu.enable && !lu.mask && couldEnable && (!u.enable || !canEnable)) {
      draft.enablement.push({
        kind: 'disable',
        unit: u.name,
        reason: u.enable ? 'DefaultInstance= removed' : 'enable unset',
      });
    }
  }
};

/** Why a unit changed (its unit file, its drop-ins, its filePaths), or undefined. */
function changeOf(
  u: ResolvedUnit,
  lu: ResolvedUnit | undefined,
  draft: Draft,
): { changed: boolean; why: string } {
  const template = templateOf(u.name);
  const contentChanged =
    draft.touchedUnits.has(u.name) || (template !== undefined && draft.touchedUnits.has(template));
  const changedFiles = draft.touched.size === 0 ? NONE : changedFilePaths(u, lu, draft.touched);
  const why = contentChanged
    ? changedFiles.length > 0
      ? `unit and ${changedFiles.join(', ')} changed`
      : 'unit changed'
    : `${changedFiles.join(', ')} changed`;
  return { changed: contentChanged || changedFiles.length > 0, why };
}

/**
 * A new unit is started when it is enabled and its command is start/restart (so is one unmasked,
 * newly enabled or no longer `command: stop`); `command: stop` stops it. Undefined: the rule
 * does not apply, the unit's change decides.
 */
function startOrStop(
  u: ResolvedUnit,
  lu: ResolvedUnit | undefined,
  changed: boolean,
): Action | null | undefined {
  if (u.command === 'stop') {
    if (lu && lu.command === 'stop' && !lu.mask) return null;
    return { kind: 'stop', unit: u.name, reason: lu ? 'command: stop' : 'new, command: stop' };
  }
  // Enabled now but not before: start it, unless a change restarts it anyway.
  const enabledNow = lu !== undefined && !lu.enable && u.enable;
  const starts =
    !lu || lu.mask || lu.command === 'stop' || (enabledNow && (!changed || u.onChange === 'none'));
  if (!starts) return undefined;
  if (!u.enable) return null;
  const from = !lu
    ? 'new'
    : lu.mask
      ? 'unmasked'
      : lu.command === 'stop'
        ? 'command was stop'
        : 'enable set';
  return {
    kind: u.command === 'restart' ? 'restart' : 'start',
    unit: u.name,
    reason: `${from}, ${enablable(u) ? 'enabled' : 'static'}, command: ${u.command}`,
  };
}

/** A changed unit gets its onChange: restart (try-restart when not wanted running), reload, stopStart. */
function onChangeAction(u: ResolvedUnit, why: string): Action | undefined {
  switch (u.onChange) {
    case 'none':
      return undefined;
    case 'reboot':
      // the change takes effect at the boot the agent's reboot brings (agent/reboot/)
      return undefined;
    case 'reload':
      return { kind: 'reload', unit: u.name, reason: `${why} (onChange: reload)` };
    case 'stopStart':
      return { kind: 'stopStart', unit: u.name, reason: `${why} (onChange: stopStart)` };
    case 'restart': {
      const running = wantsRunning(u);
      return {
        kind: running ? 'restart' : 'tryRestart',
        unit: u.name,
        reason: running ? why : `${why} (not enabled: restarted only if running)`,
      };
    }
  }
}

/**
 * A unit whose content, drop-ins or any file in its filePaths changed gets its onChange; a unit
 * that did not change is never touched. A template is never started, stopped or restarted
 * (systemd refuses): its instances are.
 */
const runChangedUnits: Rule = (input, draft) => {
  for (const u of sortedUnits(input.wantUnits)) {
    if (u.mask || isTemplate(u.name)) continue;
    const lu = input.lastUnits.get(u.name);
    const { changed, why } = changeOf(u, lu, draft);
    const direct = startOrStop(u, lu, changed);
    if (direct !== undefined) {
      if (direct) addRuntime(draft, u.name, direct);
      continue;
    }
    if (!changed) continue;
    const action = onChangeAction(u, why);
    if (action) addRuntime(draft, u.name, action);
  }
};

/**
 * Drift of a unit whose declaration did not change (stopped, failed, disabled, masked,
 * unmasked) gets the start, enable, unmask or mask that puts it back, when `repair` allows.
 */
const repairUnitDrift: Rule = (input, draft) => {
  const observedUnits = input.observed.units;
  if (!observedUnits) return;
  for (const u of sortedUnits(input.wantUnits)) {
    const lu = input.lastUnits.get(u.name);
    const seen = observedUnits.get(u.name);
    if (!seen || !settled(u, lu) || !input.repair.unit(u.name)) continue;
    for (const d of unitDrift(u, seen, socketOf(u.name, input.wantUnits) !== undefined)) {
      const reason = `drift: ${describeUnitDrift(d)}`;
      switch (d.reason) {
        case 'masked':
          draft.before.push({ kind: 'unmask', unit: u.name, reason });
          // a mask hides whether it is still enabled; enabling an enabled unit changes nothing
          if (u.enable) draft.enablement.push({ kind: 'enable', unit: u.name, reason });
          break;
        case 'unmasked':
          if (isUp(seen)) draft.before.push({ kind: 'stop', unit: u.name, reason });
          draft.enablement.push({ kind: 'mask', unit: u.name, reason });
          break;
        case 'disabled':
          draft.enablement.push({ kind: 'enable', unit: u.name, reason });
          break;
        case 'stopped':
        case 'failed':
          if (!(draft.runtime.get(u.name) ?? []).some((a) => STARTS.has(a.kind)))
            addRuntime(draft, u.name, { kind: 'start', unit: u.name, reason });
          break;
      }
    }
  }
};

/**
 * A socket-activated service (x.socket and x.service both declared) is restarted through its
 * socket: a socket cannot be restarted while its service runs, so the service is stopped and the
 * socket restarted; the next connection starts the new version and none is refused.
 */
const restartThroughSockets: Rule = (input, draft) => {
  const { runtime, viaSocket } = draft;
  const restarts = (unit: string): boolean =>
    (runtime.get(unit) ?? []).some((a) => RESTARTING.has(a.kind));
  for (const service of [...runtime.keys(), ...[...runtime.keys()].map(serviceOf)]) {
    const socket = socketOf(service, input.wantUnits);
    if (!socket || viaSocket.has(service)) continue;
    const pair = [input.wantUnits.get(service), input.wantUnits.get(socket)];
    if (pair.some((u) => u === undefined || u.mask || u.command === 'stop')) continue;
    if (!restarts(service) && !restarts(socket)) continue;
    viaSocket.add(service);
    const socketReason = restarts(socket)
      ? (runtime.get(socket)?.[0]?.reason ?? 'changed')
      : `${service} changed`;
    runtime.set(service, [
      {
        kind: 'stop',
        unit: service,
        reason: `restarted through ${socket}: the next connection starts it again`,
      },
    ]);
    runtime.set(socket, [
      { kind: 'restart', unit: socket, reason: `${socketReason} (socket activation)` },
    ]);
  }
};

/** The rules of the file header, in the order they write the draft. A new rule is one line here. */
const RULES: readonly Rule[] = [
  writeChangedPaths,
  removeAbandonedPaths,
  releaseDepartedUnits,
  maskAndEnable,
  runChangedUnits,
  repairUnitDrift,
  restartThroughSockets,
];

/** Runtime actions by unit name; a service restarted through its socket right before it. */
function orderedRuntime({ runtime, viaSocket }: Draft): Action[] {
  const out: Action[] = [];
  for (const unit of [...runtime.keys()].sort(compare)) {
    if (viaSocket.has(unit)) continue; // emitted right before its socket
    const service = serviceOf(unit);
    if (viaSocket.has(service)) out.push(...(runtime.get(service) ?? []));
    out.push(...(runtime.get(unit) ?? []));
  }
  return out;
}

export function plan(
  lastApplied: ResolvedConfig | undefined,
  desired: ResolvedConfig,
  observed: ObservedDisk,
  repair: DriftRepair = REPAIR_ALL,
): Action[] {
  const input: PlanInput = {
    desired,
    lastApplied,
    observed,
    repair,
    lastEntries: entriesOf(lastApplied),
    wantEntries: entriesOf(desired),
    lastUnits: byName(lastApplied?.units ?? []),
    wantUnits: byName(desired.units),
  };
  const draft: Draft = {
    before: [],
    writes: [],
    unitWrites: [],
    deferredWrites: [],
    removes: [],
    enablement: [],
    runtime: new Map(),
    touched: new Set(),
    touchedUnits: new Set(),
    viaSocket: new Set(),
  };
  for (const rule of RULES) rule(input, draft);
  // daemon-reload runs only when a unit file or drop-in was written or removed
  const reload: Action[] =
    draft.touchedUnits.size > 0
      ? [{ kind: 'daemonReload', reason: 'unit files or drop-ins changed' }]
      : [];
  return [
    ...draft.before,
    ...draft.writes,
    ...draft.unitWrites,
    ...packageInstall(lastApplied?.packages ?? [], desired.packages, observed, repair),
    ...draft.deferredWrites,
    ...draft.removes,
    ...reload,
    ...draft.enablement,
    ...orderedRuntime(draft),
  ];
}
