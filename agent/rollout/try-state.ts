/**
 * What try mode keeps on disk, in the agent's state directory, so that a revision is reverted
 * even when the agent or the machine goes down in the middle:
 * - confirmed.json: the canonical bytes of the last revision this node confirmed — what a
 *   rollback goes back to;
 * - try.json: the revision being tried (checksum, grant generation, deadline, the boot it was
 *   started in) and the files it replaced that oscar did not own, backed up under try-backup/ so
 *   a rollback puts them back byte for byte. Written before the apply starts;
 * - failed.json: the last grant whose try failed here, so the same grant is not tried again, and
 *   how it ended (RolledBack, or Failed when the rollback could not be proven);
 * - confirmed-checks.json: the health checks the confirmed revision was proven with (its grant's),
 *   so a rollback that reboots back into it proves it with its own checks, not the failed try's;
 * - try.json with `rollback` set: the try was reverted after the node had rebooted into it, and the
 *   old state is not proven yet in a boot of its own (agent/reboot/, issue 25): the try stays
 *   open until the node is back, Ready and healthy in the previous revision.
 * The boot is told by a token in /run (a tmpfs every boot starts empty): a try.json from another
 * boot means the machine restarted during an unconfirmed revision, which is reverted.
 */
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { lstat, open, readlink, rename, symlink, unlink, type FileHandle } from 'node:fs/promises';
import { parseCanonical, sha256Hex } from '../../api/canonical.js';
import { Beneath, NotADirectory, SymlinkRefused, type Dir } from '../disk/beneath.js';
import { commitTemp, copyFrom, randomTempName, readFileIn, writeTempIn } from '../disk/fs.js';
import { entriesOf } from '../model/entries.js';
import { StateDir, StateError } from '../state-dir.js';
import type { Desired } from '../state.js';
import type { Check, Grant } from './grant.js';
import { isObj } from '../../api/util.js';
import { quietJsonMessage } from '../../api/json-text.js';

const CONFIRMED = 'confirmed.json';
const TRY = 'try.json';
const FAILED = 'failed.json';
const CONFIRMED_CHECKS = 'confirmed-checks.json';
const BACKUP_DIR = 'try-backup';

export interface Backup {
  path: string;
  kind: 'file' | 'symlink';
  mode: number;
  uid: number;
  gid: number;
  /** For a symlink: where it pointed. */
  target?: string;
  /** For a file: the blob under try-backup/. */
  blob?: string;
}

/** A unit the apply started or restarted, and systemd's restart count for it right after. */
export interface WatchedUnit {
  name: string;
  restarts: number;
}

/**
 * A try reverted after its reboot, rebooting back into the previous revision (issue 25): the
 * rollback is finished only once that revision is proven in a boot of its own.
 */
export interface RollbackRecord {
  /** Why the try failed (its verdict), reported with the rollback. */
  reason: string;
  message: string;
  /** The boot the revert happened in: a start in it means the reboot back did not happen. */
  fromBoot: string;
}

export interface TryRecord {
  checksum: string;
  /** The grant being tried, with its try policy: enough to finish the try without the API. */
  grant: Grant;
  /** Epoch ms by which the node must have confirmed (set once the apply ended; 0 before). */
  deadline: number;
  boot: string;
  backups: Backup[];
  units: WatchedUnit[];
  /** Set once the try was reverted and the node reboots back (see RollbackRecord). */
  rollback?: RollbackRecord;
}

export interface FailedRecord {
  checksum: string;
  generation: number;
  reason: string;
  message: string;
  /** How the rollback ended; absent: RolledBack. */
  phase?: 'RolledBack' | 'Failed';
}

/**
 * Whether this boot is a boot of the previous revision a rolled-back try reboots back into: any
 * boot but the one the revert happened in (the old state is what the disk holds since). Pure.
 */
export function backInOldState(record: TryRecord, bootNow: string): boolean {
  return record.rollback !== undefined && record.rollback.fromBoot !== bootNow;
}

/** A path oscar could have written: absolute, normalised (the validator's rules). */
function safePath(p: unknown): p is string {
  return (
    typeof p === 'string' &&
    p.startsWith('/') &&
    !p.includes('\0') &&
    !p.includes('//') &&
    !p.split('/').some((s) => s === '.' || s === '..')
  );
}

