/**
 * The executor: brings a root to a desired config. Resumes a journaled plan left by a killed
 * agent, otherwise observes the disk, plans against last-applied, journals the plan and runs it
 * action by action. Last-applied is written only when every action succeeded; on failure the
 * error names the action and, for a unit, carries its last journal lines.
 */
import type { ResolvedConfig } from '../api/resolved.js';
import { replacementReason } from '../api/in-place.js';
import { describeAction, isUnitAction, RESTARTING, type Action } from './model/actions.js';
import { entriesOf, type Entry } from './model/entries.js';
import type { ObservedDisk, UnitStateReader } from './model/observed.js';
import { repairFor, type DriftRepair } from './model/repair.js';
import type { RevertScope } from './model/drift.js';
import { plan } from './plan.js';
import { isAbsolute, relative } from 'node:path';
import { LIMITS } from '../api/constants.js';
import { fieldError } from '../api/field-error.js';
import { InvalidConfigError } from '../api/validate-config.js';
import { Beneath, splitPath } from './disk/beneath.js';
import { checkDesired } from './desired-check.js';
import { readPackageDatabase } from './disk/dpkg.js';
import {
  Accounts,
  commitTemp,
  discardTemp,
  observe,
  removeFile,
  removeStaleTemps,
  syncDirs,
  writeTemp,
  type DirsToSync,
} from './disk/fs.js';
import { mapLimit } from '../api/util.js';
import { Journal, type JournalAction, type PendingApply } from './journal.js';
import { readLastApplied, writeLastApplied, type Desired } from './state.js';
import type { Packages } from './packages.js';
import { SystemdError, type Systemd } from './systemd.js';
import { actionOutsideConfigs } from './journal-scope.js';

export interface ApplyDeps {
  /** "/" on a node; a directory in local mode. */
  root: string;
  stateDir: string;
  systemd: Systemd;
  /** How spec.packages get installed; without it a plan that installs packages fails. */
  packages?: Packages;
  /** Set owners (false in a sandbox where oscar runs unprivileged and compares no owners). */
  owners: boolean;
  /** systemd's view of the declared units, so unit drift enters the plan; absent: not observed. */
  unitStates?: UnitStateReader;
  log?: (message: string) => void;
  now?: () => Date;
}

export interface UnitTouched {
  name: string;
  action: string;
  time: string;
}

export interface ApplyResult {
  checksum: string;
  /** The actions run (the remaining ones, when a journaled plan was resumed). */
  actions: Action[];
  resumed: boolean;
  touchedUnits: UnitTouched[];
}

export class ApplyError extends Error {
  constructor(
    message: string,
    readonly action: string,
    readonly unit: string | undefined,
    readonly journal: string[],
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'ApplyError';
  }
}

/**
 * A desired state this node cannot take in place: another OS type, or another cgroup driver for
 * the container runtime under a running kubelet. Nothing is touched; the node reports it so the
 * provider replaces the machine (in place where possible, replacement where not, one API).
 */
export class ReplacementNeeded extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ReplacementNeeded';
  }
}

/** Throws ReplacementNeeded when `desired` cannot be applied on top of `last`. */
function assertInPlace(last: ResolvedConfig | undefined, desired: ResolvedConfig): void {
  const reason = replacementReason(last, desired);
  if (reason !== undefined) throw new ReplacementNeeded(reason);
}

/** Jobs that run twice if repeated; they are journaled with the unit's invocation token. */
const NOT_IDEMPOTENT: ReadonlySet<string> = new Set([...RESTARTING, 'reload']);

/**
 * The checks every desired state passes before anything is planned, whatever its source: the
 * rules of `oscar validate` (a source has usually run them already: see checkDesired), and no
 * declared path inside this agent's own state directory when it lives in the root.
 */
