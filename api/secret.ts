/**
 * The rendered Secrets: their names, labels, annotations and keys — the contract between the
 * controller that writes them and the agents (and Cluster API providers) that read them.
 */
import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { DECODE_LIMITS, gunzipBounded } from './gunzip.js';
import { canonicalBytes, parseCanonical, sha256Hex } from './canonical.js';
import type { ResolvedConfig } from './resolved.js';
import { GROUP, type Purpose } from './constants.js';

export const LABEL_OSC = `${GROUP}/osc`;
export const LABEL_PURPOSE = `${GROUP}/purpose`;
export const ANNOTATION_CHECKSUM = `${GROUP}/checksum`;
/** On revision Secrets: the revision number (a label, so people can select by it). */
export const LABEL_REVISION = `${GROUP}/revision`;
/** The oscar.dev/purpose of a revision Secret. */
export const PURPOSE_REVISION = 'revision';
/** On revision Secrets: api/disruption.ts's digest of the config. */
export const ANNOTATION_DISRUPTION = `${GROUP}/disruption`;
/** On revision Secrets: api/disruption.ts's drain and reboot digests (disruption levels). */
export const ANNOTATION_DISRUPTION_DRAIN = `${GROUP}/disruption-drain`;
export const ANNOTATION_DISRUPTION_REBOOT = `${GROUP}/disruption-reboot`;
/** On an OSC: `oscar rollout resume` writes a new value; the rollout controller acts on it once. */
export const ANNOTATION_RESUME = `${GROUP}/resume`;

/** Keys of every rendered Secret: the OS-format user data, as Cluster API bootstrap data. */
export const KEY_VALUE = 'value';
export const KEY_FORMAT = 'format';
/** Keys of a reconcile Secret: the canonical resolved config, plain or gzipped (exactly one). */
export const KEY_CONFIG = 'config.json';
export const KEY_CONFIG_GZIP = 'config.json.gz';

/** Canonical configs above this are gzipped in the Secret. */
export const GZIP_THRESHOLD_BYTES = 64 * 1024;

/**
 * The Secret's name: derived from the OSC so it is predictable (a Cluster API Machine names it as
 * its bootstrap dataSecretName), shortened with a hash when it would exceed 253 characters.
 */
export function secretNameFor(oscName: string, purpose: Purpose): string {
  const name = `oscar-${oscName}-${purpose}`;
  if (name.length <= 253) return name;
  const hash = createHash('sha256').update(name).digest('hex').slice(0, 10);
  return `${name.slice(0, 253 - 11)}-${hash}`;
}

/**
 * The Secret of revision slot `slot` (0 … ROLLOUT_LIMITS.revisionSlots-1) of an OSC. Revisions
 * live in a fixed set of names, recycled oldest first, so that RBAC can grant a node exactly its
 * OSC's revision Secrets by resourceNames (a name that is not known in advance cannot be
 * granted); the grant's checksum tells a node whether a slot still holds its revision.
 */
export function revisionSecretName(oscName: string, slot: number): string {
  const name = `oscar-${oscName}-rev-${String(slot)}`;
  if (name.length <= 253) return name;
  const hash = createHash('sha256').update(name).digest('hex').slice(0, 10);
  return `${name.slice(0, 253 - 11)}-${hash}`;
}

/** The reconcile Secret's config keys for the canonical bytes (gzip above the threshold). */
export function encodeConfigData(bytes: Buffer): Record<string, Buffer> {
  if (bytes.length <= GZIP_THRESHOLD_BYTES) return { [KEY_CONFIG]: bytes };
  return { [KEY_CONFIG_GZIP]: gzipSync(bytes, { level: 6 }) };
}

export class CorruptPayloadError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'CorruptPayloadError';
  }
}

/**
 * A Secret's `data` as the API server sends it (base64 text by key) decoded to bytes. Only the
 * config keys are decoded, each strictly: the API server always writes canonical base64, and
 * Node's decoder would take anything (whitespace, the URL alphabet, no padding, data after "=",
 * invalid characters skipped) — bytes that did not come that way are refused, not guessed at. The
 * result has no prototype, so a key such as `__proto__` is only a key.
 */
