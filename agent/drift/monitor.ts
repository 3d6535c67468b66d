/**
 * The drift monitor: notices within a moment when something oscar applied changed on the node,
 * says exactly what, and — for Revert — asks the agent to put it back.
 *
 * Three ways in, one check:
 * - the watcher (inotify on every owned file's inode, on the directories of every owned path and
 *   on systemd's unit state directories) names paths and units that may have changed; after a
 *   short quiet time (debounceMs, at most debounceMaxMs from the first event) they are checked;
 * - the audit, every auditIntervalMs and before every apply, checks everything: events missed,
 *   a restore from backup, changes made while the agent was down;
 * - at start, the same audit.
 * The check reads a path (agent/disk/reader.ts), hashes it and compares it with what was applied
 * (agent/drift/expectation.ts); units through one `systemctl show` (agent/unit-state.ts);
 * declared packages against dpkg's database (agent/disk/dpkg.ts), when its status file changes.
 * The result is a set of drifted items; every change of it goes to the reporters (a Drifted
 * condition, Events, metrics).
 *
 * The agent's own work is never drift: while it applies, the monitor is paused — events only
 * collect paths — and afterwards those paths are checked against what is applied now.
 */
import type { ResolvedConfig } from '../../api/resolved.js';
import { errorFields, type Logger } from '../../log/logger.js';
import { Beneath } from '../disk/beneath.js';
import { mapLimit, sleep } from '../../api/util.js';
import { Accounts } from '../disk/fs.js';
import {
  expectationOf,
  NO_EXPECTATION,
  packageStateDrift,
  pathDrift,
  unitStateDrift,
  type Expectation,
  type Finding,
  type OwnerIds,
} from './expectation.js';
import type {
  ApplyOutcome,
  DriftHooks,
  DriftItem,
  DriftReport,
  DriftTrigger,
  RevertScope,
} from '../model/drift.js';
import type { Found, UnitStateReader } from '../model/observed.js';
import { RevertBackoff } from './policy.js';
import { readFound } from '../disk/reader.js';
import { itemFields } from './report.js';
import { DriftWatcher } from './watcher.js';
import type { InotifyLimits } from './limits.js';
import { readPackageDatabase } from '../disk/dpkg.js';
import type { InstalledPackage } from '../model/package-drift.js';

/** An item whose path, unit or package the expectation still holds (else it is no drift). */
function stillExpected(item: DriftItem, expectation: Expectation): boolean {
  if (item.path !== undefined) return expectation.paths.has(item.path);
  if (item.unit !== undefined) return expectation.units.has(item.unit);
  if (item.package !== undefined) return expectation.packages.has(item.package);
  return true;
}

// The drift vocabulary is the ground floor's (agent/model/drift.ts); callers may name it here too.
export type {
  ApplyOutcome,
  DriftHooks,
  DriftItem,
  DriftReport,
  DriftTrigger,
  RevertScope,
} from '../model/drift.js';

export interface DriftMonitorOptions {
  root: string;
  /** Compare owners (false in a sandbox where oscar runs unprivileged and sets none). */
  owners: boolean;
  /** systemd's unit states; absent (a directory root): units are not checked. */
  units?: UnitStateReader;
  /** Full audit every so often; 0: only at start and before applies. */
  auditIntervalMs: number;
  /**
   * Quiet time after the last event before the paths are checked (an editor's save, `echo >`'s
   * truncate and write, come as several events within a few ms); default 25 ms.
   */
  debounceMs?: number;
  /** The longest a check waits from the first event while events keep coming; default 100 ms. */
  debounceMaxMs?: number;
  /**
   * Quiet time after dpkg's status file last changed before the packages are checked; default
   * 1 s. One dpkg run replaces it at every step (half-installed, unpacked, installed) with its
   * maintainer scripts between: read mid-run it says `broken`, not what the run ends with.
   */
  packageQuietMs?: number;
  /** Watch with inotify (default true); false leaves only the audits. */
  watch?: boolean;
  report(report: DriftReport): void;
  /** A check finished: what started it, how long it took, how many paths it read. */
  checked?(trigger: DriftTrigger, durationMs: number, paths: number): void;
  /** Asks the agent for a revert apply (it runs one when no other apply is due). */
  requestRevert(): void;
  log: Logger;
  /** The kernel's inotify limits (a test's stand-in; default /proc/sys/fs/inotify). */
  inotifyLimits?: () => Promise<InotifyLimits | undefined>;
  now?: () => Date;
  backoff?: RevertBackoff;
}