function parseTry(bytes: Buffer, file: string): TryRecord {
  const fail = (why: string): never => {
    throw new Error(`${file} is damaged (${why}); remove it to let the agent go on`);
  };
  let v: unknown;
  try {
    v = JSON.parse(bytes.toString('utf8'));
  } catch (error) {
    return fail(quietJsonMessage(error));
  }
  if (!isObj(v)) return fail('not a mapping');
  const { checksum, grant, deadline, boot, backups, units, rollback } = v;
  if (typeof checksum !== 'string' || !/^[0-9a-f]{64}$/.test(checksum)) return fail('checksum');
  if (!isObj(grant) || grant.checksum !== checksum || typeof grant.generation !== 'number') {
    return fail('grant');
  }
  if (typeof deadline !== 'number' || typeof boot !== 'string') return fail('deadline');
  if (!Array.isArray(backups) || !Array.isArray(units)) return fail('backups');
  const list: Backup[] = backups.map((b): Backup => {
    if (!isObj(b) || !safePath(b.path)) return fail('a backup path');
    const kind = b.kind === 'symlink' ? 'symlink' : 'file';
    const out: Backup = {
      path: b.path,
      kind,
      mode: Number(b.mode) & 0o7777,
      uid: Number(b.uid),
      gid: Number(b.gid),
    };
    if (kind === 'symlink') {
      if (typeof b.target !== 'string') return fail('a symlink target');
      out.target = b.target;
    } else {
      if (typeof b.blob !== 'string' || !/^\d+$/.test(b.blob)) return fail('a backup blob');
      out.blob = b.blob;
    }
    return out;
  });
  const watched: WatchedUnit[] = units.map((u): WatchedUnit => {
    if (!isObj(u) || typeof u.name !== 'string' || typeof u.restarts !== 'number') {
      return fail('a unit');
    }
    return { name: u.name, restarts: u.restarts };
  });
  // The record is ours, written atomically: the grant in it was checked when it arrived.
  const record: TryRecord = {
    checksum,
    grant: grant as unknown as Grant,
    deadline,
    boot,
    backups: list,
    units: watched,
  };
  if (rollback !== undefined) record.rollback = parseRollback(rollback, fail);
  return record;
}

function parseRollback(v: unknown, fail: (why: string) => never): RollbackRecord {
  if (
    !isObj(v) ||
    typeof v.reason !== 'string' ||
    typeof v.message !== 'string' ||
    typeof v.fromBoot !== 'string'
  ) {
    return fail('rollback');
  }
  return { reason: v.reason, message: v.message, fromBoot: v.fromBoot };
}

/** The checks of confirmed-checks.json, shaped as written (the state directory is root's own). */
function parseChecks(bytes: Buffer): { checksum: string; checks: Check[] } | undefined {
  try {
    const v = JSON.parse(bytes.toString('utf8')) as unknown;
    if (!isObj(v) || typeof v.checksum !== 'string' || !Array.isArray(v.checks)) return undefined;
    const ok = v.checks.every(
      (c) =>
        isObj(c) &&
        typeof c.name === 'string' &&
        (c.kind === 'exec' || c.kind === 'httpGet') &&
        typeof c.timeoutMs === 'number' &&
        typeof c.periodMs === 'number' &&
        typeof c.failureThreshold === 'number',
    );
    return ok ? { checksum: v.checksum, checks: v.checks as Check[] } : undefined;
  } catch {
    return undefined;
  }
}

function errnoOf(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}

/**
 * Backs up what is at node path `path` into `into` as `blob`, read without following a link: a
 * link is recorded (its target), a regular file copied; nothing when the path is missing, is not
 * a file or a link, or lies through a link the agent refuses (the apply refuses to write there
 * too, so nothing is replaced).
 */
