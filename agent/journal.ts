/**
 * The apply journal: the plan being applied (journal.json, written atomically before the first
 * action) and one line per step (journal.log, appended). An agent killed at any instant finds the
 * journal on restart and resumes the remaining actions of the same plan instead of planning again
 * — which would restart every changed unit a second time, since last-applied is only written at
 * the end.
 *
 * For a unit job that is not idempotent (restart, reload, …) a "begin" line with the unit's
 * invocation token is written before the job runs; if the agent dies between begin and done, the
 * token tells whether the job happened (the unit's invocation changed) or must still run.
 *
 * Reading is strict, because a wrong "done" skips a step for good (a package never installed):
 * a line counts only when it is whole (ends in a newline), has the exact shape, carries its own
 * checksum and names a step of this plan; anything else means "not done". A header that does not
 * parse, or has another shape, is no plan at all: the agent plans afresh from last-applied and the
 * disk, which is always safe.
 */
import { createHash, randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import type { Action, UnitActionKind } from './model/actions.js';
import { StateDir } from './state-dir.js';
import { isObj } from '../api/util.js';
import { quietJsonMessage } from '../api/json-text.js';

const HEADER = 'journal.json';
const LOG = 'journal.log';

/** An action without its bytes: file content comes back from the desired config on resume. */
export type JournalAction =
  Omit<Extract<Action, { kind: 'writeFile' }>, 'content'> | Exclude<Action, { kind: 'writeFile' }>;

interface Header {
  /** Ties log lines to this plan: lines of an older plan are ignored. */
  id: string;
  checksum: string;
  startedAt: string;
  actions: JournalAction[];
}

export interface PendingApply {
  id: string;
  checksum: string;
  startedAt: string;
  actions: JournalAction[];
  done: Set<number>;
  /** Steps begun but not finished, with the unit's invocation token at begin. */
  begun: Map<number, string>;
}

export function stripContent(action: Action): JournalAction {
  if (action.kind !== 'writeFile') return action;
  const { kind, path, mode, user, group, reason } = action;
  return action.unit === undefined
    ? { kind, path, mode, user, group, reason }
    : { kind, path, mode, user, group, reason, unit: action.unit };
}

// ---- the strict reader ------------------------------------------------------------------------

const UNIT_KINDS: ReadonlySet<string> = new Set<UnitActionKind>([
  'unmask',
  'mask',
  'enable',
  'disable',
  'start',
  'stop',
  'restart',
  'tryRestart',
  'reload',
  'stopStart',
]);

const isString = (v: unknown): v is string => typeof v === 'string';
const optionalString = (v: unknown): boolean => v === undefined || typeof v === 'string';

/** True when `a` has exactly the shape of a journaled action. */
export function isJournalAction(a: unknown): a is JournalAction {
  if (!isObj(a) || !isString(a.reason)) return false;
  switch (a.kind) {
    case 'writeFile':
      return (
        isString(a.path) &&
        Number.isInteger(a.mode) &&
        (a.mode as number) >= 0 &&
        (a.mode as number) <= 0o7777 &&
        isString(a.user) &&
        isString(a.group) &&
        optionalString(a.unit)
      );
    case 'removeFile':
      return isString(a.path) && optionalString(a.unit);
    case 'installPackages':
      return (
        Array.isArray(a.packages) &&
        a.packages.every((p) => isObj(p) && isString(p.name) && optionalString(p.version))
      );
    case 'daemonReload':
      return true;
    default:
      return isString(a.kind) && UNIT_KINDS.has(a.kind) && isString(a.unit);
  }
}

/** The header, or why it is not one. */
export function parseHeader(text: string): Header | string {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    return `not JSON (${quietJsonMessage(error)})`;
  }
  if (!isObj(raw)) return 'not an object';
  if (!isString(raw.id) || !/^[0-9a-f]{16}$/.test(raw.id)) return 'no valid "id"';
  if (!isString(raw.checksum) || !/^[0-9a-f]{64}$/.test(raw.checksum)) return 'no valid "checksum"';
  if (!isString(raw.startedAt)) return 'no "startedAt"';
  if (!Array.isArray(raw.actions)) return 'no "actions" list';
  const bad = raw.actions.findIndex((a) => !isJournalAction(a));
  if (bad >= 0) return `actions[${String(bad)}] is not an action`;
  return raw as unknown as Header;
}

/** The first 8 hex digits of the line body's sha256: a torn or altered line does not match. */
function lineSum(body: string): string {
  return createHash('sha256').update(body).digest('hex').slice(0, 8);
}

