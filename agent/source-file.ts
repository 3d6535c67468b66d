/**
 * The file source: follows one local file (canonical JSON or OSC YAML) with chokidar, for
 * machines without API access and for local use. Editors save by rename or in several writes, so
 * a change is read only once the file stands still (agent/stable-file.ts: a half-saved file is
 * often still valid, with units missing), and a file that does not parse is reported, never
 * half-applied.
 */
import { readFile } from 'node:fs/promises';
import { watch, type FSWatcher } from 'chokidar';
import { AWAIT_WRITE_FINISH, readStableFile } from './stable-file.js';
import { desiredFromText, type Expand } from './desired.js';
import type { Source, SourceEvents } from './source.js';

export interface FileSourceOptions {
  /** Quiet time after the last change before the file is read again. */
  debounceMs?: number;
  /** How long the file must stand still before a change is read (agent/stable-file.ts). */
  quietMs?: number;
  expand?: Expand;
  /** Watch for changes (default true); false reads the file once. */
  watch?: boolean;
}

export class FileSource implements Source {
  readonly description: string;
  private watcher: FSWatcher | undefined;
  private timer: NodeJS.Timeout | undefined;
  private lastChecksum: string | undefined;

  constructor(
    private readonly path: string,
    private readonly opts: FileSourceOptions = {},
  ) {
    this.description = `file ${path}`;
  }

  async start(events: SourceEvents): Promise<void> {
    await this.read(events, false);
    if (this.opts.watch === false) return;
    const watcher = watch(this.path, {
      ignoreInitial: true,
      atomic: true,
      awaitWriteFinish: {
        ...AWAIT_WRITE_FINISH,
        stabilityThreshold: this.opts.quietMs ?? AWAIT_WRITE_FINISH.stabilityThreshold,
      },
    });
    this.watcher = watcher;
    const schedule = (): void => {
      if (this.timer) clearTimeout(this.timer);
      this.timer = setTimeout(() => void this.read(events, true), this.opts.debounceMs ?? 100);
    };
    watcher.on('add', schedule).on('change', schedule);
    watcher.on('error', (error) => {
      events.onError(error instanceof Error ? error : new Error(String(error)));
    });
    await new Promise<void>((resolve) => watcher.once('ready', resolve));
  }

  private async read(events: SourceEvents, changed: boolean): Promise<void> {
    let text: string;
    try {
      text = changed
        ? (
            await readStableFile(
              this.path,
              this.opts.quietMs === undefined ? {} : { quietMs: this.opts.quietMs },
            )
          ).toString('utf8')
        : await readFile(this.path, 'utf8');
    } catch (error) {
      events.onError(
        new Error(`cannot read ${this.path}: ${(error as Error).message}`, { cause: error }),
      );
      return;
    }
    try {
      const desired = await desiredFromText(text, this.path, this.opts.expand);
      if (desired.checksum === this.lastChecksum) return;
      this.lastChecksum = desired.checksum;
      events.onDesired(desired);
    } catch (error) {
      events.onError(error as Error);
    }
  }

  async stop(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    await this.watcher?.close();
    this.watcher = undefined;
  }
}
