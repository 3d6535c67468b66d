/**
 * A strict reader for the YAML subset yaml-writer.ts emits (cloud-config as oscar writes it):
 * top-level `key: scalar` and `key:` + block sequences whose items are scalars, flow sequences
 * of scalars, or mappings of scalars and literal block scalars. Anything else is an error, and a
 * plain scalar the writer would have quoted is an error too, so this reader also checks the
 * writer's quoting decisions. It exists because a general YAML library reads ~0.5 MB/s, too slow
 * for thousands of round trips; tests cross-check it against the `yaml` library and PyYAML.
 */
import { isPlainSafe } from './yaml-writer.js';

export class YamlSubsetError extends Error {
  override name = 'YamlSubsetError';
}

/** The keys the writer sets to a plain `true` (the only non-string scalars it writes). */
const BOOLEAN_KEYS = new Set(['package_update', 'defer']);

export type Value = string | Value[] | { [key: string]: Value };

const ESCAPES: Record<string, string> = {
  '0': '\0',
  a: '\x07',
  b: '\b',
  t: '\t',
  '\t': '\t',
  n: '\n',
  v: '\v',
  f: '\f',
  r: '\r',
  e: '\x1b',
  ' ': ' ',
  '"': '"',
  '/': '/',
  '\\': '\\',
  N: '\x85',
  _: '\xa0',
  L: '\u2028',
  P: '\u2029',
};
const HEX_WIDTH: Record<string, number> = { x: 2, u: 4, U: 8 };

/** Reads a double-quoted scalar starting at text[start] === '"'; returns value and end index. */
export function readDoubleQuoted(text: string, start: number): { value: string; end: number } {
  let out = '';
  let i = start + 1;
  let run = i;
  for (;;) {
    const c = text.charCodeAt(i);
    if (Number.isNaN(c) || c === 0x0a)
      throw new YamlSubsetError('unterminated double-quoted scalar');
    if (c === 0x22) break;
    if (c !== 0x5c) {
      i++;
      continue;
    }
    out += text.slice(run, i);
    const e = text[i + 1] ?? '';
    const width = HEX_WIDTH[e];
    if (width !== undefined) {
      const digits = text.slice(i + 2, i + 2 + width);
      if (!/^[0-9A-Fa-f]+$/.test(digits) || digits.length !== width) {
        throw new YamlSubsetError(`bad \\${e} escape`);
      }
      out += String.fromCodePoint(parseInt(digits, 16));
      i += 2 + width;
    } else {
      const s = ESCAPES[e];
      if (s === undefined) throw new YamlSubsetError(`unknown escape \\${e}`);
      out += s;
      i += 2;
    }
    run = i;
  }
  return { value: out + text.slice(run, i), end: i + 1 };
}

function plain(word: string, where: string): string {
  if (!isPlainSafe(word)) throw new YamlSubsetError(`${where}: "${word}" must be quoted`);
  return word;
}

/** One scalar or flow sequence filling `s` entirely. */
function scalarOrFlow(s: string, where: string): Value {
  if (s.startsWith('[')) {
    if (!s.endsWith(']')) throw new YamlSubsetError(`${where}: unterminated flow sequence`);
    const items: string[] = [];
    let i = 1;
    const end = s.length - 1;
    while (i < end) {
      if (s[i] === '"') {
        const r = readDoubleQuoted(s, i);
        items.push(r.value);
        i = r.end;
      } else {
        let j = s.indexOf(',', i);
        if (j < 0 || j > end) j = end;
        items.push(plain(s.slice(i, j), where));
        i = j;
      }
      if (i < end) {
        if (s.slice(i, i + 2) !== ', ') throw new YamlSubsetError(`${where}: expected ", "`);
        i += 2;
      }
    }
    return items;
  }
  return scalar(s, where);
}

function scalar(s: string, where: string): string {
  if (s === "''") return '';
  if (s.startsWith('"')) {
    const r = readDoubleQuoted(s, 0);
    if (r.end !== s.length) throw new YamlSubsetError(`${where}: text after quoted scalar`);
    return r.value;
  }
  return plain(s, where);
}