function assertAcceptable(deps: ApplyDeps, desired: Desired): void {
  checkDesired(desired.config, 'the desired state');
  const inRoot = relative(deps.root, deps.stateDir);
  if (inRoot.startsWith('..') || isAbsolute(inRoot)) return;
  const state = `/${inRoot}`;
  const errors = desired.config.files.flatMap((f, i) =>
    f.path === state || f.path.startsWith(`${state}/`)
      ? [
          fieldError(
            `spec.files[${i}].path`,
            `"${f.path}" is inside ${state}, this agent's own state directory; put the file elsewhere`,
          ),
        ]
      : [],
  );
  if (errors.length > 0) throw new InvalidConfigError('the desired state', errors);
}

export interface ApplyOptions {
  /** A revert of drift: only the Revert policy's drift is repaired (agent/drift/policy.ts). */
  revert?: boolean;
  /**
   * With `revert`: only these paths, units and packages are read and repaired (the drift the
   * monitor found); without it every one the configs declare.
   */
  scope?: RevertScope;
}

/** How the plan repairs drift: an apply's, or a revert's (within its scope). */
function repairOf(desired: ResolvedConfig, opts: ApplyOptions): DriftRepair {
  return opts.revert === true
    ? repairFor(desired, 'revert', opts.scope)
    : repairFor(desired, 'apply');
}

/**
 * The disk, the declared packages in the package manager's database, and the declared units'
 * states when systemd can be asked, for the planner.
 */
async function observeNode(
  deps: ApplyDeps,
  beneath: Beneath,
  accounts: Accounts,
  desired: ResolvedConfig,
  last: ResolvedConfig | undefined,
  scope: RevertScope | undefined,
  readOtherSizesUpTo?: number,
): Promise<ObservedDisk> {
  const observed = await observe(beneath, desired, last, {
    owners: deps.owners,
    accounts,
    ...(readOtherSizesUpTo === undefined ? {} : { readOtherSizesUpTo }),
    ...(scope ? { only: scope.paths } : {}),
  });
  const readPackages = desired.packages.length > 0 && (!scope || scope.packages.size > 0);
  const packages = readPackages ? await readPackageDatabase(beneath) : undefined;
  const withPackages = packages ? { ...observed, packages } : observed;
  if (!deps.unitStates) return withPackages;
  const names = desired.units
    .map((u) => u.name)
    .filter((n) => !n.includes('@.') && (!scope || scope.units.has(n)));
  if (names.length === 0 && scope) return withPackages;
  try {
    return { ...withPackages, units: await deps.unitStates.read(names) };
  } catch (error) {
    // unit drift is then not planned; the apply itself does not depend on it
    deps.log?.(`unit states not read: ${(error as Error).message}`);
    return withPackages;
  }
}

/** Observes, plans and returns the plan without running it (`oscar plan`). */
export async function planFor(
  deps: ApplyDeps,
  desired: Desired,
  opts: ApplyOptions = {},
): Promise<Action[]> {
  return (await observeAndPlan(deps, desired, opts)).actions;
}

/**
 * The plan and the disk it was made against (`oscar plan` diffs the files it would write, so a
 * file of another size is read too, up to the largest file a config can declare).
 */
export async function observeAndPlan(
  deps: ApplyDeps,
  desired: Desired,
  opts: ApplyOptions = {},
): Promise<{ actions: Action[]; observed: ObservedDisk }> {
  assertAcceptable(deps, desired);
  const last = await readLastApplied(deps.stateDir);
  assertInPlace(last?.config, desired.config);
  const beneath = await openRoot(deps);
  try {
    const accounts = await Accounts.load(beneath, deps.root);
    const observed = await observeNode(
      deps,
      beneath,
      accounts,
      desired.config,
      last?.config,
      opts.revert === true ? opts.scope : undefined,
      LIMITS.inlineDataBytes,
    );
    const repair = repairOf(desired.config, opts);
    return { actions: plan(last?.config, desired.config, observed, repair), observed };
  } finally {
    await beneath.close();
  }
}

function openRoot(deps: ApplyDeps): Promise<Beneath> {
  return Beneath.open(deps.root);
}

