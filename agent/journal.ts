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
 */
import { randomBytes } from 'node:crypto';
import { appendFile, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Action } from './plan.js';
import { writeFileAtomic } from './fs.js';

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

export class Journal {
  private constructor(
    private readonly stateDir: string,
    readonly id: string,
  ) {}

  /** Records a new plan; from here on a crash resumes it. */
  static async start(
    stateDir: string,
    checksum: string,
    actions: readonly Action[],
  ): Promise<Journal> {
    const id = randomBytes(8).toString('hex');
    const header: Header = {
      id,
      checksum,
      startedAt: new Date().toISOString(),
      actions: actions.map(stripContent),
    };
    await writeFileAtomic(
      join(stateDir, HEADER),
      Buffer.from(JSON.stringify(header)),
      0o600,
      undefined,
    );
    return new Journal(stateDir, id);
  }

  /** Continues a pending plan read by Journal.read. */
  static resume(stateDir: string, pending: PendingApply): Journal {
    return new Journal(stateDir, pending.id);
  }

  static async read(stateDir: string): Promise<PendingApply | undefined> {
    let header: Header;
    try {
      header = JSON.parse(await readFile(join(stateDir, HEADER), 'utf8')) as Header;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      return undefined; // written atomically: unreadable means foreign damage; plan afresh
    }
    const done = new Set<number>();
    const begun = new Map<number, string>();
    let log = '';
    try {
      log = await readFile(join(stateDir, LOG), 'utf8');
    } catch {
      // no step finished yet
    }
    for (const line of log.split('\n')) {
      const [id, what, index, token = ''] = line.split(' ');
      if (id !== header.id || index === undefined) continue;
      const i = Number(index);
      if (what === 'done') done.add(i);
      else if (what === 'begin') begun.set(i, token === '-' ? '' : token);
    }
    for (const i of done) begun.delete(i);
    return {
      id: header.id,
      checksum: header.checksum,
      startedAt: header.startedAt,
      actions: header.actions,
      done,
      begun,
    };
  }

  async begin(index: number, token: string): Promise<void> {
    await this.append(`${this.id} begin ${index} ${token || '-'}\n`);
  }

  async done(index: number): Promise<void> {
    await this.append(`${this.id} done ${index}\n`);
  }

  private async append(line: string): Promise<void> {
    // One append per line: the kernel writes it whole or not at all when the process is killed.
    await appendFile(join(this.stateDir, LOG), line, { mode: 0o600 });
  }

  /** The plan finished (and last-applied was written): nothing to resume. */
  async finish(): Promise<void> {
    await rm(join(this.stateDir, HEADER), { force: true });
    await rm(join(this.stateDir, LOG), { force: true });
  }
}
