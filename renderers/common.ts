/**
 * What every built-in format shares: which units get masked, enabled and started (one decision,
 * so the three formats agree), how file content is classified (readable text or bytes), when
 * gzip pays off, and the size warnings.
 */
import { isAscii, isUtf8 } from 'node:buffer';
import { gzipSync } from 'node:zlib';
import { formatBytes } from '../api/bytes.js';
import type { ResolvedConfig, ResolvedFile, ResolvedUnit } from '../api/resolved.js';
import { dropInPath, formatMode, unitPath } from '../api/resolved.js';
import { LIMITS, type Purpose, type UnitCommand } from '../api/schema.js';
import { enablement, type InstallKeyOf } from '../api/systemd/enablement.js';
import { isTemplateUnit } from '../api/systemd/unit-name.js';
import { base64Length } from './byte-builder.js';
import { type InstallKey, unitFacts } from './unit-facts.js';

/** unitFacts' memo answers the [Install] questions: a hit is one Map lookup instead of a parse. */
export const memoInstallKey: InstallKeyOf = (text, key) =>
  unitFacts(text).install.has(key as InstallKey);

/**
 * True when the unit gets enabled: the one decision of api/systemd/enablement.ts, which
 * `oscar render --explain` and the agent's plan share.
 */
export function effectiveEnable(unit: ResolvedUnit): boolean {
  return enablement(unit, memoInstallKey).enable;
}

/** isTemplateUnit, without parsing the name when it has no "@" (most units). */
function isTemplate(name: string): boolean {
  return name.includes('@') && isTemplateUnit(name);
}

/** A file whose content came from a string (a unit file or drop-in): `text` is that string. */
export interface TextFile extends ResolvedFile {
  text?: string;
}

export interface UnitPlan {
  /** Unit files and drop-ins, as files under /etc/systemd/system (mode 0644, root). */
  files: TextFile[];
  mask: string[];
  enable: string[];
  /** start / restart / stop per unit, in name order; masked units and templates have none. */
  commands: { unit: string; command: UnitCommand }[];
}

export function unitFile(path: string, content: string): TextFile {
  return {
    path,
    mode: 0o644,
    user: 'root',
    group: 'root',
    content: Buffer.from(content, 'utf8'),
    text: content,
  };
}

export function planUnits(units: readonly ResolvedUnit[]): UnitPlan {
  const plan: UnitPlan = { files: [], mask: [], enable: [], commands: [] };
  for (const unit of units) {
    if (unit.content !== undefined) plan.files.push(unitFile(unitPath(unit.name), unit.content));
    for (const d of unit.dropIns)
      plan.files.push(unitFile(dropInPath(unit.name, d.name), d.content));
    if (unit.mask) {
      plan.mask.push(unit.name);
      continue;
    }
    if (effectiveEnable(unit)) plan.enable.push(unit.name);
    // a template cannot be started, only its instances
    if (!isTemplate(unit.name)) plan.commands.push({ unit: unit.name, command: unit.command });
  }
  return plan;
}

// ---- content --------------------------------------------------------------------------------

/**
 * Readable text up to this size is written as text (a literal block, a quoted printf argument);
 * anything larger is written as base64 (or gzip + base64). A person reviews a config file of a
 * few KiB in the rendered output; beyond that the readable forms only cost time (scanning,
 * indenting, escaping every byte). Ignition keeps text readable only up to IGNITION_TEXT_MAX.
 */
export const INLINE_TEXT_MAX = 4096;

/** True when `content` is written as readable text (see INLINE_TEXT_MAX and isReadableText). */
export function isInlineText(content: Buffer): boolean {
  return content.length <= INLINE_TEXT_MAX && isReadableText(content);
}

/**
 * The file's content as a string when it is written as readable text, else undefined. A unit
 * file carries the string it was made from: it is checked as a string (one regular expression)
 * rather than encoded, checked as bytes and decoded again, with the same verdict.
 */
export function inlineText(file: TextFile): string | undefined {
  const content = file.content;
  if (content.length > INLINE_TEXT_MAX) return undefined;
  const text = file.text;
  if (text !== undefined) {
    const readable = isReadableString(text);
    if (readable !== undefined) return readable ? text : undefined;
  }
  return isReadableText(content) ? content.toString('utf8') : undefined;
}

/** String.prototype.isWellFormed (Node 20; ES2024, newer than the lib this project targets). */
interface WellFormed {
  isWellFormed(): boolean;
}

/** What isReadableText forbids, on a string: see there. */
const UNREADABLE =
  // eslint-disable-next-line no-control-regex -- control characters are exactly what it looks for
  /[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]|[ \t](?:\n|$)/;

/**
 * isReadableText(Buffer.from(text)) without encoding: undefined for a string with a lone
 * surrogate (its UTF-8 is U+FFFD, not the string), which only the bytes can answer for.
 */
export function isReadableString(text: string): boolean | undefined {
  if (!(text as unknown as WellFormed).isWellFormed()) return undefined;
  return !UNREADABLE.test(text);
}

/**
 * Text that every format can carry verbatim and a person can read: valid UTF-8, no control
 * characters but tab and LF, no CR (YAML folds CRLF), none of YAML 1.1's other line breaks
 * (NEL, LS, PS), no byte order mark, no non-characters, and no line that ends in a space or tab
 * (block scalars keep them, but editors and reviewers lose them). Anything else is carried as
 * base64. The checks run cheapest first, on the bytes: random data fails the native UTF-8 check
 * within a few bytes, and ASCII text (the usual config file) is never decoded.
 */
