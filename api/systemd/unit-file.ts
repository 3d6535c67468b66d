// Parser and serializer for systemd unit files (and drop-ins), following the rules of
// systemd's own config parser (systemd.syntax(7), src/shared/conf-parser.c) rather than
// generic INI: repeated keys are kept in order, ';' and '#' only start a comment at the
// beginning of a line, a trailing backslash joins lines, and comment lines inside a
// continuation are skipped. Pure functions, no I/O, one pass over the text.

/** One `Key=Value` assignment. `value` is the logical value after continuation lines are joined. */
export interface UnitEntry {
  key: string;
  value: string;
  /** 1-based physical line where the assignment starts. */
  line: number;
}

/** One `[Name]` section with its assignments in file order. */
export interface UnitSection {
  name: string;
  /** 1-based line of the `[Name]` header. */
  line: number;
  entries: UnitEntry[];
}

/** A syntax problem; `message` says what is wrong and how to fix it (no "line N:" prefix). */
export interface UnitFileError {
  line: number;
  message: string;
}

export interface ParsedUnitFile {
  /** Sections in file order; a section name that occurs twice yields two sections. */
  sections: UnitSection[];
  errors: UnitFileError[];
}

/** What the serializer needs: line numbers are optional so callers can build units in code. */
export interface UnitSectionInput {
  readonly name: string;
  readonly entries: readonly { readonly key: string; readonly value: string }[];
}

/** Anything holding parsed sections (a `ParsedUnitFile` or `{ sections }`). */
export interface UnitFileLike {
  readonly sections: readonly UnitSection[];
}

/** Thrown by `serializeUnitFile` when a name, key or value cannot be written as systemd syntax. */
export class UnitFileSerializeError extends Error {
  override name = 'UnitFileSerializeError';
}

const SPACE = 0x20;
const TAB = 0x09;
const LF = 0x0a;
const CR = 0x0d;
const NUL = 0x00;
const BACKSLASH = 0x5c;
const HASH = 0x23;
const SEMICOLON = 0x3b;
const LBRACKET = 0x5b;
const RBRACKET = 0x5d;
const EQUALS = 0x3d;
const BOM = 0xfeff;

// systemd strips " \t\n\r"; \n and \r never survive line splitting, so only space and tab remain.
function isBlank(c: number): boolean {
  return c === SPACE || c === TAB;
}

function isEol(c: number): boolean {
  return c === LF || c === CR || c === NUL;
}

function eolBit(c: number): number {
  return c === LF ? 1 : c === CR ? 2 : 4;
}

function strip(s: string): string {
  let start = 0;
  let end = s.length;
  while (start < end && isBlank(s.charCodeAt(start))) start++;
  while (end > start && isBlank(s.charCodeAt(end - 1))) end--;
  return start === 0 && end === s.length ? s : s.slice(start, end);
}

function hasBlank(s: string): boolean {
  for (let i = 0; i < s.length; i++) if (isBlank(s.charCodeAt(i))) return true;
  return false;
}

/** Number of backslashes at the end of `s`; odd means the last one escapes the line end. */
function trailingBackslashes(s: string): number {
  let n = 0;
  for (let i = s.length - 1; i >= 0 && s.charCodeAt(i) === BACKSLASH; i--) n++;
  return n;
}

/** User text in a message, shortened so a huge line does not flood a status condition. */
function cut(s: string): string {
  const max = 80;
  return s.length > max ? `${s.slice(0, max)}…` : s;
}

function q(s: string): string {
  return `"${cut(s)}"`;
}

// Where a well-known key belongs, only to make the "before any section" message concrete.
const KEY_SECTION: Readonly<Record<string, string>> = {
  Description: 'Unit',
  Documentation: 'Unit',
  After: 'Unit',
  Before: 'Unit',
  Requires: 'Unit',
  Wants: 'Unit',
  BindsTo: 'Unit',
  PartOf: 'Unit',
  Conflicts: 'Unit',
  DefaultDependencies: 'Unit',
  Type: 'Service',
  ExecStart: 'Service',
  ExecStartPre: 'Service',
  ExecStartPost: 'Service',
  ExecStop: 'Service',
  ExecReload: 'Service',
  Restart: 'Service',
  RestartSec: 'Service',
  User: 'Service',
  Group: 'Service',
  Environment: 'Service',
  EnvironmentFile: 'Service',
  WorkingDirectory: 'Service',
  RemainAfterExit: 'Service',
  TimeoutStartSec: 'Service',
  WantedBy: 'Install',
  RequiredBy: 'Install',
  Alias: 'Install',
  Also: 'Install',
  OnCalendar: 'Timer',
  OnBootSec: 'Timer',
  OnUnitActiveSec: 'Timer',
  ListenStream: 'Socket',
  ListenDatagram: 'Socket',
  What: 'Mount',
  Where: 'Mount',
};

