/**
 * The planner: (what oscar last applied, what is desired now, what is on disk) → the ordered
 * list of actions that brings the node to the desired state, each with a reason a person can
 * read. Pure: no I/O, no clock. The executor (agent/apply.ts) runs the actions; `oscar plan`
 * prints them.
 *
 * Rules (docs/agent.md explains them for operators):
 * - a file, unit file or drop-in is written when it is new, differs from what was last applied,
 *   or differs on disk (drift is repaired); it is removed only if oscar wrote it before;
 * - `daemon-reload` runs only when a unit file or drop-in was written or removed;
 * - a unit whose content, drop-ins or any file in its filePaths changed gets its onChange
 *   (restart, reload, stopStart, none); a unit that did not change is never touched;
 * - a new unit is started when it is enabled and its command is start/restart;
 * - a socket-activated service (x.socket and x.service both declared) is restarted through its
 *   socket: the service is stopped and the socket restarted, so the next connection starts the
 *   new version and no connection is refused;
 * - packages that are new or whose version changed are installed after the files, unit files and
 *   drop-ins owned by root or by numeric ids (an apt source and its keyring must be in place) and
 *   before the files owned by other user or group names (a package may create the user): the
 *   order cloud-init and the rendered script follow too; a package that leaves the config is not
 *   removed;
 * - a template unit (name@.service) is written, enabled (only with DefaultInstance=), masked and
 *   disabled, never started, stopped or restarted — systemd refuses that; its declared instances
 *   are, and a change to the template counts as a change to each of them;
 * - drift enters as observed state, and `repair` (agent/drift/policy.ts) says which of it this
 *   plan puts back: a file that differs on disk is written again (unless its policy is Ignore),
 *   a unit whose declaration did not change but whose state drifted (stopped, failed, disabled,
 *   masked) gets the start, enable, unmask or mask that puts it back — each with the drift as
 *   its reason.
 */
import { compare } from '../api/resolve.js';
import type { ResolvedConfig, ResolvedPackage, ResolvedUnit } from '../api/resolved.js';
import {
  dropInPath,
  formatMode,
  packageSpec,
  unitPath,
  writtenAfterPackages,
} from '../api/resolved.js';
import { enablability } from '../api/systemd/enablement.js';
import type { DriftRepair } from './drift/policy.js';
import { describeUnitDrift, isUp, unitDrift, type ObservedUnit } from './drift/unit-drift.js';

/** A file as the observer found it on disk. `user`/`group` undefined: ownership not compared. */
export interface ObservedFile {
  /** Undefined: not read, since it cannot match (another size, a link, not a regular file). */
  content: Buffer | undefined;
  mode: number;
  user?: string;
  group?: string;
}

/** What is on disk now, for every path of the desired and the last-applied config. */
export interface ObservedDisk {
  /** A path absent from the map does not exist on disk. */
  files: ReadonlyMap<string, ObservedFile>;
  /** What systemd says about declared units; absent (a directory root): no unit is compared. */
  units?: ReadonlyMap<string, ObservedUnit>;
}

/** Every drift may be repaired (what a plan without policies does). */
export const REPAIR_ALL: DriftRepair = { path: () => true, unit: () => true };

export type UnitActionKind =
  | 'unmask'
  | 'mask'
  | 'enable'
  | 'disable'
  | 'start'
  | 'stop'
  | 'restart'
  | 'tryRestart'
  | 'reload'
  | 'stopStart';

export type Action =
  | {
      kind: 'writeFile';
      path: string;
      content: Buffer;
      mode: number;
      user: string;
      group: string;
      /** Set for unit files and drop-ins: the unit they belong to. */
      unit?: string;
      reason: string;
    }
  | { kind: 'removeFile'; path: string; unit?: string; reason: string }
  | { kind: 'installPackages'; packages: ResolvedPackage[]; reason: string }
  | { kind: 'daemonReload'; reason: string }
  | { kind: UnitActionKind; unit: string; reason: string };

export type UnitAction = Extract<Action, { unit: string; kind: UnitActionKind }>;

/** Actions that end the unit's running process and start a new one. */
export const RESTARTING: ReadonlySet<string> = new Set(['restart', 'tryRestart', 'stopStart']);

export function isUnitAction(action: Action): action is UnitAction {
  return (
    action.kind !== 'writeFile' &&
    action.kind !== 'removeFile' &&
    action.kind !== 'daemonReload' &&
    action.kind !== 'installPackages'
  );
}

/** One path oscar manages, whatever declared it. Read-only: a file's entry is its ResolvedFile. */
export interface Entry {
  readonly path: string;
  readonly content: Buffer;
  readonly mode: number;
  readonly user: string;
  readonly group: string;
  /** The unit a unit file or drop-in belongs to. */
  readonly unit?: string;
}

