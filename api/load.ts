/**
 * Reading OperatingSystemConfig documents from YAML text: multi-document streams, syntax errors
 * with line numbers, and size limits checked before any document is validated, so a huge input
 * is refused quickly with a message about its size. Every document knows the line each of its
 * fields starts on, so a problem is reported as `file:line`, the form editors jump to.
 */
import {
  isMap,
  isNode,
  isScalar,
  isSeq,
  LineCounter,
  parseAllDocuments,
  type Document,
} from 'yaml';
import { formatBytes } from './bytes.js';
import { GROUP, OSC_KIND, OSC_NODE_KIND } from './constants.js';
import { fieldError, type FieldError } from './field-error.js';
import { LIMITS } from './schema.js';

/** Above this a file is refused before it is parsed at all. */
export const MAX_FILE_BYTES = 32 * 1024 * 1024;

/** A problem found while reading a document, with the line it is on. */
export interface LocatedError extends FieldError {
  line: number;
}

/** What a document of a stream is to oscar. */
export type DocumentRole =
  /** An OperatingSystemConfig (or something that means to be one: no kind, a wrong apiVersion). */
  | 'osc'
  /** An object of another kind (a Secret, a ConfigMap, …): skipped with a note. */
  | 'other'
  /** No content: a trailing `---`, a document of comments only. Skipped silently. */
  | 'empty';

export interface LoadedDocument {
  /** 1-based position of the document in its stream. */
  index: number;
  /** 1-based line the document's content starts on. */
  line: number;
  value: unknown;
  role: DocumentRole;
  /** Syntax and size problems; when non-empty, `value` must not be used. */
  errors: LocatedError[];
  /**
   * The line of the field at `path` (`spec.files[2].permissions`), or of its nearest parent that
   * is in the document (a missing field is reported where its object starts).
   */
  lineOf(path: string): number;
}

