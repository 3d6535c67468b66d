/**
 * A small YAML writer for the shapes cloud-config needs: scalars, literal block scalars, lists.
 * A general YAML library would do, but it is the slowest part of rendering a large payload, and
 * cloud-init reads YAML 1.1 with PyYAML, whose implicit types (0644 is an octal int, 1:20 a
 * sexagesimal int, "on" a boolean) differ from YAML 1.2. So every scalar is written either plain
 * when it cannot be read as anything but that string in YAML 1.1 or 1.2, or double-quoted with
 * escapes, which both read exactly.
 */

/** Plain scalars we allow: paths and words, starting with "/" or a letter. */
const PLAIN = /^(?:[A-Za-z/][A-Za-z0-9_./@+-]*|--[a-z][a-z-]*)$/;
/** YAML 1.1 booleans and nulls that PLAIN would otherwise let through. */
const RESERVED = new Set(['y', 'n', 'yes', 'no', 'on', 'off', 'true', 'false', 'null']);

/** Exponent-only floats ("e5") that some YAML 1.1 readers take for numbers. */
const EXPONENT = /^[eE][-+]?[0-9]+$/;

export function isPlainSafe(s: string): boolean {
  if (!PLAIN.test(s)) return false;
  // the reserved words are at most 5 characters long: no lower-casing for a path
  if (s.length <= 5 && RESERVED.has(s.toLowerCase())) return false;
  const c = s.charCodeAt(0);
  return !((c === 0x65 || c === 0x45) && EXPONENT.test(s));
}

/** A scalar that reads back as exactly `s` (plain when unambiguous, else double-quoted). */
export function scalar(s: string): string {
  return isPlainSafe(s) ? s : doubleQuoted(s);
}

const SHORT_ESCAPES: Record<number, string> = {
  0x00: '\\0',
  0x07: '\\a',
  0x08: '\\b',
  0x09: '\\t',
  0x0a: '\\n',
  0x0b: '\\v',
  0x0c: '\\f',
  0x0d: '\\r',
  0x1b: '\\e',
  0x22: '\\"',
  0x5c: '\\\\',
};

function hex(code: number, width: number): string {
  return code.toString(16).toUpperCase().padStart(width, '0');
}

/** True for code points YAML lets stand unescaped inside a double-quoted scalar. */
function printable(c: number): boolean {
  return (
    (c >= 0x20 && c <= 0x7e) ||
    (c >= 0xa0 && c <= 0xd7ff && c !== 0x2028 && c !== 0x2029) ||
    (c >= 0xe000 && c <= 0xfffd && c !== 0xfeff) ||
    (c >= 0x10000 && c <= 0x10ffff)
  );
}

/**
 * A double-quoted scalar on one line. Everything outside YAML's printable set (and the line
 * separators YAML 1.1 treats as breaks) is escaped, so line folding never applies.
 */
export function doubleQuoted(s: string): string {
  let out = '"';
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x20 && c < 0x7f && c !== 0x22 && c !== 0x5c) continue; // fast path: ASCII
    let code = c;
    let width = 1;
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const low = s.charCodeAt(i + 1);
      if (low >= 0xdc00 && low <= 0xdfff) {
        code = 0x10000 + ((c - 0xd800) << 10) + (low - 0xdc00);
        width = 2;
      }
    }
    if (code !== 0x22 && code !== 0x5c && printable(code)) {
      i += width - 1;
      continue;
    }
    out += s.slice(start, i);
    out +=
      SHORT_ESCAPES[code] ??
      (code <= 0xff
        ? `\\x${hex(code, 2)}`
        : code <= 0xffff
          ? `\\u${hex(code, 4)}`
          : `\\U${hex(code, 8)}`);
    i += width - 1;
    start = i + 1;
  }
  return out + s.slice(start) + '"';
}

/**
 * A literal block scalar (`|`, `|-` or `|+`) for text that `isReadableText` accepted, as the value
 * of a mapping key at column `parentIndent`; its lines are indented two more. When the first line
 * starts with a space, an indentation indicator (relative to the parent, so always 2) keeps the
 * reader from taking that space for indentation. Returns undefined for text a block scalar cannot
 * carry exactly (no non-empty line).
 */
export function literalBlock(text: string, parentIndent: number): string | undefined {
  if (!/[^\n]/.test(text)) return undefined;
  let body = text;
  let chomp = '-';
  if (text.endsWith('\n')) {
    body = text.slice(0, -1);
    chomp = body.endsWith('\n') ? '+' : '';
  }
  const pad = ' '.repeat(parentIndent + 2);
  const indicator = /^\n* /.test(body) ? '2' : '';
  // Every line gets the indentation, but empty lines stay empty (no trailing spaces): the text is
  // walked from LF to LF and copied in slices (faster than split and join, or a regular expression)
  let out = `|${indicator}${chomp}\n`;
  let start = 0;
  for (;;) {
    const end = body.indexOf('\n', start);
    if (end < 0) {
      if (start < body.length) out += pad + body.slice(start);
      return out;
    }
    out += end > start ? `${pad}${body.slice(start, end + 1)}` : '\n';
    start = end + 1;
  }
}