const CONCURRENT_READS = 16;

/** Besides paths, what a check looks at: the units' states, the package database. */
interface AlsoCheck {
  units: boolean;
  packages: boolean;
}
const ALL: AlsoCheck = { units: true, packages: true };

export class DriftMonitor implements DriftHooks {
  private expectation: Expectation = NO_EXPECTATION;
  private applied: ResolvedConfig | undefined;
  /** What the expectation was last built from (expect). */
  private expectedFrom:
    { applied: ResolvedConfig | undefined; unfinished: ResolvedConfig | undefined } | undefined;
  private items = new Map<string, DriftItem>();
  private readonly suspects = new Set<string>();
  private unitsSuspect = false;
  private packagesSuspect = false;
  private paused = false;
  private stopped = false;
  private chain: Promise<void> = Promise.resolve();
  private debounceTimer: NodeJS.Timeout | undefined;
  private packageTimer: NodeJS.Timeout | undefined;
  /** When the first and the last event of the batch waiting for its check came (performance.now). */
  private firstEventAt = 0;
  private lastEventAt = 0;
  private auditTimer: NodeJS.Timeout | undefined;
  private revertTimer: NodeJS.Timeout | undefined;
  private readonly watcher: DriftWatcher | undefined;
  private readonly backoff: RevertBackoff;
  private unitReadFailed = false;

  constructor(private readonly opts: DriftMonitorOptions) {
    this.backoff = opts.backoff ?? new RevertBackoff();
    if (opts.watch !== false) {
      this.watcher = new DriftWatcher(
        opts.root,
        {
          path: (p) => {
            this.suspects.add(p);
            this.schedule();
          },
          units: () => {
            this.unitsSuspect = true;
            this.schedule();
          },
          packages: () => {
            this.schedulePackages();
          },
          error: (e) => {
            opts.log.warn(
              { ...errorFields(e), auditIntervalMs: opts.auditIntervalMs },
              'drift watch failed; the audits still cover it',
            );
          },
          limit: (message) => {
            opts.log.warn({ auditIntervalMs: opts.auditIntervalMs }, message);
          },
        },
        undefined,
        opts.inotifyLimits,
      );
    }
  }

  private now(): Date {
    return this.opts.now?.() ?? new Date();
  }

  /** Everything drifted now (for tests and `/healthz`-style views). */
  get drifted(): readonly DriftItem[] {
    return [...this.items.values()];
  }

  /** The directories watched (a metric). */
  get watchedDirectories(): number {
    return this.watcher?.directories ?? 0;
  }

  /** The owned files watched on their inodes (a metric). */
  get watchedFiles(): number {
    return this.watcher?.files ?? 0;
  }

  async start(applied: ResolvedConfig | undefined): Promise<void> {
    this.applied = applied;
    await this.expect(undefined);
    if (this.opts.auditIntervalMs > 0) {
      this.auditTimer = setInterval(() => {
        if (!this.paused) void this.enqueue(() => this.audit('audit'));
      }, this.opts.auditIntervalMs);
    }
    await this.enqueue(() => this.audit('start'));
  }

  async beforeApply(kind: 'apply' | 'revert'): Promise<void> {
    if (kind === 'apply') await this.enqueue(() => this.audit('apply'));
    else await this.chain;
    this.paused = true;
  }