export function decodeSecretData(
  data: Readonly<Record<string, string>> | undefined,
): Record<string, Buffer> {
  const out = Object.create(null) as Record<string, Buffer>;
  for (const key of [KEY_CONFIG, KEY_CONFIG_GZIP]) {
    const text = data && Object.hasOwn(data, key) ? data[key] : undefined;
    if (text === undefined) continue;
    const bytes = typeof text === 'string' ? Buffer.from(text, 'base64') : undefined;
    if (!bytes || bytes.toString('base64') !== text) {
      throw new CorruptPayloadError(
        `the Secret's data.${key} is not canonical base64 (as the API server writes it); write the Secret through the API server`,
      );
    }
    out[key] = bytes;
  }
  return out;
}

/**
 * Reads a reconcile Secret's data, verifies it against the checksum annotation and parses it.
 * Throws CorruptPayloadError for anything off (missing key, bad gzip, checksum mismatch, bad
 * JSON): the caller keeps its last good state.
 */
export function decodeConfigData(
  data: Readonly<Record<string, Buffer | undefined>>,
  expectedChecksum: string | undefined,
): { config: ResolvedConfig; checksum: string; bytes: Buffer } {
  if (!expectedChecksum) {
    throw new CorruptPayloadError(`the Secret has no ${ANNOTATION_CHECKSUM} annotation`);
  }
  const plain = data[KEY_CONFIG];
  const zipped = data[KEY_CONFIG_GZIP];
  let bytes: Buffer;
  if (plain && !zipped) bytes = plain;
  else if (zipped && !plain) {
    try {
      bytes = gunzipBounded(zipped, DECODE_LIMITS.configBytes);
    } catch (error) {
      throw new CorruptPayloadError(
        `${KEY_CONFIG_GZIP} is not valid gzip within the limit: ${(error as Error).message}`,
        {
          cause: error,
        },
      );
    }
  } else {
    throw new CorruptPayloadError(
      `the Secret must hold exactly one of ${KEY_CONFIG}, ${KEY_CONFIG_GZIP}`,
    );
  }
  const checksum = sha256Hex(bytes);
  if (checksum !== expectedChecksum) {
    throw new CorruptPayloadError(
      `checksum mismatch: content hashes to ${checksum.slice(0, 12)}…, annotation says ${expectedChecksum.slice(0, 12)}…`,
    );
  }
  let config: ResolvedConfig;
  try {
    config = parseCanonical(bytes);
  } catch (error) {
    throw new CorruptPayloadError(`the config does not parse: ${(error as Error).message}`, {
      cause: error,
    });
  }
  requireCanonical(config, bytes);
  return { config, checksum, bytes };
}

/**
 * The bytes must be exactly the canonical form of what they parse to — what the controller
 * writes. JSON and Node's base64 decoder accept more than one spelling of the same value
 * (whitespace, key order, `4.2e2` for 420, `\u0041`, base64 with line breaks, the URL alphabet,
 * no padding, non-zero padding bits, data after `=`; bytes that are not UTF-8 read as U+FFFD;
 * unknown keys such as `__proto__` are dropped): each would make the checksum the node reports name
 * other bytes than those it applied, and a spelling one reader takes differently from another
 * would let a payload say one thing to the checks and another to the disk.
 */
function requireCanonical(config: ResolvedConfig, bytes: Buffer): void {
  const canonical = canonicalBytes(config);
  if (canonical.equals(bytes)) return;
  let at = 0;
  while (at < bytes.length && at < canonical.length && bytes[at] === canonical[at]) at++;
  throw new CorruptPayloadError(
    `the config is not in canonical form (it differs at byte ${String(at)}: whitespace, key order, an unknown field, or a number, string or base64 content spelled another way): only the controller's canonical bytes are applied; re-render it from its OperatingSystemConfig`,
  );
}