/** Reads a literal block scalar whose header is `header` ("|", "|2-", …) at lines[from…]. */
function literal(
  lines: string[],
  from: number,
  header: string,
  parentIndent: number,
): { value: string; next: number } {
  const m = /^\|([1-9]?)([-+]?)$/.exec(header);
  if (!m) throw new YamlSubsetError(`bad block scalar header ${header}`);
  let indent = m[1] ? parentIndent + Number(m[1]) : -1;
  const body: string[] = [];
  let i = from;
  for (; i < lines.length; i++) {
    const line = lines[i] ?? '';
    if (line === '') {
      body.push('');
      continue;
    }
    let lead = 0;
    while (line.charCodeAt(lead) === 0x20) lead++;
    if (indent < 0) {
      if (lead <= parentIndent) break;
      indent = lead;
    }
    if (lead < indent && line.slice(0, indent).trim() === '') {
      throw new YamlSubsetError(`line ${i + 1}: whitespace-only line in block scalar`);
    }
    if (!line.startsWith(' '.repeat(indent))) break;
    body.push(line.slice(indent));
  }
  // trailing empty lines belong to the chomping, not to the content
  let trailing = 0;
  while (body.length > 0 && body[body.length - 1] === '') {
    body.pop();
    trailing++;
  }
  let value = body.join('\n');
  if (m[2] === '+') value += '\n'.repeat(trailing + (body.length > 0 ? 1 : 0));
  else if (m[2] === '' && body.length > 0) value += '\n';
  // the empty lines we consumed past the block are left for the caller (there are none in oscar's output)
  return { value, next: i };
}

/** Parses a whole document (without the leading comment lines' meaning). */
export function readYamlSubset(text: string): Record<string, Value> {
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const doc: Record<string, Value> = {};
  let i = 0;
  const keyValue = (line: string, indent: number, where: string): [string, string] => {
    const m = /^([a-z_]+):(?: (.*))?$/.exec(line.slice(indent));
    if (!m?.[1]) throw new YamlSubsetError(`${where}: expected "key: value"`);
    return [m[1], m[2] ?? ''];
  };
  while (i < lines.length) {
    const line = lines[i] ?? '';
    const where = `line ${i + 1}`;
    if (line.startsWith('#') || line === '') {
      i++;
      continue;
    }
    const [key, rest] = keyValue(line, 0, where);
    if (key in doc) throw new YamlSubsetError(`${where}: duplicate key ${key}`);
    i++;
    if (rest !== '') {
      doc[key] = BOOLEAN_KEYS.has(key) && rest === 'true' ? 'true' : scalar(rest, where);
      continue;
    }
    const items: Value[] = [];
    while (i < lines.length && (lines[i] ?? '').startsWith('  - ')) {
      const itemLine = (lines[i] ?? '').slice(4);
      const itemWhere = `line ${i + 1}`;
      if (!/^[a-z_]+:( |$)/.test(itemLine)) {
        items.push(scalarOrFlow(itemLine, itemWhere));
        i++;
        continue;
      }
      const map: Record<string, Value> = {};
      let entry = `    ${itemLine}`;
      for (;;) {
        const [k, v] = keyValue(entry, 4, `line ${i + 1}`);
        if (k in map) throw new YamlSubsetError(`line ${i + 1}: duplicate key ${k}`);
        i++;
        if (v.startsWith('|')) {
          const r = literal(lines, i, v, 4);
          map[k] = r.value;
          i = r.next;
        } else map[k] = BOOLEAN_KEYS.has(k) && v === 'true' ? 'true' : scalar(v, `line ${i}`);
        const next = lines[i];
        if (next === undefined || !/^ {4}[a-z_]+:/.test(next)) break;
        entry = next;
      }
      items.push(map);
    }
    doc[key] = items;
  }
  return doc;
}