/** The journaled actions with their contents back, or undefined when the config lacks one. */
function withContents(
  actions: readonly JournalAction[],
  entries: ReadonlyMap<string, Entry>,
): Action[] | undefined {
  const out: Action[] = [];
  for (const action of actions) {
    if (action.kind !== 'writeFile') {
      out.push(action);
      continue;
    }
    const entry = entries.get(action.path);
    if (!entry) return undefined;
    // bytes, mode and owner from the desired config, never from the journal's copy on disk
    const { content, mode, user, group } = entry;
    out.push({ ...action, content, mode, user, group });
  }
  return out;
}

/** The directories a plan writes files in: where a killed apply may have left temp files. */
function writtenDirs(actions: readonly JournalAction[]): string[] {
  return actions.flatMap((a) => (a.kind === 'writeFile' ? [splitPath(a.path)[0]] : []));
}

export async function applyDesired(
  deps: ApplyDeps,
  desired: Desired,
  opts: ApplyOptions = {},
): Promise<ApplyResult> {
  assertAcceptable(deps, desired);
  const beneath = await openRoot(deps);
  try {
    return await applyBeneath(deps, beneath, desired, opts);
  } finally {
    await beneath.close();
  }
}

async function applyBeneath(
  deps: ApplyDeps,
  beneath: Beneath,
  desired: Desired,
  opts: ApplyOptions,
): Promise<ApplyResult> {
  const log = deps.log ?? (() => undefined);
  const accounts = await Accounts.load(beneath, deps.root);
  const pending = await Journal.read(deps.stateDir, log);
  if (pending) {
    // a killed apply may have left temp files where it was writing
    const stale = await removeStaleTemps(beneath, writtenDirs(pending.actions));
    if (stale > 0) log(`removed ${stale} temp file(s) an interrupted apply left`);
  }
  const work =
    (pending && (await resumeWork(deps, desired, pending, log))) ??
    (await planWork(deps, beneath, accounts, desired, opts, pending, log));
  if (!('journal' in work)) return work; // nothing to do
  const { actions, journal, done } = work;
  try {
    const touchedUnits = await runWork(deps, beneath, accounts, work, log);
    // a revert applies last-applied itself: its 2 MB at 10,000 files are not written again
    if (opts.revert !== true) await writeLastApplied(deps.stateDir, desired.bytes, desired.config);
    await journal.finish();
    return {
      checksum: desired.checksum,
      actions: actions.filter((_, i) => !done.has(i)),
      resumed: work.resumed,
      touchedUnits,
    };
  } finally {
    await journal.close();
  }
}

/** What an apply runs: its actions, its journal, and what an interrupted run already did. */
interface Work {
  actions: Action[];
  journal: Journal;
  done: Set<number>;
  begun: Map<number, string>;
  resumed: boolean;
}

/**
 * An interrupted apply of this same desired state resumes from its journal; undefined when the
 * journal is another state's or names a file the desired config does not have.
 */
async function resumeWork(
  deps: ApplyDeps,
  desired: Desired,
  pending: PendingApply,
  log: (message: string) => void,
): Promise<Work | undefined> {
  if (pending.checksum !== desired.checksum) return undefined;
  const last = await readLastApplied(deps.stateDir);
  const foreign = actionOutsideConfigs(pending.actions, desired.config, last?.config);
  if (foreign) {
    log(
      `the journal holds ${foreign}, which neither the desired nor the last applied config declares: planning afresh`,
    );
    return undefined;
  }
  // once: not per journaled write (1,000² on resume)
  const actions = withContents(pending.actions, entriesOf(desired.config));
  if (!actions) {
    log('the journal names a file the desired config does not have: planning afresh');
    return undefined;
  }
  const journal = await Journal.resume(deps.stateDir, pending);
  const { done, begun } = pending;
  log(
    `resuming an interrupted apply of ${desired.checksum.slice(0, 12)}: ${actions.length - done.size} of ${actions.length} action(s) left`,
  );
  return { actions, journal, done, begun, resumed: true };
}

