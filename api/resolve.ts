/**
 * Resolve: a validated OperatingSystemConfig spec plus the data of the Secrets and ConfigMaps it
 * references → the ResolvedConfig every other part of oscar consumes. Pure: the caller looks the
 * references up (the controller from its informer caches, the CLI from files) and passes them in.
 */
import { formatBytes } from './bytes.js';
import { DEFAULTS } from './defaults.js';
import { DECODE_LIMITS, DecodeLimitError, gunzipBounded } from './gunzip.js';
import { fieldError, type FieldError } from './field-error.js';
import type { ResolvedConfig, ResolvedFile, ResolvedUnit } from './resolved.js';
import { parseMode } from './resolved.js';
import type { File, OperatingSystemConfigSpec, Unit } from './schema.js';

/** The data of referenced objects, by object name then key. */
export interface References {
  secrets: ReadonlyMap<string, Readonly<Record<string, Buffer>>>;
  configMaps: ReadonlyMap<string, Readonly<Record<string, Buffer>>>;
}

export const NO_REFERENCES: References = { secrets: new Map(), configMaps: new Map() };

/**
 * What all files of one OSC may hold together once resolved: what a reconcile Secret's
 * `config.json.gz` may inflate to (DECODE_LIMITS.configBytes), so nothing past it could ever
 * reach a node. References are what makes this a limit of its own: 1,024 files naming one 1 MiB
 * Secret are a 1 GiB configuration, which the renderers and the canonical form would materialise
 * several times over. Counted as the files resolve, before anything is rendered.
 */
export const RESOLVED_TOTAL_BYTES = DECODE_LIMITS.configBytes;

export type ResolveResult =
  { ok: true; config: ResolvedConfig } | { ok: false; errors: FieldError[] };

/** The names of the Secrets and ConfigMaps a spec references (the controller watches these). */
export function referencedObjects(spec: OperatingSystemConfigSpec): {
  secrets: string[];
  configMaps: string[];
} {
  const secrets = new Set<string>();
  const configMaps = new Set<string>();
  for (const file of spec.files ?? []) {
    if (file.content.secretRef) secrets.add(file.content.secretRef.name);
    if (file.content.configMapRef) configMaps.add(file.content.configMapRef.name);
  }
  return { secrets: [...secrets].sort(), configMaps: [...configMaps].sort() };
}

/**
 * Decodes inline data; throws with a message fit for a field error. gzip output is bounded by
 * `maxBytes` while it inflates (api/gunzip.ts): at most what one Secret can hold.
 */