export function isReadableText(content: Buffer): boolean {
  const n = content.length;
  if (n === 0) return true;
  const ascii = isAscii(content);
  if (!ascii && !isUtf8(content)) return false;
  const last = content[n - 1];
  if (last === 0x20 || last === 0x09) return false;
  if (!plainLines(content)) return false;
  if (ascii) return true;
  // C1 controls (NEL is a YAML 1.1 line break), LS, PS, BOM and non-characters
  return !/[\x80-\x9f\u2028\u2029\ufeff\ufffe\uffff]/.test(content.toString('utf8'));
}

/** Byte `i` is a C0 control other than tab and LF, DEL, or an LF after a space or tab. */
function badAt(b: Buffer, i: number): boolean {
  const c = b[i] ?? 0;
  if (c === 0x0a) {
    const before = i > 0 ? b[i - 1] : undefined;
    return before === 0x20 || before === 0x09;
  }
  return (c < 0x20 && c !== 0x09) || c === 0x7f;
}

/**
 * True when no byte is a C0 control but tab and LF, nor DEL, and no line ends in a space or tab
 * (before an LF). Four bytes at a time: one word test finds the words holding a byte below 0x20
 * or equal to 0x7f (bytes from 0x80 up, the parts of UTF-8 sequences, are masked out), and only
 * those words, mostly the ones with an LF or a tab, are looked at byte by byte. Several times
 * faster than regular expressions on the text.
 */
function plainLines(b: Buffer): boolean {
  const n = b.length;
  // a Uint32Array view needs a 4-byte aligned start: the bytes before it are checked one by one
  const head = (4 - (b.byteOffset & 3)) & 3;
  if (n < head + 4) {
    for (let i = 0; i < n; i++) if (badAt(b, i)) return false;
    return true;
  }
  for (let i = 0; i < head; i++) if (badAt(b, i)) return false;
  const words = new Uint32Array(b.buffer, b.byteOffset + head, (n - head) >>> 2);
  for (let k = 0; k < words.length; k++) {
    const x = words[k] ?? 0;
    // per byte, with its top bit cleared (no carry can cross into the next byte):
    // y + 0x60 has its top bit clear exactly when y < 0x20, and y + 0x01 has it set exactly
    // when y == 0x7f; "& ~x" drops the bytes from 0x80 up
    const y = x & 0x7f7f7f7f;
    if (((~(y + 0x60606060) | (y + 0x01010101)) & ~x & 0x80808080) !== 0) {
      const at = head + k * 4;
      if (badAt(b, at) || badAt(b, at + 1) || badAt(b, at + 2) || badAt(b, at + 3)) return false;
    }
  }
  for (let i = head + words.length * 4; i < n; i++) if (badAt(b, i)) return false;
  return true;
}

/**
 * When gzip is tried. A provision payload must fit a cloud's user-data budget (16 KiB), so every
 * file worth compressing is tried; a reconcile payload has a 1 MiB Secret to fill and is rendered
 * on every change, so only large files are (zlib costs ~25x a base64 pass, most of it set-up).
 */
export const GZIP_MIN_BYTES: Record<Purpose, number> = { provision: 512, reconcile: 64 * 1024 };

/**
 * The gzip of `content` if it saves at least 10 % over `plainSize` bytes of output (the size the
 * content takes when written without compression), else undefined. Large files first compress a
 * 16 KiB sample at the fastest level: random or already-compressed bytes are skipped cheaply.
 */
export function gzipIfSmaller(
  content: Buffer,
  plainSize: number,
  purpose: Purpose,
): Buffer | undefined {
  if (content.length < GZIP_MIN_BYTES[purpose]) return undefined;
  if (content.length > 64 * 1024) {
    const sample = content.subarray(0, 16 * 1024);
    if (gzipSync(sample, { level: 1 }).length > sample.length * 0.9) return undefined;
  }
  // mtime 0 and no name (Node's default): the same input always gives the same bytes
  const zipped = gzipSync(content, { level: 6 });
  return base64Length(zipped.length) < plainSize * 0.9 ? zipped : undefined;
}

export { base64Length } from './byte-builder.js';

// ---- results --------------------------------------------------------------------------------

export function sizeWarnings(purpose: Purpose, size: number): string[] {
  if (purpose === 'provision' && size > LIMITS.provisionUserDataBytes) {
    return [
      `provision user data is ${formatBytes(size)}, above the ${formatBytes(LIMITS.provisionUserDataBytes)} many clouds accept (AWS: 16 KiB); move files into the reconcile config or the image`,
    ];
  }
  if (size > LIMITS.secretBytes) {
    return [
      `rendered output is ${formatBytes(size)}, above the ${formatBytes(LIMITS.secretBytes)} a Kubernetes Secret holds`,
    ];
  }
  return [];
}

/** A short identification line for comments at the top of rendered output. */
export function header(config: ResolvedConfig, name: string, namespace: string): string {
  return `Rendered by oscar from OperatingSystemConfig ${safe(namespace)}/${safe(name)} (type ${safe(config.type)}, purpose ${config.purpose}).`;
}

/** Names go into comments: keep them to the characters a Kubernetes name may have. */
function safe(name: string): string {
  return name.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 253);
}

/** formatMode of every mode 0 to 07777, made once: a render writes one per file. */
const MODE_TEXT: readonly string[] = Array.from({ length: 0o10000 }, (_, mode) => formatMode(mode));

/** formatMode(mode), looked up. */
export function modeText(mode: number): string {
  return MODE_TEXT[mode] ?? formatMode(mode);
}

/** True when the owner half is a numeric id rather than a name. */
export { isNumericId } from '../api/resolved.js';