/**
 * A fresh plan from the last applied state and what the node holds; with nothing to do, the
 * result itself (last-applied recorded, an outdated journal closed).
 */
async function planWork(
  deps: ApplyDeps,
  beneath: Beneath,
  accounts: Accounts,
  desired: Desired,
  opts: ApplyOptions,
  pending: PendingApply | undefined,
  log: (message: string) => void,
): Promise<Work | ApplyResult> {
  if (pending && pending.checksum !== desired.checksum)
    log(
      `dropping an interrupted apply of ${pending.checksum.slice(0, 12)}: the desired config changed`,
    );
  const last = await readLastApplied(deps.stateDir);
  assertInPlace(last?.config, desired.config);
  const scope = opts.revert === true ? opts.scope : undefined;
  const observed = await observeNode(deps, beneath, accounts, desired.config, last?.config, scope);
  const repair = repairOf(desired.config, opts);
  const actions = plan(last?.config, desired.config, observed, repair);
  if (actions.length === 0) {
    if (last?.checksum !== desired.checksum)
      await writeLastApplied(deps.stateDir, desired.bytes, desired.config);
    if (pending) await (await Journal.resume(deps.stateDir, pending)).finish();
    return { checksum: desired.checksum, actions, resumed: false, touchedUnits: [] };
  }
  const journal = await Journal.start(deps.stateDir, desired.checksum, actions);
  return { actions, journal, done: new Set(), begun: new Map(), resumed: false };
}

/** Unit actions that (re)start or stop a unit: the ones the health checks watch after. */
const TOUCHING = new Set(['start', 'restart', 'tryRestart', 'reload', 'stopStart', 'stop']);

/**
 * Runs the actions not done yet, in order: consecutive writes in batches, every other action
 * alone and journaled. Returns the units it started, restarted or stopped.
 */
async function runWork(
  deps: ApplyDeps,
  beneath: Beneath,
  accountsAtStart: Accounts,
  { actions, journal, done, begun }: Work,
  log: (message: string) => void,
): Promise<UnitTouched[]> {
  let accounts = accountsAtStart;
  const touchedUnits: UnitTouched[] = [];
  // Renames are made durable per directory, once, before a unit job reads them and before
  // last-applied is written (a SIGKILL needs no fsync at all; a power cut needs these).
  const dirsToSync: DirsToSync = new Map();
  const now = deps.now ?? (() => new Date());
  let next = 0; // the first action a batch of writes has not covered
  for (const [i, action] of actions.entries()) {
    if (done.has(i) || i < next) continue;
    if (action.kind === 'writeFile') {
      const batch = writeBatchFrom(actions, i, done);
      next = batch.next;
      await writeBatch(deps, beneath, accounts, journal, actions, batch.indexes, dirsToSync);
      continue;
    }
    try {
      if (isUnitAction(action) || action.kind === 'daemonReload') await syncDirs(dirsToSync);
      await runAction(deps, beneath, journal, i, action, begun.get(i), log, dirsToSync);
    } catch (error) {
      throw await toApplyError(deps.systemd, action, error);
    }
    await journal.done(i);
    // the users and groups a package created own the files written after it
    if (action.kind === 'installPackages') accounts = await Accounts.load(beneath, deps.root);
    if (isUnitAction(action) && TOUCHING.has(action.kind)) {
      touchedUnits.push({ name: action.unit, action: action.kind, time: now().toISOString() });
    }
  }
  await syncDirs(dirsToSync);
  return touchedUnits;
}

/** Consecutive pending writes from action i go in one batch (see writeBatch). */
function writeBatchFrom(
  actions: readonly Action[],
  i: number,
  done: ReadonlySet<number>,
): { indexes: number[]; next: number } {
  const indexes: number[] = [];
  let j = i;
  for (; j < actions.length && indexes.length < WRITE_BATCH; j++) {
    if (actions[j]?.kind !== 'writeFile') break;
    if (!done.has(j)) indexes.push(j);
  }
  return { indexes, next: j };
}

