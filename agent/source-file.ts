/**
 * The file source: follows one local file (canonical JSON or OSC YAML) with chokidar, for
 * machines without API access and for local use. Editors save by rename or in several writes, so
 * changes are debounced and a file that does not parse is reported, never half-applied.
 */
import { readFile } from 'node:fs/promises';
import { watch, type FSWatcher } from 'chokidar';
import { desiredFromText, type Expand } from './desired.js';
import type { Source, SourceEvents } from './source.js';

export interface FileSourceOptions {
  /** Quiet time after the last change before the file is read again. */
  debounceMs?: number;
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
    await this.read(events);
    if (this.opts.watch === false) return;
    const watcher = watch(this.path, { ignoreInitial: true, atomic: true });
    this.watcher = watcher;
    const schedule = (): void => {
      if (this.timer) clearTimeout(this.timer);
      this.timer = setTimeout(() => void this.read(events), this.opts.debounceMs ?? 100);
    };
    watcher.on('add', schedule).on('change', schedule);
    watcher.on('error', (error) => {
      events.onError(error instanceof Error ? error : new Error(String(error)));
    });
    await new Promise<void>((resolve) => watcher.once('ready', resolve));
  }

  private async read(events: SourceEvents): Promise<void> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
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
