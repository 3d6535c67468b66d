/**
 * The canonical form of a ResolvedConfig: one deterministic JSON serialisation (keys sorted,
 * lists in resolve's order, file bytes as base64) and its sha256. The controller writes it into
 * the reconcile Secret and annotates the checksum; the agent verifies the checksum before it
 * trusts the content. Equal configurations give equal bytes, whatever their key order or origin.
 */
import { createHash } from 'node:crypto';
import { parseJsonText } from './json-text.js';
import { compare, decodeBase64Strict } from './resolve.js';
import type {
  ResolvedConfig,
  ResolvedCri,
  ResolvedDropIn,
  ResolvedFile,
  ResolvedPackage,
  ResolvedUnit,
} from './resolved.js';
import {
  CGROUP_DRIVERS,
  DRIFT_POLICIES,
  FORMATS,
  ON_CHANGE,
  PURPOSES,
  UNIT_COMMANDS,
} from './constants.js';

export const CANONICAL_KIND = 'ResolvedOperatingSystemConfig';
export const CANONICAL_VERSION = 'oscar.dev/v1alpha1';

/**
 * File content, written as base64 straight into the output bytes: the hot path's bulk, which
 * must not pass through JSON.stringify (it rescans and copies megabytes of text that base64
 * guarantees need no escaping).
 */
class Base64Content {
  constructor(readonly bytes: Buffer) {}
}

/**
 * A growing byte buffer: the canonical form is built as UTF-8 bytes, never as one big string.
 * Small pieces (keys, punctuation, scalars) collect in a string and are copied in one write
 * when content arrives or at the end: thousands of tiny Buffer writes cost more than the bulk.
 */
class ByteWriter {
  private buf: Buffer;
  private length = 0;
  private pending = '';

  constructor(capacity: number) {
    this.buf = Buffer.allocUnsafe(Math.max(capacity, 256));
  }

  private reserve(extra: number): void {
    if (this.length + extra <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.length + extra));
    this.buf.copy(next, 0, 0, this.length);
    this.buf = next;
  }

  private flush(): void {
    if (this.pending === '') return;
    // A UTF-16 code unit is at most 3 UTF-8 bytes; count exactly only when that bound would
    // force a copy of everything written so far.
    const bound = this.pending.length * 3;
    this.reserve(
      this.length + bound <= this.buf.length ? bound : Buffer.byteLength(this.pending, 'utf8'),
    );
    this.length += this.buf.write(this.pending, this.length, 'utf8');
    this.pending = '';
  }

  text(s: string): void {
    this.pending += s;
  }

  /** Base64 is ASCII: latin1 writes it byte for byte without a UTF-8 scan. */
  base64(bytes: Buffer): void {
    this.pending += '"';
    this.flush();
    const encoded = bytes.toString('base64');
    this.reserve(encoded.length + 1);
    this.length += this.buf.write(encoded, this.length, 'latin1');
    this.pending = '"';
  }

  result(): Buffer {
    this.flush();
    return this.buf.subarray(0, this.length);
  }
}

function write(value: unknown, out: ByteWriter): void {
  if (value instanceof Base64Content) {
    out.base64(value.bytes);
  } else if (value === null || typeof value !== 'object') {
    out.text(JSON.stringify(value));
  } else if (Array.isArray(value)) {
    out.text('[');
    value.forEach((item, i) => {
      if (i > 0) out.text(',');
      write(item, out);
    });
    out.text(']');
  } else {
    const record = value as Record<string, unknown>;
    let first = true;
    out.text('{');
    for (const key of Object.keys(record).sort(compare)) {
      const child = record[key];
      if (child === undefined) continue;
      out.text(`${first ? '' : ','}${JSON.stringify(key)}:`);
      first = false;
      write(child, out);
    }
    out.text('}');
  }
}

/** JSON with object keys in code-point order at every level, no whitespace. */
export function canonicalStringify(value: unknown): string {
  if (value === undefined) throw new Error('canonicalStringify: undefined has no JSON form');
  const out = new ByteWriter(1024);
  write(value, out);
  return out.result().toString('utf8');
}

/**
 * The canonical document as plain values, for the generic writer: the reference the fast path
 * below is tested against (canonical.test.ts), and the shape parseCanonical reads back.
 */
export function canonicalDocument(config: ResolvedConfig): Record<string, unknown> {
  return {
    apiVersion: CANONICAL_VERSION,
    kind: CANONICAL_KIND,
    type: config.type,
    purpose: config.purpose,
    format: config.format,
    units: config.units,
    files: config.files.map((f) => ({
      path: f.path,
      mode: f.mode,
      user: f.user,
      group: f.group,
      content: new Base64Content(f.content),
      driftPolicy: f.driftPolicy,
      onChange: f.onChange,
    })),
    packages: config.packages,
    cri: config.cri,
    driftPolicy: config.driftPolicy,
  };
}

