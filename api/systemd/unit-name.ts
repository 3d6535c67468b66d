// systemd unit and drop-in naming rules (systemd.unit(5), src/basic/unit-name.c), with messages
// that say how to fix a bad name. Pure functions, no I/O.

import { hiddenCharacter, uncomposed } from '../visible-text.js';

export const UNIT_TYPES = [
  'service',
  'socket',
  'device',
  'mount',
  'automount',
  'swap',
  'target',
  'path',
  'timer',
  'slice',
  'scope',
] as const;

export type UnitType = (typeof UNIT_TYPES)[number];

/** systemd's UNIT_NAME_MAX is 256 including the terminating NUL. */
export const UNIT_NAME_MAX_LENGTH = 255;

/** Longest file name Linux accepts (NAME_MAX), in UTF-8 bytes. */
const FILE_NAME_MAX_BYTES = 255;

const UNIT_TYPE_SET: ReadonlySet<string> = new Set(UNIT_TYPES);
const SUFFIX_LIST = UNIT_TYPES.map((t) => `.${t}`).join(' ');

function isUnitType(s: string): s is UnitType {
  return UNIT_TYPE_SET.has(s);
}

// [A-Za-z0-9:_.\-] plus backslash (for \xNN escapes produced by systemd-escape).
function isNameChar(c: number): boolean {
  return (
    (c >= 0x41 && c <= 0x5a) ||
    (c >= 0x61 && c <= 0x7a) ||
    (c >= 0x30 && c <= 0x39) ||
    c === 0x3a || // :
    c === 0x5f || // _
    c === 0x2e || // .
    c === 0x5c || // \
    c === 0x2d // -
  );
}

function describeChar(ch: string): string {
  const code = ch.codePointAt(0) ?? 0;
  if (ch === ' ') return 'a space';
  if (ch === '\t') return 'a tab';
  if (code < 0x20 || code === 0x7f)
    return `control character U+${code.toString(16).padStart(4, '0')}`;
  return `"${ch}"`;
}

function escapeHint(ch: string): string {
  const code = ch.codePointAt(0) ?? 0;
  if (code < 0x80) return ` (it becomes \\x${code.toString(16).padStart(2, '0')})`;
  return '';
}

/** The parts of a syntactically valid unit name; `undefined` when the name is invalid. */
export interface UnitNameParts {
  /** Text before `@` (or before the type suffix for a plain unit). */
  prefix: string;
  /** `undefined` for a plain unit, `''` for a template (`foo@.service`), the instance otherwise. */
  instance: string | undefined;
  type: UnitType;
}

/**
 * `undefined` when `name` is a valid unit name (plain `foo.service`, template `foo@.service` or
 * instance `foo@bar.service`); otherwise a message saying what is wrong and how to fix it.
 *
 * Stricter than systemd in one place: systemd tolerates a second "@" inside an instance string;
 * we refuse it, since systemd-escape writes "@" in an instance as \x40 and a raw one is ambiguous.
 */
export function validateUnitName(name: string): string | undefined {
  if (name.length === 0) return 'unit name is empty; give a name such as example.service';
  if (name.length > UNIT_NAME_MAX_LENGTH) {
    return `unit name is ${name.length} characters long; systemd allows at most ${UNIT_NAME_MAX_LENGTH}, so shorten it`;
  }
  const dot = name.lastIndexOf('.');
  const suffix = dot < 0 ? '' : name.slice(dot + 1);
  if (dot < 0 || !isUnitType(suffix)) {
    const base = dot < 0 ? name : name.slice(0, dot);
    if (dot >= 0 && isUnitType(suffix.toLowerCase())) {
      return `unit name "${name}" ends in ".${suffix}"; unit type suffixes are lower case, so write ${base}.${suffix.toLowerCase()}`;
    }
    const what =
      dot < 0 ? 'has no unit type suffix' : `ends in ".${suffix}", which is not a unit type`;
    return `unit name "${name}" ${what}; it must end in one of ${SUFFIX_LIST} (for example ${base || 'example'}.service)`;
  }
  if (dot === 0) {
    return `unit name "${name}" has nothing before ".${suffix}"; put a name in front, e.g. example.${suffix}`;
  }
  let at = -1;
  for (let i = 0; i < dot; i++) {
    const c = name.charCodeAt(i);
    if (c === 0x40 /* @ */) {
      if (at >= 0) {
        return `unit name "${name}" contains "@" more than once; only one "@" may separate the template from the instance, escape others in the instance with systemd-escape (\\x40)`;
      }
      at = i;
      continue;
    }
    if (!isNameChar(c)) {
      const ch = String.fromCodePoint(name.codePointAt(i) ?? c);
      return (
        `unit name "${name}" contains ${describeChar(ch)} at position ${i + 1}, which systemd does not allow; ` +
        `use only letters, digits, ":", "_", ".", "-", "\\" and one "@", and escape other characters with systemd-escape${escapeHint(ch)}` +
        (ch === '/' ? ', or for a path use systemd-escape --path' : '')
      );
    }
  }
  if (at === 0) {
    return `unit name "${name}" starts with "@"; a template needs a name before "@", e.g. example${name.slice(0, dot)}.${suffix}`;
  }
  return undefined;
}