  revertScope(): RevertScope {
    const paths = new Set<string>();
    const units = new Set<string>();
    const packages = new Set<string>();
    for (const i of this.items.values()) {
      if (i.policy !== 'Revert') continue;
      if (i.path !== undefined) paths.add(i.path);
      else if (i.unit !== undefined) units.add(i.unit);
      else if (i.package !== undefined) packages.add(i.package);
    }
    return { paths, units, packages };
  }

  afterApply(outcome: ApplyOutcome): void {
    const trigger: DriftTrigger =
      'revert' in outcome && outcome.revert === true ? 'revert' : 'watch';
    if ('applied' in outcome) this.applied = outcome.applied;
    const unfinished = 'failed' in outcome ? outcome.failed : undefined;
    void this.enqueue(async () => {
      await this.expect(unfinished);
      this.paused = false;
      // what the apply wrote, what drifted before it: checked against what is expected now; and
      // every path not yet watched on its inode (new in this state: its directory was not
      // watched while it was written), so the check arms its watch
      const paths = new Set(this.suspects);
      for (const item of this.items.values()) if (item.path !== undefined) paths.add(item.path);
      const watcher = this.watcher;
      if (watcher) {
        for (const p of this.expectation.paths.keys()) if (!watcher.tracks(p)) paths.add(p);
      }
      this.suspects.clear();
      this.unitsSuspect = false;
      this.packagesSuspect = false;
      await this.check(paths, ALL, trigger);
    });
  }

  /** Resolves when every check queued so far has run (tests, and stop). */
  async idle(): Promise<void> {
    for (;;) {
      const c = this.chain;
      await c;
      if (this.debounceTimer || this.packageTimer || this.watcher?.busy === true) {
        await sleep(10);
        continue;
      }
      if (c === this.chain) return;
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of [this.debounceTimer, this.packageTimer, this.revertTimer])
      if (t) clearTimeout(t);
    if (this.auditTimer) clearInterval(this.auditTimer);
    this.watcher?.close();
    await this.chain;
  }

  private async expect(unfinished: ResolvedConfig | undefined): Promise<void> {
    // a revert, or a refused state, leaves what is expected as it was: the expectation and the
    // watches of 10,000 paths are not built again (~0.2 s); the check after it re-arms the
    // inode watches of what was written
    const from = this.expectedFrom;
    if (from && from.applied === this.applied && from.unfinished === unfinished) return;
    this.expectedFrom = undefined;
    const applied = this.applied;
    this.expectation = expectationOf(applied, unfinished);
    await this.watcher?.watch(
      [...this.expectation.paths.keys()],
      [...this.expectation.units.keys()],
      this.expectation.packages.size > 0,
    );
    this.expectedFrom = { applied, unfinished };
  }

  private enqueue(work: () => Promise<void>): Promise<void> {
    const next = this.chain.then(async () => {
      if (this.stopped) return;
      try {
        await work();
      } catch (error) {
        this.opts.log.warn(errorFields(error), 'drift check failed');
      }
    });
    this.chain = next;
    return next;
  }

  /**
   * Events gather until debounceMs pass without one, at most debounceMaxMs from the first; then
   * their paths are checked once. An event only notes its time: a storm of them (a directory
   * rebuilt, 10,000 files touched) costs no timer each.
   */
  private schedule(): void {
    if (this.paused || this.stopped) return;
    this.lastEventAt = performance.now();
    if (this.debounceTimer) return;
    this.firstEventAt = this.lastEventAt;
    this.debounceTimer = setTimeout(() => {
      this.onQuiet();
    }, this.quietMs());
  }

  private quietMs(): number {
    return this.opts.debounceMs ?? 25;
  }