/** Every key below the top level, sorted: JSON.stringify emits listed keys in list order. */
const NESTED_KEYS = [
  'cgroupDriver',
  'command',
  'content',
  'driftPolicy',
  'dropIns',
  'enable',
  'filePaths',
  'mask',
  'name',
  'onChange',
  'version',
] as const;
// A field added to a resolved type but not to NESTED_KEYS would silently drop out of the
// checksum: these fail to compile instead.
type Keys = (typeof NESTED_KEYS)[number];
type Covered<T> = Exclude<keyof T, Keys> extends never ? true : false;
type Assert<T extends true> = T;
/** Compiles only while NESTED_KEYS covers every field of the nested resolved types. */
export type NestedKeysCovered = Assert<
  [
    Covered<ResolvedUnit>,
    Covered<ResolvedDropIn>,
    Covered<ResolvedPackage>,
    Covered<ResolvedCri>,
  ] extends [true, true, true, true]
    ? true
    : false
>;
const nestedKeys = [...NESTED_KEYS].sort(compare);

/**
 * The canonical form as UTF-8 bytes: what the Secret stores and the checksum is taken over.
 * The top level is written by hand in sorted key order and the nested values by JSON.stringify
 * with a sorted key list — several times faster than a generic sorted-key walk, and checked
 * byte for byte against it by the property tests.
 */
export function canonicalBytes(config: ResolvedConfig): Buffer {
  let contentBytes = 0;
  for (const f of config.files) contentBytes += f.content.length;
  // Base64 grows content by 4/3; the rest (units, paths, keys) rarely exceeds 64 KiB.
  const out = new ByteWriter(Math.ceil(contentBytes / 3) * 4 + 64 * 1024);
  out.text(`{"apiVersion":${JSON.stringify(CANONICAL_VERSION)}`);
  if (config.cri !== undefined) out.text(`,"cri":${JSON.stringify(config.cri, nestedKeys)}`);
  // Absent when not set, so configs without drift policies keep the checksums they always had.
  if (config.driftPolicy !== undefined)
    out.text(`,"driftPolicy":${JSON.stringify(config.driftPolicy)}`);
  out.text(',"files":[');
  config.files.forEach((f, i) => {
    out.text(i === 0 ? '{"content":' : ',{"content":');
    out.base64(f.content);
    if (f.driftPolicy !== undefined) out.text(`,"driftPolicy":${JSON.stringify(f.driftPolicy)}`);
    out.text(`,"group":${JSON.stringify(f.group)},"mode":${String(f.mode)}`);
    if (f.onChange !== undefined) out.text(`,"onChange":${JSON.stringify(f.onChange)}`);
    out.text(`,"path":${JSON.stringify(f.path)},"user":${JSON.stringify(f.user)}}`);
  });
  out.text(']');
  if (config.format !== undefined) out.text(`,"format":${JSON.stringify(config.format)}`);
  out.text(
    `,"kind":${JSON.stringify(CANONICAL_KIND)},"packages":${JSON.stringify(config.packages, nestedKeys)},"purpose":${JSON.stringify(config.purpose)},"type":${JSON.stringify(config.type)},"units":${JSON.stringify(config.units, nestedKeys)}}`,
  );
  return out.result();
}

/** The canonical form as text (tests and diagnostics; the hot paths use the bytes). */
export function canonicalize(config: ResolvedConfig): string {
  return canonicalBytes(config).toString('utf8');
}

