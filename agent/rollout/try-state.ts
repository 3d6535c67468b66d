/**
 * What try mode keeps on disk, in the agent's state directory, so that a revision is reverted
 * even when the agent or the machine goes down in the middle:
 * - confirmed.json: the canonical bytes of the last revision this node confirmed — what a
 *   rollback goes back to;
 * - try.json: the revision being tried (checksum, grant generation, deadline, the boot it was
 *   started in) and the files it replaced that oscar did not own, backed up under try-backup/ so
 *   a rollback puts them back byte for byte. Written before the apply starts;
 * - failed.json: the last grant whose try failed here, so the same grant is not tried again.
 * The boot is told by a token in /run (a tmpfs every boot starts empty): a try.json from another
 * boot means the machine restarted during an unconfirmed revision, which is reverted.
 */
import { randomBytes } from 'node:crypto';
import { lstat, mkdir, readFile, readlink, rm, symlink, unlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { parseCanonical, sha256Hex } from '../../api/canonical.js';
import { hostPath, writeFileAtomic } from '../fs.js';
import { entriesOf } from '../plan.js';
import type { Desired } from '../state.js';
import type { Grant } from './grant.js';

const CONFIRMED = 'confirmed.json';
const TRY = 'try.json';
const FAILED = 'failed.json';
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

export interface TryRecord {
  checksum: string;
  /** The grant being tried, with its try policy: enough to finish the try without the API. */
  grant: Grant;
  /** Epoch ms by which the node must have confirmed (set once the apply ended; 0 before). */
  deadline: number;
  boot: string;
  backups: Backup[];
  units: WatchedUnit[];
}

export interface FailedRecord {
  checksum: string;
  generation: number;
  reason: string;
  message: string;
}

async function readOptional(path: string): Promise<Buffer | undefined> {
  try {
    return await readFile(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

function isObj(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
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
    return fail((error as Error).message);
  }
  if (!isObj(v)) return fail('not a mapping');
  const { checksum, grant, deadline, boot, backups, units } = v;
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
  return {
    checksum,
    grant: grant as unknown as Grant,
    deadline,
    boot,
    backups: list,
    units: watched,
  };
}

export class TryState {
  constructor(
    private readonly stateDir: string,
    private readonly root: string,
    /** Where the boot token lives (a tmpfs): default ROOT/run/oscar/boot-token. */
    private readonly bootTokenPath = hostPath(root, '/run/oscar/boot-token'),
  ) {}

  /** This boot's token: made by the first agent of the boot, read by the later ones. */
  async bootToken(): Promise<string> {
    const existing = await readOptional(this.bootTokenPath);
    if (existing && /^[0-9a-f]{32}$/.test(existing.toString('utf8').trim())) {
      return existing.toString('utf8').trim();
    }
    const token = randomBytes(16).toString('hex');
    await mkdir(dirname(this.bootTokenPath), { recursive: true, mode: 0o700 });
    await writeFile(this.bootTokenPath, `${token}\n`, { mode: 0o600 });
    return token;
  }

  async confirmed(): Promise<Desired | undefined> {
    const bytes = await readOptional(join(this.stateDir, CONFIRMED));
    if (!bytes) return undefined;
    return { config: parseCanonical(bytes), checksum: sha256Hex(bytes), bytes };
  }

  async setConfirmed(bytes: Buffer): Promise<void> {
    await mkdir(this.stateDir, { recursive: true, mode: 0o700 });
    await writeFileAtomic(join(this.stateDir, CONFIRMED), bytes, 0o600, undefined);
  }

  async current(): Promise<TryRecord | undefined> {
    const file = join(this.stateDir, TRY);
    const bytes = await readOptional(file);
    return bytes ? parseTry(bytes, file) : undefined;
  }

  private async writeTry(record: TryRecord): Promise<void> {
    await writeFileAtomic(
      join(this.stateDir, TRY),
      Buffer.from(JSON.stringify(record)),
      0o600,
      undefined,
    );
  }

  /**
   * Starts a try of `next` on top of `last` (what oscar last applied): backs up every path
   * `next` writes that `last` did not own and that exists on disk, then records the try.
   */
  async begin(next: Desired, last: Desired | undefined, grant: Grant): Promise<TryRecord> {
    const owned = entriesOf(last?.config);
    const dir = join(this.stateDir, BACKUP_DIR);
    await rm(dir, { recursive: true, force: true });
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const backups: Backup[] = [];
    for (const path of entriesOf(next.config).keys()) {
      if (owned.has(path)) continue;
      const at = hostPath(this.root, path);
      let st;
      try {
        st = await lstat(at);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue;
        throw error;
      }
      const base = { path, mode: st.mode & 0o7777, uid: st.uid, gid: st.gid };
      if (st.isSymbolicLink()) {
        backups.push({ ...base, kind: 'symlink', target: await readlink(at) });
      } else if (st.isFile()) {
        const blob = String(backups.length);
        await writeFile(join(dir, blob), await readFile(at), { mode: 0o600 });
        backups.push({ ...base, kind: 'file', blob });
      }
    }
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

  /** The apply ended: the deadline runs from now, and these units are watched. */
  async applied(record: TryRecord, deadline: number, units: WatchedUnit[]): Promise<TryRecord> {
    const next = { ...record, deadline, units };
    await this.writeTry(next);
    return next;
  }

  /** Puts back what the try replaced: after the previous revision is applied again. */
  async restoreBackups(record: TryRecord, owners: boolean): Promise<void> {
    const dir = join(this.stateDir, BACKUP_DIR);
    for (const b of record.backups) {
      const at = hostPath(this.root, b.path);
      if (b.kind === 'symlink' && b.target !== undefined) {
        await unlink(at).catch(() => undefined);
        await symlink(b.target, at);
      } else if (b.blob !== undefined) {
        const content = await readFile(join(dir, b.blob));
        await writeFileAtomic(at, content, b.mode, owners ? { uid: b.uid, gid: b.gid } : undefined);
      }
    }
  }

  /** The try is over (confirmed, reverted, or superseded): its record and backups go. */
  async end(): Promise<void> {
    await rm(join(this.stateDir, TRY), { force: true });
    await rm(join(this.stateDir, BACKUP_DIR), { recursive: true, force: true });
  }

  async failed(): Promise<FailedRecord | undefined> {
    const bytes = await readOptional(join(this.stateDir, FAILED));
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
        };
      }
    } catch {
      // a damaged record only means the grant may be tried once more
    }
    return undefined;
  }

  async setFailed(record: FailedRecord): Promise<void> {
    await writeFileAtomic(
      join(this.stateDir, FAILED),
      Buffer.from(JSON.stringify(record)),
      0o600,
      undefined,
    );
  }
}