/** Pending writes per batch: enough to keep the thread pool busy, few temp files at a time. */
const WRITE_BATCH = 64;

/**
 * A run of writes, each still atomic and durable before it shows: first every file of the batch is
 * written, owned, chmod-ed and fsync-ed to its own temp file (several at once: the fsyncs overlap),
 * then, in plan order, each temp file is renamed over its target and the action journaled done —
 * the same rename-after-fsync and done-after-rename order as one write at a time. A kill leaves
 * old or new files and at most some temp files, which the resumed apply removes and writes again.
 * On a failed write the ones before it are committed, the temp files after it removed, and its
 * error thrown.
 */
async function writeBatch(
  deps: ApplyDeps,
  beneath: Beneath,
  accounts: Accounts,
  journal: Journal,
  actions: readonly Action[],
  batch: readonly number[],
  dirsToSync: DirsToSync,
): Promise<void> {
  const writes = batch.map((i) => {
    const a = actions[i];
    if (a?.kind !== 'writeFile') throw new Error(`action ${String(i)} is not a write`);
    return { i, action: a };
  });
  const temps = await mapLimit(writes, 8, async ({ action }) => {
    try {
      const owner = deps.owners
        ? { uid: accounts.uid(action.user), gid: accounts.gid(action.group) }
        : undefined;
      return {
        ok: true as const,
        temp: await writeTemp(beneath, action.path, action.content, action.mode, owner),
      };
    } catch (error) {
      return { ok: false as const, error };
    }
  });
  for (const [k, { i, action }] of writes.entries()) {
    const t = temps[k];
    try {
      if (!t) throw new Error('not written');
      if (!t.ok) throw t.error instanceof Error ? t.error : new Error(String(t.error));
      await commitTemp(t.temp, dirsToSync);
    } catch (error) {
      const later = temps.slice(k + 1).flatMap((r) => (r.ok ? [r.temp] : []));
      await Promise.all(later.map(discardTemp));
      throw await toApplyError(deps.systemd, action, error);
    }
    await journal.done(i);
  }
}

async function runAction(
  deps: ApplyDeps,
  beneath: Beneath,
  journal: Journal,
  index: number,
  action: Action,
  begunToken: string | undefined,
  log: (message: string) => void,
  dirsToSync: DirsToSync,
): Promise<void> {
  switch (action.kind) {
    case 'writeFile': // in batches: writeBatch
      throw new Error(`${describeAction(action)}: writes go through writeBatch`);
    case 'removeFile': {
      const left = await removeFile(beneath, action.path, dirsToSync);
      if (left !== undefined) log(`${describeAction(action)}: ${left}`);
      return;
    }
    case 'daemonReload':
      await deps.systemd.daemonReload();
      return;
    case 'installPackages':
      if (!deps.packages) throw new Error('no package manager was given to this agent');
      await deps.packages.install(action.packages, log);
      return;
    case 'enable':
    case 'disable':
    case 'mask':
    case 'unmask':
      await deps.systemd.unitFile(action.kind, action.unit);
      return;
    default: {
      if (NOT_IDEMPOTENT.has(action.kind)) {
        const token = await deps.systemd.invocation(action.unit);
        if (begunToken !== undefined && begunToken !== token) {
          log(
            `${describeAction(action)}: already done before the interruption (invocation changed)`,
          );
          return;
        }
        if (begunToken === undefined) await journal.begin(index, token);
      }
      await deps.systemd.job(action.kind, action.unit);
    }
  }
}

async function toApplyError(systemd: Systemd, action: Action, error: unknown): Promise<ApplyError> {
  const unit = isUnitAction(action)
    ? action.unit
    : error instanceof SystemdError
      ? error.unit
      : undefined;
  let lines: string[] = [];
  if (unit !== undefined) lines = await systemd.journal(unit, 20).catch(() => []);
  const message = `${describeAction(action)} failed: ${(error as Error).message}`;
  return new ApplyError(message, describeAction(action), unit, lines, { cause: error });
}

export type { PendingApply };
