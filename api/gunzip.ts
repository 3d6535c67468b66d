/**
 * Decompression with an output limit checked while inflating (docs/identity.md, "Decode
 * limits"): zlib stops and throws as soon as the output passes the limit, so a small gzip bomb
 * never becomes a large buffer. Every gunzip of input oscar does not control goes through here.
 */
import { gunzipSync } from 'node:zlib';
import { formatBytes } from './bytes.js';

/** Limits on what decompressed input may grow to. */
export const DECODE_LIMITS = {
  /** One file's inline gzip+b64 data: what a Kubernetes Secret can hold. */
  inlineFileBytes: 1024 * 1024,
  /** All gzip+b64 files of one OSC together. */
  inlineTotalBytes: 32 * 1024 * 1024,
  /** A reconcile or revision Secret's config.json.gz. */
  configBytes: 32 * 1024 * 1024,
  /** Renderer output (user data, ignition contents) read back by oscar. */
  renderedBytes: 32 * 1024 * 1024,
} as const;

/** The input inflates to more than the limit: refused before the excess was ever held. */
export class DecodeLimitError extends Error {
  override name = 'DecodeLimitError';
}

/** gunzip `zipped`, or throw DecodeLimitError once the output passes `maxBytes`. */
export function gunzipBounded(zipped: Buffer, maxBytes: number): Buffer {
  try {
    return gunzipSync(zipped, { maxOutputLength: Math.max(1, maxBytes) });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') {
      throw new DecodeLimitError(`it decompresses to more than ${formatBytes(maxBytes)}`, {
        cause: error,
      });
    }
    throw error;
  }
}