function formatLine(id: string, what: 'begin' | 'done', index: number, token: string): string {
  const body = `${id} ${what} ${String(index)} ${token || '-'}`;
  return `${body} ${lineSum(body)}\n`;
}

const LINE = /^([0-9a-f]{16}) (begin|done) (0|[1-9][0-9]{0,8}) (\S+) ([0-9a-f]{8})$/;

/** Which steps of plan `id` (of `count` actions) the log says are done or begun. */
export function parseLog(
  log: string,
  id: string,
  count: number,
): { done: Set<number>; begun: Map<number, string> } {
  const done = new Set<number>();
  const begun = new Map<number, string>();
  const lines = log.split('\n');
  lines.pop(); // after the last newline: empty, or a line the writer never finished
  for (const line of lines) {
    const m = LINE.exec(line);
    if (!m || m[1] !== id) continue;
    const [, , what, index = '', token = '', sum] = m;
    if (lineSum(line.slice(0, line.length - 9)) !== sum) continue;
    const i = Number(index);
    if (i >= count) continue;
    if (what === 'done') done.add(i);
    else begun.set(i, token === '-' ? '' : token);
  }
  for (const i of done) begun.delete(i);
  return { done, begun };
}

// ---- the journal ------------------------------------------------------------------------------

export class Journal {
  private constructor(
    private readonly state: StateDir,
    private readonly log: FileHandle,
    readonly id: string,
  ) {}

  private static async openLog(state: StateDir): Promise<FileHandle> {
    return state.openFile(LOG, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT);
  }

  /** Records a new plan; from here on a crash resumes it. */
  static async start(
    stateDir: string,
    checksum: string,
    actions: readonly Action[],
  ): Promise<Journal> {
    const state = await StateDir.open(stateDir);
    try {
      const id = randomBytes(8).toString('hex');
      const header: Header = {
        id,
        checksum,
        startedAt: new Date().toISOString(),
        actions: actions.map(stripContent),
      };
      await state.remove(LOG); // an older plan's lines
      await state.write(HEADER, Buffer.from(JSON.stringify(header)));
      return new Journal(state, await Journal.openLog(state), id);
    } catch (error) {
      await state.close();
      throw error;
    }
  }

  /** Continues a pending plan read by Journal.read. */
  static async resume(stateDir: string, pending: PendingApply): Promise<Journal> {
    const state = await StateDir.open(stateDir);
    try {
      return new Journal(state, await Journal.openLog(state), pending.id);
    } catch (error) {
      await state.close();
      throw error;
    }
  }

  /**
   * The pending apply, if any. A header that is unreadable or of the wrong shape is reported
   * through `warn` (naming the file) and removed: the agent then plans afresh.
   */
  static async read(
    stateDir: string,
    warn: (message: string) => void = () => undefined,
  ): Promise<PendingApply | undefined> {
    return StateDir.with(stateDir, async (state) => {
      const text = (await state.read(HEADER))?.toString('utf8');
      if (text === undefined) return undefined;
      const header = parseHeader(text);
      if (typeof header === 'string') {
        warn(
          `${state.file(HEADER)} is damaged (${header}): removed; the agent plans afresh from last-applied and the disk`,
        );
        await state.remove(HEADER);
        await state.remove(LOG);
        return undefined;
      }
      const log = (await state.read(LOG))?.toString('utf8') ?? '';
      const { done, begun } = parseLog(log, header.id, header.actions.length);
      return {
        id: header.id,
        checksum: header.checksum,
        startedAt: header.startedAt,
        actions: header.actions,
        done,
        begun,
      };
    });
  }

  async begin(index: number, token: string): Promise<void> {
    await this.append(formatLine(this.id, 'begin', index, token));
  }

  async done(index: number): Promise<void> {
    await this.append(formatLine(this.id, 'done', index, ''));
  }

  private async append(line: string): Promise<void> {
    // One write per line (O_APPEND): the kernel writes it whole or not at all when the process is
    // killed; a power cut may tear it, which the checksum catches.
    await this.log.write(line);
  }

  /** The plan finished (and last-applied was written): nothing to resume. */
  async finish(): Promise<void> {
    await this.state.remove(HEADER);
    await this.state.remove(LOG);
    await this.close();
  }

  private closed = false;

  /** Lets go of the files (the journal stays on disk for the next attempt to resume). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.log.close().catch(() => undefined);
    await this.state.close();
  }
}