function isKeyChar(c: number): boolean {
  return (
    (c >= 0x41 && c <= 0x5a) || // A-Z
    (c >= 0x61 && c <= 0x7a) || // a-z
    (c >= 0x30 && c <= 0x39) || // 0-9
    c === 0x2d || // -
    c === 0x5f // _
  );
}

/** Message for a line in a section that has no '=' (systemd: "Missing '=', ignoring line."). */
function missingEqualsMessage(l: string): string {
  if (l.startsWith('.include ') || l === '.include') {
    return `${q(l)}: systemd no longer supports .include; move these settings into a drop-in file (<unit>.d/<name>.conf)`;
  }
  let i = 0;
  while (i < l.length && isKeyChar(l.charCodeAt(i))) i++;
  const word = l.slice(0, i);
  if (i > 0 && i === l.length) {
    return `${q(l)} is not a Key=Value assignment; write ${cut(word)}=<value>, or start the line with "#" to make it a comment`;
  }
  if (i > 0) {
    const c = l.charCodeAt(i);
    if (c === 0x3a /* : */ || isBlank(c)) {
      let j = i;
      while (j < l.length && isBlank(l.charCodeAt(j))) j++;
      if (l.charCodeAt(j) === 0x3a) j++;
      while (j < l.length && isBlank(l.charCodeAt(j))) j++;
      return `${q(l)} is not a Key=Value assignment; write ${cut(`${word}=${l.slice(j)}`)}`;
    }
  }
  return `${q(l)} is not a Key=Value assignment; write it as Key=Value, or start the line with "#" to make it a comment`;
}

class Parser {
  readonly sections: UnitSection[] = [];
  readonly errors: UnitFileError[] = [];
  private current: UnitSection | undefined;
  /** After a broken header, assignments belong to no section; the header error already says so. */
  private inBrokenSection = false;
  /** Report "before any section" once per run of orphan lines, not once per line. */
  private orphanReported = false;

  private error(line: number, message: string): void {
    this.errors.push({ line, message });
  }

  /**
   * Handle one logical line, `s[from, to)` with continuations already joined; mirrors systemd's
   * parse_line(). Works on indexes so the common line costs two slices (key and value).
   */
  logical(s: string, from: number, to: number, line: number): void {
    while (from < to && isBlank(s.charCodeAt(from))) from++;
    while (to > from && isBlank(s.charCodeAt(to - 1))) to--;
    if (from === to) return;
    if (s.charCodeAt(from) === LBRACKET) {
      this.header(s.slice(from, to), line);
      return;
    }
    // Bounded scan: indexOf could run past the line and turn many '='-less lines quadratic.
    let eq = from;
    while (eq < to && s.charCodeAt(eq) !== EQUALS) eq++;
    if (eq === to) {
      this.error(line, missingEqualsMessage(s.slice(from, to)));
      return;
    }
    if (eq === from) {
      const l = s.slice(from, to);
      this.error(
        line,
        `${q(l)} has no key before "="; write ${cut(`Key${l}`)}, or start the line with "#" to make it a comment`,
      );
      return;
    }
    let keyEnd = eq;
    while (isBlank(s.charCodeAt(keyEnd - 1))) keyEnd--;
    let valueStart = eq + 1;
    while (valueStart < to && isBlank(s.charCodeAt(valueStart))) valueStart++;
    const key = s.slice(from, keyEnd);
    const value = s.slice(valueStart, to);
    if (hasBlank(key)) {
      // systemd accepts the syntax but ignores the line as an unknown key; no real key has a blank.
      const sp = key.search(/[ \t]/);
      const first = key.slice(0, sp);
      const rest = strip(key.slice(sp));
      this.error(
        line,
        `key ${q(key)} contains whitespace, so systemd would ignore this line; did you mean ${cut(`${first}=${rest}=${value}`)}?`,
      );
      return;
    }
    if (key.charCodeAt(0) === BOM) {
      this.error(
        line,
        `key ${q(key.slice(1))} starts with a stray byte order mark (U+FEFF), so systemd would ignore this line; delete the invisible character before the key`,
      );
      return;
    }
    if (this.current === undefined) {
      if (!this.inBrokenSection && !this.orphanReported) {
        const hint = KEY_SECTION[key];
        this.error(
          line,
          `${q(s.slice(from, to))} appears before any section header, so systemd ignores it; add a header such as [${hint ?? 'Unit'}] above it`,
        );
        this.orphanReported = true;
      }
      return;
    }
    this.current.entries.push({ key, value, line });
  }

