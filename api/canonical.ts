/**
 * The canonical form of a ResolvedConfig: one deterministic JSON serialisation (keys sorted,
 * lists in resolve's order, file bytes as base64) and its sha256. The controller writes it into
 * the reconcile Secret and annotates the checksum; the agent verifies the checksum before it
 * trusts the content. Equal configurations give equal bytes, whatever their key order or origin.
 */
import { createHash } from 'node:crypto';
import { compare } from './resolve.js';
import type { ResolvedConfig, ResolvedFile, ResolvedUnit } from './resolved.js';
import { CGROUP_DRIVERS, FORMATS, ON_CHANGE, PURPOSES, UNIT_COMMANDS } from './schema.js';

export const CANONICAL_KIND = 'ResolvedOperatingSystemConfig';
export const CANONICAL_VERSION = 'oscar.dev/v1alpha1';

/** A string known to need no JSON escaping (base64), written as it is: the hot path's bulk. */
class PlainJsonString {
  constructor(readonly text: string) {}
}

function write(value: unknown, out: string[]): void {
  if (value instanceof PlainJsonString) {
    out.push('"', value.text, '"');
  } else if (value === null || typeof value !== 'object') {
    out.push(JSON.stringify(value));
  } else if (Array.isArray(value)) {
    out.push('[');
    value.forEach((item, i) => {
      if (i > 0) out.push(',');
      write(item, out);
    });
    out.push(']');
  } else {
    const record = value as Record<string, unknown>;
    let first = true;
    out.push('{');
    for (const key of Object.keys(record).sort(compare)) {
      const child = record[key];
      if (child === undefined) continue;
      out.push(first ? '' : ',', JSON.stringify(key), ':');
      first = false;
      write(child, out);
    }
    out.push('}');
  }
}

/** JSON with object keys in code-point order at every level, no whitespace. */
export function canonicalStringify(value: unknown): string {
  if (value === undefined) throw new Error('canonicalStringify: undefined has no JSON form');
  const out: string[] = [];
  write(value, out);
  return out.join('');
}

function toJson(config: ResolvedConfig): Record<string, unknown> {
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
      content: new PlainJsonString(f.content.toString('base64')),
    })),
    packages: config.packages,
    cri: config.cri,
  };
}

export function canonicalize(config: ResolvedConfig): string {
  return canonicalStringify(toJson(config));
}

export function sha256Hex(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

export function checksumOf(config: ResolvedConfig): string {
  return sha256Hex(canonicalize(config));
}

/** Canonical text and checksum in one pass, for callers that store both. */
export function canonicalWithChecksum(config: ResolvedConfig): { text: string; checksum: string } {
  const text = canonicalize(config);
  return { text, checksum: sha256Hex(text) };
}

/**
 * Parses canonical text back into a ResolvedConfig, checking every field's type, so that a
 * corrupted or foreign payload is refused with a reason instead of half-applied.
 */
export function parseCanonical(text: string): ResolvedConfig {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
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
  return unit;
}

function parseFile(value: unknown, path: string): ResolvedFile {
  const f = asObject(value, path);
  const mode = f.mode;
  if (typeof mode !== 'number' || !Number.isInteger(mode) || mode < 0 || mode > 0o7777) {
    throw new Error(`${path}.mode must be an integer between 0 and 4095`);
  }
  return {
    path: asString(f.path, `${path}.path`),
    mode,
    user: asString(f.user, `${path}.user`),
    group: asString(f.group, `${path}.group`),
    content: Buffer.from(asString(f.content, `${path}.content`), 'base64'),
  };
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