  /** The quiet time ran out: checks the batch, or waits on while events came and the cap allows. */
  private onQuiet(): void {
    this.debounceTimer = undefined;
    if (this.paused || this.stopped) return;
    const now = performance.now();
    const cap = this.firstEventAt + (this.opts.debounceMaxMs ?? 100);
    const quietUntil = this.lastEventAt + this.quietMs();
    if (quietUntil > now + 1 && cap > now + 1) {
      this.debounceTimer = setTimeout(
        () => {
          this.onQuiet();
        },
        Math.min(quietUntil, cap) - now,
      );
      return;
    }
    const paths = new Set(this.suspects);
    const also = { units: this.unitsSuspect, packages: false };
    this.suspects.clear();
    this.unitsSuspect = false;
    void this.enqueue(() => this.check(paths, also, 'watch'));
  }

  /** dpkg's database changed: checked once it has been quiet for packageQuietMs (each change resets it). */
  private schedulePackages(): void {
    if (this.paused || this.stopped) return;
    this.packagesSuspect = true;
    if (this.packageTimer) clearTimeout(this.packageTimer);
    this.packageTimer = setTimeout(() => {
      this.packageTimer = undefined;
      if (this.paused || this.stopped || !this.packagesSuspect) return;
      this.packagesSuspect = false;
      void this.enqueue(() => this.check(new Set(), { units: false, packages: true }, 'watch'));
    }, this.opts.packageQuietMs ?? 1000);
  }

  private async audit(trigger: DriftTrigger): Promise<void> {
    await this.check(new Set(this.expectation.paths.keys()), ALL, trigger);
  }

  /**
   * What is at each path, read beneath the root as the planner reads and every write resolves
   * (agent/disk/reader.ts): a link in a parent is never followed. Directories are opened afresh
   * for each check, so a directory swapped for a link since is seen.
   */
  private async readAll(paths: readonly string[]): Promise<(Found | Error)[]> {
    const beneath = await Beneath.open(this.opts.root);
    try {
      return await mapLimit(paths, CONCURRENT_READS, (p) =>
        readFound(beneath, p).catch((error: unknown) => error as Error),
      );
    } finally {
      await beneath.close();
    }
  }

  private async ownerIds(): Promise<OwnerIds | undefined> {
    if (!this.opts.owners) return undefined;
    // /etc/passwd and /etc/group read beneath the root, never through a link (agent/disk/beneath.ts)
    const beneath = await Beneath.open(this.opts.root);
    const accounts = await Accounts.load(beneath, this.opts.root).finally(() => beneath.close());
    const safe = (f: () => number): number | undefined => {
      try {
        return f();
      } catch {
        return undefined; // a name the node does not know: its owner cannot be compared
      }
    };
    return {
      uid: (user) => safe(() => accounts.uid(user)),
      gid: (group) => safe(() => accounts.gid(group)),
    };
  }

  /** Checks `paths` (and the units and packages, as `also` says) against the expectation. */
  private async check(
    paths: ReadonlySet<string>,
    also: AlsoCheck,
    trigger: DriftTrigger,
  ): Promise<void> {
    const t0 = performance.now();
    const expectation = this.expectation;
    const next = new Map(this.items);
    // what is no longer expected is no longer drift
    for (const [key, item] of next) if (!stillExpected(item, expectation)) next.delete(key);
    const read = await this.checkPaths(paths, expectation, next);
    if (also.units) await this.checkUnits(expectation, next);
    if (also.packages) await this.checkPackages(expectation, next);
    this.opts.checked?.(trigger, performance.now() - t0, read);
    this.publish(next, trigger);
    this.scheduleRevert();
  }

  /** Reads the expected ones of `paths`, notes their drift; the number read. */
  private async checkPaths(
    paths: ReadonlySet<string>,
    expectation: Expectation,
    next: Map<string, DriftItem>,
  ): Promise<number> {
    const list = [...paths].filter((p) => expectation.paths.has(p));
    if (list.length === 0) return 0;
    const ids = await this.ownerIds();
    const found = await this.readAll(list);
    list.forEach((path, i) => {
      const f = found[i];
      const e = expectation.paths.get(path);
      if (!e || f === undefined) return;
      if (f instanceof Error) {
        this.opts.log.warn({ path, ...errorFields(f) }, 'drift check failed');
        return;
      }
      this.watcher?.track(path, f.kind === 'file');
      this.note(next, `path:${path}`, pathDrift(e, f, ids), {
        path,
        ...(e.unit !== undefined ? { unit: e.unit } : {}),
        policy: e.policy,
      });
    });
    return list.length;
  }