export function sha256Hex(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

export function checksumOf(config: ResolvedConfig): string {
  return sha256Hex(canonicalBytes(config));
}

/** Canonical bytes and their checksum in one pass, for callers that store both. */
export function canonicalWithChecksum(config: ResolvedConfig): { bytes: Buffer; checksum: string } {
  const bytes = canonicalBytes(config);
  return { bytes, checksum: sha256Hex(bytes) };
}

/**
 * Parses canonical text back into a ResolvedConfig, checking every field's type, so that a
 * corrupted or foreign payload is refused with a reason instead of half-applied.
 */
export function parseCanonical(text: string | Buffer): ResolvedConfig {
  let raw: unknown;
  try {
    raw = parseJsonText(typeof text === 'string' ? text : text.toString('utf8'));
  } catch (error) {
    // JsonSyntaxError's message holds no byte of the input: this one reaches logs and reports
    throw new Error(`canonical config is not JSON: ${(error as Error).message}`, { cause: error });
  }
  const doc = asObject(raw, 'config');
  if (doc.kind !== CANONICAL_KIND) {
    throw new Error(`canonical config has kind ${String(doc.kind)}, want ${CANONICAL_KIND}`);
  }
  const config: ResolvedConfig = {
    type: asString(doc.type, 'type'),
    purpose: asEnum(doc.purpose, PURPOSES, 'purpose'),
    units: asArray(doc.units, 'units').map((u, i) => parseUnit(u, `units[${i}]`)),
    files: asArray(doc.files, 'files').map((f, i) => parseFile(f, `files[${i}]`)),
    packages: asArray(doc.packages, 'packages').map((p, i) => {
      const pkg = asObject(p, `packages[${i}]`);
      const name = asString(pkg.name, `packages[${i}].name`);
      return pkg.version === undefined
        ? { name }
        : { name, version: asString(pkg.version, `packages[${i}].version`) };
    }),
  };
  if (doc.format !== undefined) config.format = asEnum(doc.format, FORMATS, 'format');
  if (doc.driftPolicy !== undefined)
    config.driftPolicy = asEnum(doc.driftPolicy, DRIFT_POLICIES, 'driftPolicy');
  if (doc.cri !== undefined) {
    const cri = asObject(doc.cri, 'cri');
    config.cri = {
      name: asEnum(cri.name, ['containerd'] as const, 'cri.name'),
      cgroupDriver: asEnum(cri.cgroupDriver, CGROUP_DRIVERS, 'cri.cgroupDriver'),
    };
  }
  return config;
}

function parseUnit(value: unknown, path: string): ResolvedUnit {
  const u = asObject(value, path);
  const unit: ResolvedUnit = {
    name: asString(u.name, `${path}.name`),
    enable: asBoolean(u.enable, `${path}.enable`),
    mask: asBoolean(u.mask, `${path}.mask`),
    command: asEnum(u.command, UNIT_COMMANDS, `${path}.command`),
    onChange: asEnum(u.onChange, ON_CHANGE, `${path}.onChange`),
    dropIns: asArray(u.dropIns, `${path}.dropIns`).map((d, i) => {
      const dropIn = asObject(d, `${path}.dropIns[${i}]`);
      return {
        name: asString(dropIn.name, `${path}.dropIns[${i}].name`),
        content: asString(dropIn.content, `${path}.dropIns[${i}].content`),
      };
    }),
    filePaths: asArray(u.filePaths, `${path}.filePaths`).map((p, i) =>
      asString(p, `${path}.filePaths[${i}]`),
    ),
  };
  if (u.content !== undefined) unit.content = asString(u.content, `${path}.content`);
  if (u.driftPolicy !== undefined)
    unit.driftPolicy = asEnum(u.driftPolicy, DRIFT_POLICIES, `${path}.driftPolicy`);
  return unit;
}

function parseFile(value: unknown, path: string): ResolvedFile {
  const f = asObject(value, path);
  const mode = f.mode;
  if (typeof mode !== 'number' || !Number.isInteger(mode) || mode < 0 || mode > 0o7777) {
    throw new Error(`${path}.mode must be an integer between 0 and 4095`);
  }
  const file: ResolvedFile = {
    path: asString(f.path, `${path}.path`),
    mode,
    user: asString(f.user, `${path}.user`),
    group: asString(f.group, `${path}.group`),
    content: asBase64(f.content, `${path}.content`),
  };
  if (f.driftPolicy !== undefined)
    file.driftPolicy = asEnum(f.driftPolicy, DRIFT_POLICIES, `${path}.driftPolicy`);
  if (f.onChange !== undefined)
    file.onChange = asEnum(f.onChange, ['reboot'] as const, `${path}.onChange`);
  return file;
}

/** Node's decoder skips what is not base64: a damaged payload must not lose bytes unnoticed. */
function asBase64(value: unknown, path: string): Buffer {
  const text = asString(value, path);
  try {
    return decodeBase64Strict(text);
  } catch (error) {
    throw new Error(`${path} is not valid base64: ${(error as Error).message}`, { cause: error });
  }
}

function asObject(value: unknown, path: string): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new Error(`${path} must be an object`);
  }
  return value as Record<string, unknown>;
}

function asArray(value: unknown, path: string): unknown[] {
  if (!Array.isArray(value)) throw new Error(`${path} must be a list`);
  return value;
}

function asString(value: unknown, path: string): string {
  if (typeof value !== 'string') throw new Error(`${path} must be a string`);
  return value;
}

function asBoolean(value: unknown, path: string): boolean {
  if (typeof value !== 'boolean') throw new Error(`${path} must be a boolean`);
  return value;
}

function asEnum<const T extends readonly string[]>(
  value: unknown,
  values: T,
  path: string,
): T[number] {
  if (typeof value !== 'string' || !values.includes(value)) {
    throw new Error(`${path} must be one of ${values.join(', ')}`);
  }
  return value;
}