const UNIT_FILE_MODE = 0o644;

/** Every path a config makes oscar write: its files, unit files and drop-ins. */
export function entriesOf(config: ResolvedConfig | undefined): Map<string, Entry> {
  const out = new Map<string, Entry>();
  if (!config) return out;
  // A file is its own entry: no copy (the planner runs on every change and every poll of a
  // 1,000-file node; what it allocates is what the GC pauses for).
  for (const f of config.files) out.set(f.path, f);
  for (const u of config.units) {
    if (u.content !== undefined && !u.mask) {
      const path = unitPath(u.name);
      out.set(path, unitEntry(path, u.content, u.name));
    }
    for (const d of u.dropIns) {
      const path = dropInPath(u.name, d.name);
      out.set(path, unitEntry(path, d.content, u.name));
    }
  }
  return out;
}

function unitEntry(path: string, content: string, unit: string): Entry {
  return {
    path,
    content: Buffer.from(content, 'utf8'),
    mode: UNIT_FILE_MODE,
    user: 'root',
    group: 'root',
    unit,
  };
}

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

/** The install for packages that are new or pinned to another version, if any. */
function packageInstall(
  last: readonly ResolvedPackage[],
  want: readonly ResolvedPackage[],
): Action[] {
  const before = new Map(last.map((p) => [p.name, p]));
  const install: ResolvedPackage[] = [];
  const why: string[] = [];
  for (const p of want) {
    const was = before.get(p.name);
    if (!was) {
      install.push(p);
      why.push(`${p.name} new`);
    } else if (was.version !== p.version) {
      install.push(p);
      why.push(`${p.name} ${was.version ?? 'any version'} → ${p.version ?? 'any version'}`);
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

export function plan(
  lastApplied: ResolvedConfig | undefined,
  desired: ResolvedConfig,
  observed: ObservedDisk,
  repair: DriftRepair = REPAIR_ALL,
): Action[] {
  const lastEntries = entriesOf(lastApplied);
  const wantEntries = entriesOf(desired);
  const lastUnits = byName(lastApplied?.units ?? []);
  const wantUnits = byName(desired.units);

  // Files first: what is written and removed decides which units changed.
  const writes: Action[] = [];
  const unitWrites: Action[] = [];
  const deferredWrites: Action[] = []; // owned by names a package may create: after the install
  const removes: Action[] = [];
  const touched = new Set<string>(); // paths written or removed
  const touchedUnits = new Set<string>(); // units whose unit file or drop-ins were touched
  for (const entry of [...wantEntries.values()].sort((a, b) => compare(a.path, b.path))) {
    const reason = writeReason(
      entry,
      lastEntries.get(entry.path),
      observed.files.get(entry.path),
      repair,
    );
    if (reason === undefined) continue;
    touched.add(entry.path);
    if (entry.unit !== undefined) touchedUnits.add(entry.unit);
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
      ? unitWrites
      : writtenAfterPackages(entry)
        ? deferredWrites
        : writes
    ).push(action);
  }
  for (const entry of [...lastEntries.values()].sort((a, b) => compare(a.path, b.path))) {
    if (wantEntries.has(entry.path)) continue;
    touched.add(entry.path); // gone from the config: counts as a change even if already gone from disk
    if (entry.unit !== undefined) touchedUnits.add(entry.unit);
    if (!observed.files.has(entry.path)) continue;
    const action: Action = {
      kind: 'removeFile',
      path: entry.path,
      reason: 'no longer in the config (oscar wrote it)',
    };
    if (entry.unit !== undefined) action.unit = entry.unit;
    removes.push(action);
  }
  const unitFilesTouched = touchedUnits.size > 0;

  const before: Action[] = []; // unmask, stop and disable before files change
  const enablement: Action[] = []; // after daemon-reload
  const runtime = new Map<string, Action[]>(); // per unit, after enablement
  const addRuntime = (unit: string, action: Action): void => {
    runtime.set(unit, [...(runtime.get(unit) ?? []), action]);
  };

  // An instance (name@x.service) runs from its template's unit file: when oscar wrote that, the
  // instance is oscar's as much as a unit with content.
  const fromOscarTemplate = (name: string): boolean => {
    const template = templateOf(name);
    const t = template === undefined ? undefined : lastUnits.get(template);
    return t?.content !== undefined && !t.mask;
  };

  // Units that left the config.
  for (const lu of [...lastUnits.values()].sort((a, b) => compare(a.name, b.name))) {
    if (wantUnits.has(lu.name)) continue;
    if (lu.mask) {
      before.push({
        kind: 'unmask',
        unit: lu.name,
        reason: 'no longer in the config (oscar masked it)',
      });
    } else if (lu.content !== undefined || fromOscarTemplate(lu.name)) {
      // a template has no unit to stop: its instances are units of their own
      if (!isTemplate(lu.name))
        before.push({ kind: 'stop', unit: lu.name, reason: 'removed from the config' });
      if (lu.enable && enablable(lu))
        before.push({ kind: 'disable', unit: lu.name, reason: 'removed from the config' });
    } else if (lu.dropIns.length > 0 && !isTemplate(lu.name)) {
      // A unit of the OS that oscar only changed through drop-ins: it goes back to its own config.
      addRuntime(lu.name, {
        kind: 'tryRestart',
        unit: lu.name,
        reason: "oscar's drop-ins were removed",
      });
    }
  }

  for (const u of [...wantUnits.values()].sort((a, b) => compare(a.name, b.name))) {
    const lu = lastUnits.get(u.name);
    const template = templateOf(u.name);
    const contentChanged =
      touchedUnits.has(u.name) || (template !== undefined && touchedUnits.has(template));
    const changedFiles = touched.size === 0 ? NONE : changedFilePaths(u, lu, touched);
    const changed = contentChanged || changedFiles.length > 0;
    const why = contentChanged
      ? changedFiles.length > 0
        ? `unit and ${changedFiles.join(', ')} changed`
        : 'unit changed'
      : `${changedFiles.join(', ')} changed`;

    // Masking and enablement.
    if (u.mask) {
      if (!lu?.mask) {
        if (!isTemplate(u.name))
          before.push({ kind: 'stop', unit: u.name, reason: 'masked by the config' });
        if (lu?.enable && enablable(lu))
          before.push({ kind: 'disable', unit: u.name, reason: 'masked by the config' });
        enablement.push({ kind: 'mask', unit: u.name, reason: lu ? 'mask set' : 'new, masked' });
      }
      continue;
    }
    if (lu?.mask) before.push({ kind: 'unmask', unit: u.name, reason: 'mask removed' });
    const canEnable = enablable(u);
    const couldEnable = lu !== undefined && enablable(lu);
    if (u.enable && canEnable && (!lu || !lu.enable || lu.mask || !couldEnable)) {
      enablement.push({ kind: 'enable', unit: u.name, reason: lu ? 'enable set' : 'new' });
    } else if (lu && lu.enable && !lu.mask && couldEnable && (!u.enable || !canEnable)) {
      enablement.push({
        kind: 'disable',
        unit: u.name,
        reason: u.enable ? 'DefaultInstance= removed' : 'enable unset',
      });
    }
    // A template is never started, stopped or restarted (systemd refuses): its instances are.
    if (isTemplate(u.name)) continue;

    // What happens to the running unit.
    if (u.command === 'stop') {
      if (!lu || lu.command !== 'stop' || lu.mask) {
        addRuntime(u.name, {
          kind: 'stop',
          unit: u.name,
          reason: lu ? 'command: stop' : 'new, command: stop',
        });
      }
      continue;
    }
    // Enabled now but not before: start it, unless a change restarts it anyway (below).
    const enabledNow = lu !== undefined && !lu.enable && u.enable;
    if (
      !lu ||
      lu.mask ||
      lu.command === 'stop' ||
      (enabledNow && (!changed || u.onChange === 'none'))
    ) {
      if (u.enable) {
        const from = !lu
          ? 'new'
          : lu.mask
            ? 'unmasked'
            : lu.command === 'stop'
              ? 'command was stop'
              : 'enable set';
        addRuntime(u.name, {
          kind: u.command === 'restart' ? 'restart' : 'start',
          unit: u.name,
          reason: `${from}, ${enablable(u) ? 'enabled' : 'static'}, command: ${u.command}`,
        });
      }
      continue;
    }
    if (!changed) continue;
    const running = wantsRunning(u);
    switch (u.onChange) {
      case 'none':
        break;
      case 'reload':
        addRuntime(u.name, { kind: 'reload', unit: u.name, reason: `${why} (onChange: reload)` });
        break;
      case 'stopStart':
        addRuntime(u.name, {
          kind: 'stopStart',
          unit: u.name,
          reason: `${why} (onChange: stopStart)`,
        });
        break;
      case 'restart':
        addRuntime(u.name, {
          kind: running ? 'restart' : 'tryRestart',
          unit: u.name,
          reason: running ? why : `${why} (not enabled: restarted only if running)`,
        });
        break;
    }
  }

  // Units whose declaration did not change but whose state drifted: put back what drifted.
  if (observed.units) {
    for (const u of [...wantUnits.values()].sort((a, b) => compare(a.name, b.name))) {
      const lu = lastUnits.get(u.name);
      const seen = observed.units.get(u.name);
      if (!seen || !settled(u, lu) || !repair.unit(u.name)) continue;
      for (const d of unitDrift(u, seen, socketOf(u.name, wantUnits) !== undefined)) {
        const reason = `drift: ${describeUnitDrift(d)}`;
        switch (d.reason) {
          case 'masked':
            before.push({ kind: 'unmask', unit: u.name, reason });
            // a mask hides whether it is still enabled; enabling an enabled unit changes nothing
            if (u.enable) enablement.push({ kind: 'enable', unit: u.name, reason });
            break;
          case 'unmasked':
            if (isUp(seen)) before.push({ kind: 'stop', unit: u.name, reason });
            enablement.push({ kind: 'mask', unit: u.name, reason });
            break;
          case 'disabled':
            enablement.push({ kind: 'enable', unit: u.name, reason });
            break;
          case 'stopped':
          case 'failed':
            if (!(runtime.get(u.name) ?? []).some((a) => STARTS.has(a.kind)))
              addRuntime(u.name, { kind: 'start', unit: u.name, reason });
            break;
        }
      }
    }
  }

  // Socket activation: a restarted service goes through its socket. A socket cannot be restarted
  // while its service runs, so the service is stopped first; the next connection starts it again.
  const viaSocket = new Set<string>();
  for (const service of [...runtime.keys(), ...[...runtime.keys()].map(serviceOf)]) {
    const socket = socketOf(service, wantUnits);
    if (!socket || viaSocket.has(service)) continue;
    const pair = [wantUnits.get(service), wantUnits.get(socket)];
    if (pair.some((u) => u === undefined || u.mask || u.command === 'stop')) continue;
    const restarts = (unit: string): boolean =>
      (runtime.get(unit) ?? []).some((a) => RESTARTING.has(a.kind));
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
  const runtimeActions: Action[] = [];
  for (const unit of [...runtime.keys()].sort(compare)) {
    if (viaSocket.has(unit)) continue; // emitted right before its socket
    const service = serviceOf(unit);
    if (viaSocket.has(service)) runtimeActions.push(...(runtime.get(service) ?? []));
    runtimeActions.push(...(runtime.get(unit) ?? []));
  }

  const reload: Action[] = unitFilesTouched
    ? [{ kind: 'daemonReload', reason: 'unit files or drop-ins changed' }]
    : [];
  return [
    ...before,
    ...writes,
    ...unitWrites,
    ...packageInstall(lastApplied?.packages ?? [], desired.packages),
    ...deferredWrites,
    ...removes,
    ...reload,
    ...enablement,
    ...runtimeActions,
  ];
}

/** The units a plan restarts (ends and starts again), for reports and tests. */
export function restartedUnits(actions: readonly Action[]): string[] {
  return [
    ...new Set(
      actions
        .filter((a) => isUnitAction(a) && RESTARTING.has(a.kind))
        .map((a) => (a as UnitAction).unit),
    ),
  ].sort(compare);
}

const VERBS: Record<Action['kind'], string> = {
  writeFile: 'write',
  removeFile: 'remove',
  installPackages: 'install',
  daemonReload: 'daemon-reload',
  unmask: 'unmask',
  mask: 'mask',
  enable: 'enable',
  disable: 'disable',
  start: 'start',
  stop: 'stop',
  restart: 'restart',
  tryRestart: 'try-restart',
  reload: 'reload',
  stopStart: 'stop+start',
};

export function describeAction(a: Action): string {
  switch (a.kind) {
    case 'writeFile':
      return `${VERBS[a.kind]} ${a.path} (${formatMode(a.mode)} ${a.user}:${a.group}, ${a.content.length} B)`;
    case 'removeFile':
      return `${VERBS[a.kind]} ${a.path}`;
    case 'installPackages':
      return `${VERBS[a.kind]} ${a.packages.map(packageSpec).join(' ')}`;
    case 'daemonReload':
      return VERBS[a.kind];
    default:
      return `${VERBS[a.kind]} ${a.unit}`;
  }
}

/** The plan as text, one action a line with its reason. */
export function formatPlan(actions: readonly Action[]): string {
  if (actions.length === 0) return 'nothing to do: the node matches the desired state\n';
  const lines = actions.map(
    (a, i) => `${String(i + 1).padStart(3)}. ${describeAction(a)} — ${a.reason}`,
  );
  const restarted = restartedUnits(actions);
  const summary = `${actions.length} action(s)${restarted.length > 0 ? `; restarts ${restarted.join(', ')}` : '; restarts nothing'}`;
  return `${lines.join('\n')}\n${summary}\n`;
}
