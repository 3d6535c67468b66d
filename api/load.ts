/**
 * Reading OperatingSystemConfig documents from YAML text: multi-document streams, syntax errors
 * with line numbers, and size limits checked before any document is validated, so a huge input
 * is refused quickly with a message about its size.
 */
import { parseAllDocuments } from 'yaml';
import { formatBytes } from './bytes.js';
import { fieldError, type FieldError } from './field-error.js';
import { LIMITS } from './schema.js';

/** Above this a file is refused before it is parsed at all. */
export const MAX_FILE_BYTES = 32 * 1024 * 1024;

export interface LoadedDocument {
  /** 1-based position of the document in its stream. */
  index: number;
  value: unknown;
  /** Syntax and size problems; when non-empty, `value` must not be used. */
  errors: FieldError[];
}

export function loadDocuments(text: string): LoadedDocument[] {
  const bytes = Buffer.byteLength(text);
  if (bytes > MAX_FILE_BYTES) {
    return [
      {
        index: 1,
        value: undefined,
        errors: [
          fieldError(
            '',
            `the file is ${formatBytes(bytes)}; oscar reads at most ${formatBytes(MAX_FILE_BYTES)}, and one OperatingSystemConfig must fit in ${formatBytes(LIMITS.documentBytes)}`,
          ),
        ],
      },
    ];
  }
  const documents = parseAllDocuments(text, { prettyErrors: true, uniqueKeys: true });
  const list = Array.isArray(documents) ? documents : [];
  if (list.length === 0) {
    return [
      {
        index: 1,
        value: undefined,
        errors: [
          fieldError('', 'the file has no YAML documents; write an OperatingSystemConfig in it'),
        ],
      },
    ];
  }
  return list.map((doc, i) => {
    const index = i + 1;
    const [start, , end] = doc.range;
    const size = Buffer.byteLength(text.slice(start, end));
    if (size > LIMITS.documentBytes) {
      return {
        index,
        value: undefined,
        errors: [
          fieldError(
            '',
            `the document is ${formatBytes(size)}; an OperatingSystemConfig must fit in ${formatBytes(LIMITS.documentBytes)} (the API server's request limit) and its files in a 1 MiB Secret; ship large files in the image instead`,
          ),
        ],
      };
    }
    if (doc.errors.length > 0) {
      return {
        index,
        value: undefined,
        errors: doc.errors.map((e) => {
          const where = e.linePos?.[0];
          return fieldError(
            '',
            `YAML syntax error${where ? ` at line ${where.line}, column ${where.col}` : ''}: ${(e.message.split('\n')[0] ?? '').replace(/ at line \d+, column \d+:?$/, '')}`,
          );
        }),
      };
    }
    try {
      return { index, value: doc.toJS({ maxAliasCount: 100 }) as unknown, errors: [] };
    } catch (error) {
      return {
        index,
        value: undefined,
        errors: [fieldError('', `cannot read the document: ${(error as Error).message}`)],
      };
    }
  });
}