  private async checkUnits(expectation: Expectation, next: Map<string, DriftItem>): Promise<void> {
    if (!this.opts.units || expectation.units.size === 0) return;
    try {
      const states = await this.opts.units.read([...expectation.units.keys()]);
      this.unitReadFailed = false;
      for (const [name, e] of expectation.units) {
        const seen = states.get(name);
        if (!seen) continue;
        this.note(next, `unit:${name}`, unitStateDrift(e, seen), { unit: name, policy: e.policy });
      }
    } catch (error) {
      if (!this.unitReadFailed) this.opts.log.warn(errorFields(error), 'unit states not read');
      this.unitReadFailed = true;
    }
  }

  /** The declared packages against the package manager's database (none on a node without one). */
  private async checkPackages(
    expectation: Expectation,
    next: Map<string, DriftItem>,
  ): Promise<void> {
    if (expectation.packages.size === 0) return;
    let db: ReadonlyMap<string, InstalledPackage> | undefined;
    try {
      const beneath = await Beneath.open(this.opts.root);
      db = await readPackageDatabase(beneath).finally(() => beneath.close());
    } catch (error) {
      this.opts.log.warn(errorFields(error), 'package database not read');
      return;
    }
    if (!db) return;
    for (const [name, e] of expectation.packages) {
      this.note(next, `package:${name}`, packageStateDrift(e, db.get(name)), {
        package: name,
        policy: e.policy,
      });
    }
  }

  private note(
    next: Map<string, DriftItem>,
    key: string,
    finding: Finding | undefined,
    what: Pick<DriftItem, 'path' | 'unit' | 'package' | 'policy'>,
  ): void {
    if (!finding) {
      next.delete(key);
      return;
    }
    const before = next.get(key);
    next.set(key, { key, ...what, ...finding, since: before?.since ?? this.now() });
  }

  private publish(next: Map<string, DriftItem>, trigger: DriftTrigger): void {
    const prev = this.items;
    const added = [...next.values()].filter((i) => !prev.has(i.key));
    const resolved = [...prev.values()].filter((i) => !next.has(i.key));
    const changed = [...next.values()].some((i) => {
      const p = prev.get(i.key);
      return p !== undefined && (p.reason !== i.reason || p.found !== i.found);
    });
    this.items = new Map([...next].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
    // the start says where things stand even when nothing drifted (Drifted=False, NoDrift)
    if (added.length === 0 && resolved.length === 0 && !changed && trigger !== 'start') return;
    for (const i of added) this.opts.log.warn({ trigger, ...itemFields(i) }, 'drift');
    for (const i of resolved)
      this.opts.log.info(
        {
          trigger,
          ...(i.path !== undefined
            ? { path: i.path }
            : i.unit !== undefined
              ? { unit: i.unit }
              : { package: i.package }),
        },
        'drift resolved',
      );
    this.opts.report({
      items: [...this.items.values()],
      added,
      resolved,
      trigger,
      reverted: trigger === 'revert' && resolved.length > 0,
    });
  }

  private scheduleRevert(): void {
    if (this.stopped || this.revertTimer) return;
    if (![...this.items.values()].some((i) => i.policy === 'Revert')) return;
    const delay = this.backoff.delay(this.now().getTime());
    if (delay > 0) this.opts.log.info({ retryInMs: Math.round(delay) }, 'drift revert delayed');
    this.revertTimer = setTimeout(() => {
      this.revertTimer = undefined;
      if (this.stopped || this.paused) return; // the apply under way ends with a check
      if (![...this.items.values()].some((i) => i.policy === 'Revert')) return;
      this.backoff.ran(this.now().getTime());
      this.opts.requestRevert();
    }, delay);
  }
}