/** Prefix, instance and type of a valid unit name, or `undefined` if the name is invalid. */
export function splitUnitName(name: string): UnitNameParts | undefined {
  if (validateUnitName(name) !== undefined) return undefined;
  const dot = name.lastIndexOf('.');
  const type = name.slice(dot + 1) as UnitType;
  const at = name.indexOf('@');
  if (at < 0) return { prefix: name.slice(0, dot), instance: undefined, type };
  return { prefix: name.slice(0, at), instance: name.slice(at + 1, dot), type };
}

/** True for a valid template name such as `getty@.service`. */
export function isTemplateUnit(name: string): boolean {
  return splitUnitName(name)?.instance === '';
}

/** True for a valid instance name such as `getty@tty1.service`. */
export function isInstanceUnit(name: string): boolean {
  const instance = splitUnitName(name)?.instance;
  return instance !== undefined && instance !== '';
}

/**
 * The unit type named by the suffix (`service` for `foo.service`), or `undefined` when the suffix
 * is not a unit type. Only looks at the suffix; use `validateUnitName` for the whole name.
 */
export function unitType(name: string): UnitType | undefined {
  const dot = name.lastIndexOf('.');
  if (dot < 0) return undefined;
  const suffix = name.slice(dot + 1);
  return isUnitType(suffix) ? suffix : undefined;
}

/**
 * `undefined` when `name` is a usable drop-in file name (the part inside `<unit>.d/`), otherwise
 * a message saying how to fix it. systemd only reads `*.conf` files and skips hidden ones.
 */
export function validateDropInName(name: string): string | undefined {
  if (name.length === 0) return 'drop-in name is empty; give a name such as 10-override.conf';
  if (name.includes('/')) {
    return `drop-in name "${name}" contains "/"; give only the file name, e.g. ${name.slice(name.lastIndexOf('/') + 1) || '10-override.conf'} (it is placed in <unit>.d/ for you)`;
  }
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) {
      return `drop-in name "${name}" contains a control character at position ${i + 1}; remove it`;
    }
  }
  // the same characters a file path may not have, for the same reason: it must be what it shows
  const hidden = hiddenCharacter(name) ?? uncomposed(name);
  if (hidden) return `drop-in name ${hidden}`;
  if (!name.endsWith('.conf')) {
    return `drop-in name "${name}" does not end in ".conf", so systemd would ignore it; rename it to ${name}.conf`;
  }
  if (name === '.conf') {
    return 'drop-in name ".conf" has nothing before ".conf"; give it a name such as 10-override.conf';
  }
  if (name.startsWith('.')) {
    const visible = name.replace(/^\.+/, '');
    return `drop-in name "${name}" starts with ".", and systemd skips hidden files; rename it to ${visible.length > 5 ? visible : '10-override.conf'}`;
  }
  // a UTF-16 code unit takes at most 3 bytes of UTF-8: only a long name needs counting
  if (
    name.length * 3 > FILE_NAME_MAX_BYTES &&
    Buffer.byteLength(name, 'utf8') > FILE_NAME_MAX_BYTES
  ) {
    return `drop-in name is longer than ${FILE_NAME_MAX_BYTES} bytes, the longest file name Linux allows; shorten it`;
  }
  return undefined;
}