  private header(l: string, line: number): void {
    this.current = undefined;
    this.inBrokenSection = true;
    this.orphanReported = false;
    if (l.charCodeAt(l.length - 1) !== RBRACKET) {
      const close = l.indexOf(']');
      if (close > 0) {
        this.error(
          line,
          `section header ${q(l)} has text after "]"; put comments on their own line and write ${cut(l.slice(0, close + 1))}`,
        );
      } else {
        this.error(
          line,
          `section header ${q(l)} is missing its closing "]"; write ${cut(l)}] (systemd refuses the whole file otherwise)`,
        );
      }
      return;
    }
    const name = l.slice(1, -1);
    if (name.length === 0) {
      this.error(
        line,
        'empty section name "[]"; name the section, for example [Unit], [Service] or [Install]',
      );
      return;
    }
    if (name.includes('[') || name.includes(']')) {
      const clean = strip(name.replace(/[[\]]/g, ''));
      this.error(
        line,
        `section name ${q(name)} contains "[" or "]", so systemd would not recognise it; write [${cut(clean)}]`,
      );
      return;
    }
    if (isBlank(name.charCodeAt(0)) || isBlank(name.charCodeAt(name.length - 1))) {
      this.error(
        line,
        `section name ${q(name)} has spaces inside the brackets, so systemd would not recognise it; write [${cut(strip(name))}]`,
      );
      return;
    }
    this.inBrokenSection = false;
    this.current = { name, line, entries: [] };
    this.sections.push(this.current);
  }
}

/**
 * Parse a unit file or drop-in. Never throws: problems are returned in `errors` and the offending
 * line is left out, as systemd ignores it. Line endings \n, \r\n, \r (and \0, as systemd does) are
 * accepted, as is a UTF-8 byte order mark at the start.
 */
export function parseUnitFile(text: string): ParsedUnitFile {
  const p = new Parser();
  const n = text.length;
  let pos = n > 0 && text.charCodeAt(0) === BOM ? 1 : 0;
  let lineNo = 0;
  let continuation: string | undefined;
  let continuationLine = 0;

  while (pos < n) {
    // One physical line, text[start, end): up to the next \n, \r or \0.
    const start = pos;
    let end = pos;
    while (end < n && !isEol(text.charCodeAt(end))) end++;
    // Consume the line ending like systemd's read_line(): a run of distinct markers counts as one
    // ending (\r\n and \n\r are one, \n\n is two), and \0 always ends it.
    pos = end;
    let seen = 0;
    while (pos < n) {
      const c = text.charCodeAt(pos);
      if (!isEol(c)) break;
      const bit = eolBit(c);
      if ((seen & bit) !== 0 || (seen & 4) !== 0) break;
      seen |= bit;
      pos++;
    }
    lineNo++;

    // Comment lines are skipped everywhere, including in the middle of a continuation.
    let i = start;
    while (i < end && isBlank(text.charCodeAt(i))) i++;
    const first = i < end ? text.charCodeAt(i) : -1;
    if (first === HASH || first === SEMICOLON) continue;

    if (continuation === undefined) continuationLine = lineNo;
    // Odd trailing backslashes: the last one escapes the line end and becomes a space. An earlier
    // part of a continuation ends in that space, so the run always lies within this line.
    let backslashes = 0;
    while (end - backslashes > start && text.charCodeAt(end - backslashes - 1) === BACKSLASH) {
      backslashes++;
    }
    if (backslashes % 2 === 1) {
      continuation = `${continuation ?? ''}${text.slice(start, end - 1)} `;
      continue;
    }
    if (continuation === undefined) {
      p.logical(text, start, end, lineNo);
    } else {
      const joined = continuation + text.slice(start, end);
      continuation = undefined;
      p.logical(joined, 0, joined.length, continuationLine);
    }
  }
  if (continuation !== undefined) p.logical(continuation, 0, continuation.length, continuationLine);
  return { sections: p.sections, errors: p.errors };
}

function hasLineBreak(s: string): boolean {
  for (let i = 0; i < s.length; i++) if (isEol(s.charCodeAt(i))) return true;
  return false;
}

function checkSectionName(name: string): void {
  const where = `section [${name}]`;
  if (name.length === 0)
    throw new UnitFileSerializeError('section name is empty; name it, e.g. Service');
  if (hasLineBreak(name))
    throw new UnitFileSerializeError(`${where}: name contains a line break or NUL; remove it`);
  if (name.includes('[') || name.includes(']'))
    throw new UnitFileSerializeError(`${where}: name must not contain "[" or "]"`);
  if (isBlank(name.charCodeAt(0)) || isBlank(name.charCodeAt(name.length - 1)))
    throw new UnitFileSerializeError(`${where}: name has leading or trailing whitespace; trim it`);
}