export function decodeInline(
  data: string,
  encoding: string | undefined,
  maxBytes: number = DECODE_LIMITS.inlineFileBytes,
): Buffer {
  switch (encoding ?? '') {
    case '':
      return Buffer.from(data, 'utf8');
    case 'b64':
      return decodeBase64Strict(data);
    case 'gzip+b64': {
      const zipped = decodeBase64Strict(data);
      try {
        return gunzipBounded(zipped, maxBytes);
      } catch (error) {
        if (error instanceof DecodeLimitError) {
          throw new Error(
            `data ${error.message} (${maxBytes < DECODE_LIMITS.inlineFileBytes ? "the rest of the OSC's budget for decompressed files" : 'what a Kubernetes Secret can hold'}); ship it in the image instead`,
            { cause: error },
          );
        }
        throw new Error(
          `data is not valid gzip after base64 decoding (${(error as Error).message}); produce it with "gzip -c FILE | base64 -w0"`,
          { cause: error },
        );
      }
    }
    default:
      throw new Error(`unknown encoding "${encoding ?? ''}"; use "", "b64" or "gzip+b64"`);
  }
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/**
 * Node's decoder skips garbage silently (and accepts base64url); oscar refuses both so no byte
 * is lost unnoticed. The fast path decodes once and checks the length it must have: any skipped
 * character shortens the output. Only input with whitespace (wrapped lines) takes the slow path.
 */
export function decodeBase64Strict(data: string): Buffer {
  if (data.length % 4 === 0 && !data.includes('-') && !data.includes('_')) {
    const padding = data.endsWith('==') ? 2 : data.endsWith('=') ? 1 : 0;
    const decoded = Buffer.from(data, 'base64');
    if (decoded.length === (data.length / 4) * 3 - padding) return decoded;
  }
  const compact = data.replace(/\s+/g, '');
  if (compact.length % 4 !== 0 || !BASE64.test(compact)) {
    throw new Error(
      'data is not valid base64 (only A-Z a-z 0-9 + / with "=" padding, length a multiple of 4); encode it with "base64 -w0 FILE"',
    );
  }
  return Buffer.from(compact, 'base64');
}

let scratch: Buffer | undefined;

/**
 * The size `data` decodes to, checking it decodes, without keeping the bytes: validation runs on
 * every OSC the controller sees, so the common base64 case decodes into a reused buffer.
 */
export function decodedInlineSize(data: string, encoding: string | undefined): number {
  if ((encoding ?? '') === '') return Buffer.byteLength(data, 'utf8');
  if (encoding === 'b64' && data.length % 4 === 0 && !data.includes('-') && !data.includes('_')) {
    const padding = data.endsWith('==') ? 2 : data.endsWith('=') ? 1 : 0;
    const expected = (data.length / 4) * 3 - padding;
    if (!scratch || scratch.length < expected)
      scratch = Buffer.allocUnsafe(Math.max(expected, 1 << 20));
    if (scratch.write(data, 0, 'base64') === expected) return expected;
  }
  return decodeInline(data, encoding).length;
}

function splitOwner(owner: string): { user: string; group: string } {
  const [user = 'root', group] = owner.split(':');
  return { user, group: group ?? user };
}

/** A referenced key's bytes, or an error naming what is missing and what exists. */
function lookup(
  objects: References['secrets'],
  ref: { name: string; key: string },
  kind: 'Secret' | 'ConfigMap',
  path: string,
): Buffer | FieldError {
  const data = objects.get(ref.name);
  if (!data) {
    return fieldError(
      path,
      `${kind} "${ref.name}" not found in the OperatingSystemConfig's namespace; create it or fix the name`,
    );
  }
  const value = data[ref.key];
  if (!value) {
    const keys = Object.keys(data).sort().join(', ') || 'no keys';
    return fieldError(
      `${path}.key`,
      `${kind} "${ref.name}" has no key "${ref.key}" (it has: ${keys})`,
    );
  }
  return value;
}

/**
 * Decodes a spec's plain and base64 inline contents into one allocation: hundreds of small
 * Buffer allocations cost more than the decoding itself. Anything unusual (gzip, wrapped or
 * invalid base64) falls back to decodeInline and its errors.
 */
class InlineArena {
  private readonly buf: Buffer;
  private used = 0;
  /** What gzip+b64 files may still decompress to, all together (DECODE_LIMITS). */
  private gzipBudget: number = DECODE_LIMITS.inlineTotalBytes;

  constructor(files: readonly File[]) {
    let capacity = 0;
    for (const file of files) {
      const inline = file.content.inline;
      if (!inline) continue;
      const encoding = inline.encoding ?? '';
      if (encoding === '') capacity += Buffer.byteLength(inline.data, 'utf8');
      else if (encoding === 'b64') capacity += Math.ceil(inline.data.length / 4) * 3;
    }
    this.buf = Buffer.allocUnsafeSlow(capacity);
  }

  /** Zeroes what was not handed out, so no stale process memory sits next to the contents. */
  seal(): void {
    this.buf.fill(0, this.used);
  }

  decode(data: string, encoding: string | undefined): Buffer {
    const start = this.used;
    if ((encoding ?? '') === '') {
      this.used += this.buf.write(data, start, 'utf8');
      return this.buf.subarray(start, this.used);
    }
    if (encoding === 'b64' && data.length % 4 === 0 && !data.includes('-') && !data.includes('_')) {
      const padding = data.endsWith('==') ? 2 : data.endsWith('=') ? 1 : 0;
      const expected = (data.length / 4) * 3 - padding;
      if (this.buf.write(data, start, 'base64') === expected) {
        this.used += expected;
        return this.buf.subarray(start, this.used);
      }
    }
    const limit = Math.min(DECODE_LIMITS.inlineFileBytes, this.gzipBudget);
    const decoded = decodeInline(data, encoding, limit);
    if (encoding === 'gzip+b64') this.gzipBudget -= decoded.length;
    return decoded;
  }
}

/** The error for the first file that takes the OSC's resolved files past RESOLVED_TOTAL_BYTES. */
function overBudget(index: number, total: number, content: File['content']): FieldError {
  const source = content.secretRef
    ? `Secret "${content.secretRef.name}"`
    : content.configMapRef
      ? `ConfigMap "${content.configMapRef.name}"`
      : 'inline data';
  return fieldError(
    `spec.files[${index}].content`,
    `with this file (${source}) the OSC's files hold ${formatBytes(total)} once resolved, above the ${formatBytes(RESOLVED_TOTAL_BYTES)} all files of one OSC may hold together (each reference counts every time it is used); reference large objects once, or ship large files in the image`,
  );
}

function resolveFile(
  file: File,
  index: number,
  refs: References,
  arena: InlineArena,
): ResolvedFile | FieldError {
  const path = `spec.files[${index}].content`;
  let content: Buffer;
  const { inline, secretRef, configMapRef } = file.content;
  if (inline) {
    try {
      content = arena.decode(inline.data, inline.encoding);
    } catch (error) {
      return fieldError(`${path}.inline.data`, (error as Error).message);
    }
  } else if (secretRef) {
    const found = lookup(refs.secrets, secretRef, 'Secret', `${path}.secretRef`);
    if (!Buffer.isBuffer(found)) return found;
    content = found;
  } else if (configMapRef) {
    const found = lookup(refs.configMaps, configMapRef, 'ConfigMap', `${path}.configMapRef`);
    if (!Buffer.isBuffer(found)) return found;
    content = found;
  } else {
    return fieldError(path, 'set exactly one of inline, secretRef, configMapRef');
  }
  const { user, group } = splitOwner(file.owner ?? DEFAULTS.file.owner);
  const resolved: ResolvedFile = {
    path: file.path,
    mode: parseMode(file.permissions ?? DEFAULTS.file.permissions),
    user,
    group,
    content,
  };
  if (file.driftPolicy !== undefined) resolved.driftPolicy = file.driftPolicy;
  if (file.onChange === 'reboot') resolved.onChange = 'reboot';
  return resolved;
}

function resolveUnit(unit: Unit): ResolvedUnit {
  const resolved: ResolvedUnit = {
    name: unit.name,
    enable: unit.mask ? false : (unit.enable ?? DEFAULTS.unit.enable),
    mask: unit.mask ?? DEFAULTS.unit.mask,
    command: unit.command ?? DEFAULTS.unit.command,
    onChange: unit.onChange ?? DEFAULTS.unit.onChange,
    dropIns: (unit.dropIns ?? []).map((d) => ({ name: d.name, content: d.content })),
    filePaths: [...new Set(unit.filePaths ?? [])].sort(),
  };
  if (unit.content !== undefined && unit.content !== '') resolved.content = unit.content;
  if (unit.driftPolicy !== undefined) resolved.driftPolicy = unit.driftPolicy;
  return resolved;
}

/**
 * Resolves a spec that passed validation. Order is normalised (units by name, files by path) so
 * equal configurations resolve equal, whatever order they were declared in.
 */
export function resolve(
  spec: OperatingSystemConfigSpec,
  refs: References = NO_REFERENCES,
): ResolveResult {
  const errors: FieldError[] = [];
  const files: ResolvedFile[] = [];
  const arena = new InlineArena(spec.files ?? []);
  let total = 0;
  for (const [index, file] of (spec.files ?? []).entries()) {
    const result = resolveFile(file, index, refs, arena);
    if (!('content' in result)) {
      errors.push(result);
      continue;
    }
    total += result.content.length;
    if (total > RESOLVED_TOTAL_BYTES) {
      // Stop here: the rest would only add to a configuration that is refused anyway.
      errors.push(overBudget(index, total, file.content));
      break;
    }
    files.push(result);
  }
  arena.seal();
  if (errors.length > 0) return { ok: false, errors };

  const config: ResolvedConfig = {
    type: spec.type,
    purpose: spec.purpose,
    units: (spec.units ?? []).map(resolveUnit).sort(byName),
    files: files.sort((a, b) => compare(a.path, b.path)),
    packages: (spec.packages ?? [])
      .map((p) => (p.version ? { name: p.name, version: p.version } : { name: p.name }))
      .sort(byName),
  };
  for (const unit of config.units) unit.dropIns.sort(byName);
  if (spec.format) config.format = spec.format;
  if (spec.driftPolicy !== undefined) config.driftPolicy = spec.driftPolicy;
  if (spec.cri) {
    config.cri = {
      name: spec.cri.name ?? DEFAULTS.cri.name,
      cgroupDriver: spec.cri.cgroupDriver ?? DEFAULTS.cri.cgroupDriver,
    };
  }
  return { ok: true, config };
}

/** Code-point order, independent of locale, so every process sorts alike. */
export function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function byName(a: { name: string }, b: { name: string }): number {
  return compare(a.name, b.name);
}
