/**
 * One logging convention for every long-running oscar command (controller, agent, renderer
 * server): pino, one record per line on stderr, the same base fields and field names everywhere
 * (docs/operations.md lists them), JSON where a machine reads the logs (in a pod, under systemd,
 * into a pipe) and text on a terminal. Loggers carry names, keys, checksums, counts and error
 * messages — never an object's data, a file's content or a request body; the redaction below is a
 * second line of defence should a whole object ever be passed by mistake.
 */
import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';

export type { Logger } from 'pino';

export const LOG_FORMATS = ['json', 'text'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'silent'] as const;

/** Paths pino replaces with "[redacted]": Secret and ConfigMap data, file lists, bodies. */
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

export interface CreateLoggerOptions {
  /** What writes the record: controller, agent, renderer, … (the `component` field). */
  component: string;
  /** trace, debug, info (default: $OSCAR_LOG_LEVEL, else info), warn, error, silent. */
  level?: string;
  /** For openLogger; default: defaultLogFormat(). createLogger always writes JSON. */
  format?: LogFormat;
  /** Where records go (tests; in text format, the lines); default: stderr, synchronously. */
  destination?: DestinationStream;
}

/**
 * JSON in a cluster (KUBERNETES_SERVICE_HOST is set in every pod) and whenever stderr is not a
 * terminal (systemd's journal, a pipe, a file); text when a person watches a terminal.
 */
export function defaultLogFormat(
  env: NodeJS.ProcessEnv = process.env,
  stderrIsTty: boolean = process.stderr.isTTY,
): LogFormat {
  if (env.KUBERNETES_SERVICE_HOST) return 'json';
  return stderrIsTty ? 'text' : 'json';
}

/** Checks a --log-format / --log-level value; the message names the flag and the choices. */
export function parseLogFormat(value: string | undefined): LogFormat | undefined {
  if (value === undefined) return undefined;
  if ((LOG_FORMATS as readonly string[]).includes(value)) return value as LogFormat;
  throw new Error(`--log-format must be one of ${LOG_FORMATS.join(', ')} (got "${value}")`);
}

export function parseLogLevel(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  if ((LOG_LEVELS as readonly string[]).includes(value)) return value;
  throw new Error(`--log-level must be one of ${LOG_LEVELS.join(', ')} (got "${value}")`);
}

/**
 * The text form, for terminals: pino-pretty, one line per record, loaded only when asked for (the
 * agent's memory on a node is every node's) — by import(), so a bundle (hack/image/bundle.ts)
 * carries it too. Synchronous, like the JSON destination, so nothing is lost when a bounded
 * shutdown ends the process.
 */
export async function textDestination(destination?: DestinationStream): Promise<DestinationStream> {
  const { default: pretty } = await import('pino-pretty');
  return pretty({
    sync: true,
    destination: destination ?? 2,
    colorize: destination === undefined && process.stderr.isTTY,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname,component',
    // a message may carry a path (a tab or newline is legal in one) or a name a local user chose:
    // its control characters are written escaped, so it can neither end the line and forge the
    // next record nor send escape sequences to the terminal (fields are JSON: escaped already)
    messageFormat: (record: Record<string, unknown>) =>
      `${String(record.component)}: ${escapeControls(typeof record.msg === 'string' ? record.msg : '')}`,
    singleLine: true,
  });
}

/** C0 and C1 control characters and DEL as JSON escapes (\n, \u001b …), the rest as it is. */
export function escapeControls(text: string): string {
  // eslint-disable-next-line no-control-regex -- control characters are what this escapes
  return text.replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) =>
    c === '\n'
      ? '\\n'
      : c === '\r'
        ? '\\r'
        : c === '\t'
          ? '\\t'
          : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/** Records as JSON lines into `destination` (default: stderr, written synchronously). */
export function createLogger(options: CreateLoggerOptions): Logger {
  const opts: LoggerOptions = {
    level: options.level ?? process.env.OSCAR_LOG_LEVEL ?? 'info',
    base: { component: options.component },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
  };
  return pino(opts, options.destination ?? pino.destination({ dest: 2, sync: true }));
}

/** The logger of a command: JSON or text by `format` (default: defaultLogFormat()). */
export async function openLogger(options: CreateLoggerOptions): Promise<Logger> {
  if ((options.format ?? defaultLogFormat()) === 'json') return createLogger(options);
  return createLogger({ ...options, destination: await textDestination(options.destination) });
}

/** A logger that writes nothing (library defaults, tests that do not read logs). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}

/** An error's message and name only: stacks are noise in a service log, bodies may leak. */
export function errorFields(error: unknown): { err: string; errName?: string } {
  if (error instanceof Error) return { err: error.message, errName: error.name };
  return { err: String(error) };
}

/** The first 12 characters of a sha256: what logs, status columns and `oscar plan` show. */
export function shortChecksum(checksum: string): string {
  return checksum.slice(0, 12);
}