async function backUp(
  beneath: Beneath,
  path: string,
  into: Dir,
  blob: string,
): Promise<Backup | undefined> {
  let where;
  try {
    where = await beneath.parent(path, false);
  } catch (error) {
    if (error instanceof SymlinkRefused || error instanceof NotADirectory) return undefined;
    throw error;
  }
  if (!where) return undefined;
  const at = where.dir.at(where.name);
  let handle: FileHandle;
  try {
    handle = await open(at, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    const code = errnoOf(error);
    if (code === 'ENOENT') return undefined;
    if (code !== 'ELOOP') throw error;
    const st = await lstat(at);
    const base = { path, mode: st.mode & 0o7777, uid: st.uid, gid: st.gid };
    return { ...base, kind: 'symlink', target: await readlink(at) };
  }
  try {
    const st = await handle.stat();
    if (!st.isFile()) return undefined;
    await commitTemp(await writeTempIn(into, blob, copyFrom(handle), 0o600, undefined));
    return { path, mode: st.mode & 0o7777, uid: st.uid, gid: st.gid, kind: 'file', blob };
  } finally {
    await handle.close();
  }
}

/** Puts one backup back at its path, by name in its directory: a file atomically, a link by rename. */
async function restore(
  beneath: Beneath,
  from: Dir | undefined,
  b: Backup,
  owners: boolean,
  backups: string,
): Promise<void> {
  const where = await beneath.parent(b.path, true);
  if (!where) throw new Error(`cannot create the directories of ${b.path}`);
  if (b.kind === 'symlink' && b.target !== undefined) {
    const temp = randomTempName();
    await symlink(b.target, where.dir.at(temp));
    try {
      await rename(where.dir.at(temp), where.dir.at(where.name));
    } catch (error) {
      await unlink(where.dir.at(temp)).catch(() => undefined);
      throw error;
    }
    await where.dir.handle.sync();
  } else if (b.blob !== undefined) {
    if (!from) {
      throw new StateError(
        `${backups} is missing, so ${b.path} cannot be put back as it was before the try; restore it by hand, then remove try.json`,
      );
    }
    const blob = await open(from.at(b.blob), constants.O_RDONLY | constants.O_NOFOLLOW);
    try {
      const owner = owners ? { uid: b.uid, gid: b.gid } : undefined;
      await commitTemp(await writeTempIn(where.dir, where.name, copyFrom(blob), b.mode, owner));
    } finally {
      await blob.close();
    }
  }
}

/**
 * The try's files, in the checked state directory (agent/state-dir.ts), and the node paths it
 * backs up and restores, resolved beneath the root without following a link the agent did not
 * make (agent/disk/beneath.ts) — a rollback runs as root on paths other users may own.
 */
export class TryState {
  constructor(
    private readonly stateDir: string,
    private readonly root: string,
    /** Where the boot token lives, beneath the root (a tmpfs on a node). */
    private readonly bootTokenPath = '/run/oscar/boot-token',
  ) {}

  private state<T>(fn: (state: StateDir) => Promise<T>): Promise<T> {
    return StateDir.with(this.stateDir, fn);
  }

  private async beneath<T>(fn: (beneath: Beneath) => Promise<T>): Promise<T> {
    const beneath = await Beneath.open(this.root);
    try {
      return await fn(beneath);
    } finally {
      await beneath.close();
    }
  }

  /** This boot's token: made by the first agent of the boot, read by the later ones. */
  bootToken(): Promise<string> {
    return this.beneath(async (beneath) => {
      const where = await beneath.parent(this.bootTokenPath, true);
      if (!where) throw new Error(`cannot create the directories of ${this.bootTokenPath}`);
      const existing = (await readFileIn(where.dir, where.name))?.toString('utf8').trim();
      if (existing !== undefined && /^[0-9a-f]{32}$/.test(existing)) return existing;
      const token = randomBytes(16).toString('hex');
      const bytes = Buffer.from(`${token}\n`);
      await commitTemp(await writeTempIn(where.dir, where.name, bytes, 0o600, undefined));
      return token;
    });
  }

  confirmed(): Promise<Desired | undefined> {
    return this.state(async (state) => {
      const bytes = await state.read(CONFIRMED);
      if (!bytes) return undefined;
      try {
        return { config: parseCanonical(bytes), checksum: sha256Hex(bytes), bytes };
      } catch (error) {
        throw new StateError(
          `${state.file(CONFIRMED)} is damaged (${(error as Error).message}); remove it: the last applied state then counts as confirmed`,
          { cause: error },
        );
      }
    });
  }

  /**
   * The node confirmed these bytes; `checks`: the health checks it proved them with (a try's),
   * none for a plain apply.
   */
  async setConfirmed(bytes: Buffer, checks: readonly Check[] = []): Promise<void> {
    await this.state(async (state) => {
      await state.write(CONFIRMED, bytes);
      if (checks.length === 0) await state.remove(CONFIRMED_CHECKS);
      else {
        const record = { checksum: sha256Hex(bytes), checks };
        await state.write(CONFIRMED_CHECKS, Buffer.from(JSON.stringify(record)));
      }
    });
  }

  /** The health checks the confirmed revision `checksum` was proven with; [] when none. */
  confirmedChecks(checksum: string): Promise<Check[]> {
    return this.state(async (state) => {
      const bytes = await state.read(CONFIRMED_CHECKS);
      const stored = bytes ? parseChecks(bytes) : undefined;
      return stored?.checksum === checksum ? stored.checks : [];
    });
  }

  current(): Promise<TryRecord | undefined> {
    return this.state(async (state) => {
      const bytes = await state.read(TRY);
      return bytes ? parseTry(bytes, state.file(TRY)) : undefined;
    });
  }

  private async writeTry(record: TryRecord): Promise<void> {
    await this.state((state) => state.write(TRY, Buffer.from(JSON.stringify(record))));
  }

  /**
   * Starts a try of `next` on top of `last` (what oscar last applied): backs up every path
   * `next` writes that `last` did not own and that exists on disk, then records the try.
   */
  async begin(next: Desired, last: Desired | undefined, grant: Grant): Promise<TryRecord> {
    const owned = entriesOf(last?.config);
    const backups = await this.state(async (state) => {
      await state.removeTree(BACKUP_DIR);
      const into = await state.subdir(BACKUP_DIR, true);
      if (!into) throw new StateError(`cannot create ${state.file(BACKUP_DIR)}`);
      return this.beneath(async (beneath) => {
        const out: Backup[] = [];
        for (const path of entriesOf(next.config).keys()) {
          if (owned.has(path)) continue;
          const backup = await backUp(beneath, path, into, String(out.length));
          if (backup) out.push(backup);
        }
        await into.handle.sync();
        return out;
      });
    });
    const record: TryRecord = {
      checksum: next.checksum,
      grant,
      deadline: 0,
      boot: await this.bootToken(),
      backups,
      units: [],
    };
    await this.writeTry(record);
    return record;
  }

  /**
   * issue 25: the machine rebooted for this try on purpose (agent/reboot/): the try belongs to
   * this boot now, and its units' restart counts start again from zero.
   */
  async moveToBoot(record: TryRecord, boot: string): Promise<TryRecord> {
    const next = { ...record, boot, units: record.units.map((u) => ({ ...u, restarts: 0 })) };
    await this.writeTry(next);
    return next;
  }

  /**
   * issue 25: the try was reverted after the node had rebooted into it; the node reboots back
   * into the previous revision from boot `fromBoot`, and the revert's units are what is watched
   * there. The try stays open until the old state is proven (or its proof failed).
   */
  async rollingBack(
    record: TryRecord,
    rollback: RollbackRecord,
    units: WatchedUnit[],
  ): Promise<TryRecord> {
    const next = { ...record, units, rollback };
    await this.writeTry(next);
    return next;
  }

  /** Back in a boot of the previous revision: its proof runs in this boot, to a new deadline. */
  async backInBoot(record: TryRecord, boot: string, deadline: number): Promise<TryRecord> {
    const next = {
      ...record,
      boot,
      deadline,
      units: record.units.map((u) => ({ ...u, restarts: 0 })),
    };
    await this.writeTry(next);
    return next;
  }

  /** The apply ended: the deadline runs from now, and these units are watched. */
  async applied(record: TryRecord, deadline: number, units: WatchedUnit[]): Promise<TryRecord> {
    const next = { ...record, deadline, units };
    await this.writeTry(next);
    return next;
  }

  /** Puts back what the try replaced: after the previous revision is applied again. */
  async restoreBackups(record: TryRecord, owners: boolean): Promise<void> {
    await this.state(async (state) => {
      const from = await state.subdir(BACKUP_DIR, false);
      await this.beneath(async (beneath) => {
        for (const b of record.backups) {
          await restore(beneath, from, b, owners, state.file(BACKUP_DIR));
        }
      });
    });
  }

  /** The try is over (confirmed, reverted, or superseded): its record and backups go. */
  async end(): Promise<void> {
    await this.state(async (state) => {
      await state.remove(TRY);
      await state.removeTree(BACKUP_DIR);
    });
  }

  failed(): Promise<FailedRecord | undefined> {
    return this.state(async (state) => {
      const bytes = await state.read(FAILED);
      if (!bytes) return undefined;
      try {
        const v = JSON.parse(bytes.toString('utf8')) as unknown;
        if (
          isObj(v) &&
          typeof v.checksum === 'string' &&
          typeof v.generation === 'number' &&
          typeof v.reason === 'string' &&
          typeof v.message === 'string'
        ) {
          return {
            checksum: v.checksum,
            generation: v.generation,
            reason: v.reason,
            message: v.message,
            ...(v.phase === 'Failed' ? { phase: 'Failed' as const } : {}),
          };
        }
      } catch {
        // a damaged record only means the grant may be tried once more
      }
      return undefined;
    });
  }

  async setFailed(record: FailedRecord): Promise<void> {
    await this.state((state) => state.write(FAILED, Buffer.from(JSON.stringify(record))));
  }
}
