/**
 * Structured JSON logs (pino). The controller logs names, keys, checksums, counts and error
 * messages — never an object's data, a file's content or a request body. The redaction below is
 * a second line of defence should a whole object ever be passed by mistake.
 */
import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger } from 'pino';

export const REDACT_PATHS = [
  'data',
  'stringData',
  'binaryData',
  '*.data',
  '*.stringData',
  '*.binaryData',
  'spec.files',
  '*.spec.files',
  'body',
  '*.body',
  'userData',
  '*.userData',
];

export function createLogger(
  options: { level?: string; name?: string } = {},
  destination?: DestinationStream,
): Logger {
  const opts = {
    name: options.name ?? 'oscar-controller',
    level: options.level ?? process.env.OSCAR_LOG_LEVEL ?? 'info',
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    base: { pid: process.pid },
  };
  return destination ? pino(opts, destination) : pino(opts);
}

/** An error's message and name only: stacks are noise in a controller log, bodies may leak. */
export function errorFields(error: unknown): { err: string; errName?: string } {
  if (error instanceof Error) return { err: error.message, errName: error.name };
  return { err: String(error) };
}