function checkEntry(section: string, key: string, value: string): void {
  const where = `[${section}] ${key}`;
  if (key.length === 0) throw new UnitFileSerializeError(`[${section}]: an entry has an empty key`);
  if (hasLineBreak(key) || hasLineBreak(value))
    throw new UnitFileSerializeError(
      `${where}: key or value contains a line break or NUL, which a unit file cannot hold; use several assignments or an escape the setting understands`,
    );
  if (key.includes('=')) throw new UnitFileSerializeError(`${where}: key must not contain "="`);
  if (hasBlank(key)) throw new UnitFileSerializeError(`${where}: key must not contain whitespace`);
  const c = key.charCodeAt(0);
  if (c === HASH || c === SEMICOLON || c === LBRACKET || c === BOM)
    throw new UnitFileSerializeError(
      `${where}: key must not start with "#", ";", "[" or a byte order mark`,
    );
  if (
    value.length > 0 &&
    (isBlank(value.charCodeAt(0)) || isBlank(value.charCodeAt(value.length - 1)))
  )
    throw new UnitFileSerializeError(
      `${where}: value has leading or trailing whitespace, which systemd strips; trim it`,
    );
}

/**
 * Canonical text: `[Section]` then one `Key=Value` line per entry, a blank line between sections,
 * `\n` line endings, no comments. Parsing the result gives back the same sections and entries
 * (names, keys, values, order) with no errors. Throws `UnitFileSerializeError` for content that
 * systemd syntax cannot express (line breaks, whitespace at the ends of a value, "=" in a key...).
 */
export function serializeUnitFile(sections: readonly UnitSectionInput[]): string {
  const out: string[] = [];
  for (let s = 0; s < sections.length; s++) {
    const section = sections[s];
    if (section === undefined) continue;
    checkSectionName(section.name);
    if (s > 0) out.push('\n');
    out.push('[', section.name, ']\n');
    for (const { key, value } of section.entries) {
      checkEntry(section.name, key, value);
      out.push(key, '=', value);
      // A value ending in an odd number of backslashes would read as a continuation; a trailing
      // space ends the line instead and is stripped again on parse.
      if (trailingBackslashes(value) % 2 === 1) out.push(' ');
      out.push('\n');
    }
  }
  return out.join('');
}

/** All entries `key` in every section called `section` (names are case-sensitive), in order. */
export function findEntries(parsed: UnitFileLike, section: string, key: string): UnitEntry[] {
  const found: UnitEntry[] = [];
  for (const s of parsed.sections) {
    if (s.name !== section) continue;
    for (const e of s.entries) if (e.key === key) found.push(e);
  }
  return found;
}

/** True when `[section]` has at least one `key=` line (an empty reset assignment counts). */
export function hasKey(parsed: UnitFileLike, section: string, key: string): boolean {
  for (const s of parsed.sections) {
    if (s.name !== section) continue;
    for (const e of s.entries) if (e.key === key) return true;
  }
  return false;
}

/** Distinct section names in order of first appearance. */
export function sectionNames(parsed: UnitFileLike): string[] {
  return [...new Set(parsed.sections.map((s) => s.name))];
}

/** The value of the last `key=` assignment (what a single-valued setting ends up as), if any. */
export function lastValue(parsed: UnitFileLike, section: string, key: string): string | undefined {
  return findEntries(parsed, section, key).at(-1)?.value;
}

/**
 * Values of a list setting such as ExecStart= or Environment= after systemd's reset rule: an empty
 * assignment clears everything before it. `[]` when the key is absent or the last one is a reset.
 */
export function valuesAfterReset(parsed: UnitFileLike, section: string, key: string): string[] {
  const values: string[] = [];
  for (const e of findEntries(parsed, section, key)) {
    if (e.value === '') values.length = 0;
    else values.push(e.value);
  }
  return values;
}

/** Same sections, keys and values in the same order; line numbers are ignored. */
export function sameUnitContent(
  a: readonly UnitSectionInput[],
  b: readonly UnitSectionInput[],
): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i];
    const y = b[i];
    if (x === undefined || y === undefined) return false;
    if (x.name !== y.name || x.entries.length !== y.entries.length) return false;
    for (let j = 0; j < x.entries.length; j++) {
      const e = x.entries[j];
      const f = y.entries[j];
      if (e === undefined || f === undefined) return false;
      if (e.key !== f.key || e.value !== f.value) return false;
    }
  }
  return true;
}

/** `line 4: message`, or `path:4: message` when a file name is given (the form systemd logs). */
export function formatUnitFileError(error: UnitFileError, file?: string): string {
  return file === undefined
    ? `line ${error.line}: ${error.message}`
    : `${file}:${error.line}: ${error.message}`;
}
