/** A logger into memory, for tests that read what was logged (JSON records, one per line). */
import { createLogger, type Logger } from './logger.js';

export interface MemoryLogger {
  log: Logger;
  /** The raw lines written so far. */
  lines: string[];
  /** The records written so far, parsed. */
  records: () => Record<string, unknown>[];
}

export function memoryLogger(component = 'test', level = 'debug'): MemoryLogger {
  const lines: string[] = [];
  const log = createLogger({
    component,
    level,
    destination: {
      write: (line: string) => {
        lines.push(line);
      },
    },
  });
  return {
    log,
    lines,
    records: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}