/** "spec.files[2].path" → ["spec", "files", 2, "path"]. */
export function pathSegments(path: string): (string | number)[] {
  const out: (string | number)[] = [];
  for (const part of path.split('.')) {
    if (part === '') continue;
    const m = /^([^[]*)((?:\[\d+\])*)$/.exec(part);
    if (!m) {
      out.push(part);
      continue;
    }
    if (m[1]) out.push(m[1]);
    for (const index of (m[2] ?? '').matchAll(/\[(\d+)\]/g)) out.push(Number(index[1]));
  }
  return out;
}

function whole(index: number, line: number, message: string): LoadedDocument {
  return {
    index,
    line,
    value: undefined,
    role: 'osc',
    errors: [{ ...fieldError('', message), line }],
    lineOf: () => line,
  };
}

/**
 * oscar's kinds other than OperatingSystemConfig: a document of one of them is skipped. Any other
 * kind in the oscar.dev group is a mistake for an OSC and is checked as one (its kind is refused).
 */
export const OTHER_OSCAR_KINDS: ReadonlySet<string> = new Set([OSC_NODE_KIND]);

/**
 * An OSC is what says so, what has no kind, what is in oscar's group without being another of its
 * kinds, and what nearly spells the kind (`OperatingSystemConfigs`, `operatingsystemconfig`):
 * those are checked and refused with the field that is wrong, never skipped unseen.
 */
function roleOf(value: unknown, hasContent: boolean): DocumentRole {
  if (!hasContent || value === null || value === undefined) return 'empty';
  if (typeof value !== 'object' || Array.isArray(value)) return 'osc';
  const { kind, apiVersion } = value as { kind?: unknown; apiVersion?: unknown };
  if (typeof kind !== 'string' || kind === OSC_KIND) return 'osc';
  if (kind.toLowerCase().replace(/s$/, '') === OSC_KIND.toLowerCase()) return 'osc';
  if (typeof apiVersion === 'string' && apiVersion.startsWith(`${GROUP}/`)) {
    return OTHER_OSCAR_KINDS.has(kind) ? 'other' : 'osc';
  }
  return 'other';
}

/** `v1 Secret "join"`: how a skipped document is named in notes. */
export function describeDocument(value: unknown): string {
  const o = (typeof value === 'object' && value !== null ? value : {}) as {
    apiVersion?: unknown;
    kind?: unknown;
    metadata?: { name?: unknown };
  };
  const parts = [o.apiVersion, o.kind].filter((p) => typeof p === 'string');
  const name = o.metadata?.name;
  return `${parts.join(' ') || 'an object'}${typeof name === 'string' ? ` "${name}"` : ''}`;
}

/**
 * Walks the path through the document's nodes: a mapping entry is located at its key (the line
 * that names the field), a list item where it starts. A segment that is not there stops the walk
 * at the line of the last one that is.
 */
function locate(doc: Document, counter: LineCounter, start: number) {
  return (path: string): number => {
    let node: unknown = doc.contents;
    let offset = isNode(node) && node.range ? node.range[0] : start;
    for (const segment of pathSegments(path)) {
      if (typeof segment === 'string' && isMap(node)) {
        const pair = node.items.find((p) => isScalar(p.key) && p.key.value === segment);
        if (!pair || !isNode(pair.key) || !pair.key.range) break;
        offset = pair.key.range[0];
        node = pair.value;
      } else if (typeof segment === 'number' && isSeq(node)) {
        const item: unknown = node.items[segment];
        if (!isNode(item) || !item.range) break;
        offset = item.range[0];
        node = item;
      } else {
        break;
      }
    }
    return counter.linePos(offset).line;
  };
}

export function loadDocuments(text: string): LoadedDocument[] {
  const bytes = Buffer.byteLength(text);
  if (bytes > MAX_FILE_BYTES) {
    return [
      whole(
        1,
        1,
        `the file is ${formatBytes(bytes)}; oscar reads at most ${formatBytes(MAX_FILE_BYTES)}, and one OperatingSystemConfig must fit in ${formatBytes(LIMITS.documentBytes)}`,
      ),
    ];
  }
  const counter = new LineCounter();
  const documents = parseAllDocuments(text, {
    prettyErrors: true,
    uniqueKeys: true,
    lineCounter: counter,
  });
  const list = Array.isArray(documents) ? documents : [];
  const loaded = list.map((doc, i): LoadedDocument => {
    const index = i + 1;
    const [start, , end] = doc.range;
    const contentStart = isNode(doc.contents) ? doc.contents.range[0] : start;
    const line = counter.linePos(contentStart).line;
    const size = Buffer.byteLength(text.slice(start, end));
    if (size > LIMITS.documentBytes) {
      return whole(
        index,
        line,
        `the document is ${formatBytes(size)}; an OperatingSystemConfig must fit in ${formatBytes(LIMITS.documentBytes)} (the API server's request limit) and its files in a 1 MiB Secret; ship large files in the image instead`,
      );
    }
    const lineOf = locate(doc, counter, contentStart);
    if (doc.errors.length > 0) {
      return {
        index,
        line,
        value: undefined,
        role: 'osc',
        lineOf,
        errors: doc.errors.map((e) => {
          const where = e.linePos?.[0];
          return {
            ...fieldError(
              '',
              `YAML syntax error${where ? ` at column ${where.col}` : ''}: ${(e.message.split('\n')[0] ?? '').replace(/ at line \d+, column \d+:?$/, '')}`,
            ),
            line: where?.line ?? line,
          };
        }),
      };
    }
    try {
      const value = doc.toJS({ maxAliasCount: 100 }) as unknown;
      return { index, line, value, role: roleOf(value, doc.contents !== null), errors: [], lineOf };
    } catch (error) {
      return whole(index, line, `cannot read the document: ${(error as Error).message}`);
    }
  });
  const flat = renumber(loaded.flatMap(listItems));
  if (flat.every((d) => d.role === 'empty' && d.errors.length === 0)) {
    return [whole(1, 1, 'the file has no YAML documents; write an OperatingSystemConfig in it')];
  }
  return flat;
}

/** `kind: List` (v1) or `…List` with `items`: what `kubectl get … -o yaml` prints for several objects. */
function isList(value: unknown): value is { items: unknown[] } {
  if (typeof value !== 'object' || value === null) return false;
  const { kind, items } = value as { kind?: unknown; items?: unknown };
  return typeof kind === 'string' && kind.endsWith('List') && Array.isArray(items);
}

/**
 * A list's items, each read as a document of its own (its lines and field paths inside the
 * list); any other document as it is. An empty list is an empty document.
 */
function listItems(doc: LoadedDocument): LoadedDocument[] {
  if (doc.errors.length > 0 || !isList(doc.value)) return [doc];
  if (doc.value.items.length === 0) return [{ ...doc, value: undefined, role: 'empty' }];
  return doc.value.items.map((item, i) => {
    const prefix = `items[${String(i)}]`;
    const lineOf = (path: string): number => doc.lineOf(path ? `${prefix}.${path}` : prefix);
    return { ...doc, line: lineOf(''), value: item, role: roleOf(item, true), lineOf };
  });
}

/** Documents numbered by their place in the stream once lists are unfolded. */
function renumber(docs: LoadedDocument[]): LoadedDocument[] {
  return docs.map((d, i) => (d.index === i + 1 ? d : { ...d, index: i + 1 }));
}

/**
 * One problem as a line: `FILE:LINE: PATH: MESSAGE`, with `document N: ` after the location when
 * the stream holds several documents (the line alone is ambiguous to no editor, but a person
 * reading a long stream wants to know which object it is).
 */
export function formatProblem(
  file: string,
  line: number,
  error: FieldError,
  documentIndex?: number,
): string {
  const where = documentIndex === undefined ? '' : `document ${String(documentIndex)}: `;
  return `${file}:${String(line)}: ${where}${error.path ? `${error.path}: ` : ''}${error.message}`;
}

/** Whether problems in this stream should name their document (it has several that count). */
export function namesDocuments(docs: readonly LoadedDocument[]): boolean {
  return docs.filter((d) => d.role !== 'empty').length > 1;
}

/** The note for a document that is skipped because it is not an OperatingSystemConfig. */
export function skipNote(file: string, doc: LoadedDocument): string {
  return `${file}:${String(doc.line)}: note: skipping document ${String(doc.index)} (${describeDocument(doc.value)}): not an ${OSC_KIND}`;
}
