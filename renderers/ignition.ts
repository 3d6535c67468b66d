/**
 * Ignition (Flatcar, Fedora CoreOS), spec 3.3.0: the newest version Debian's ignition-validate
 * (2.14) accepts and the one Flatcar's Ignition reads. Files are `data:` URLs, base64 but for
 * short text (gzip-compressed with `compression: gzip` when that is smaller), modes are decimal
 * integers, owners by name (or by id when numeric), units carry `enabled`, `mask`, `contents`
 * and `dropins`.
 *
 * Ignition runs before systemd starts anything, so it has no start/restart commands: an enabled
 * unit starts with the boot. Packages cannot be expressed (Flatcar has no package manager), nor
 * setuid/setgid/sticky bits in 3.3.0 (see IGNITION_MODE_BITS).
 */
import type { ResolvedConfig, ResolvedFile } from '../api/resolved.js';
import type { Purpose } from '../api/schema.js';
import type { RenderContext } from './types.js';
import { ByteBuilder } from './byte-builder.js';
import {
  base64Length,
  effectiveEnable,
  gzipIfSmaller,
  isNumericId,
  isReadableText,
} from './common.js';

export const IGNITION_VERSION = '3.3.0';

/**
 * Spec 3.3.0 has no setuid, setgid or sticky bits (3.4.0 added them, and Debian's
 * ignition-validate refuses 3.4.0): they are dropped, with a warning from ignitionWarnings.
 */
export const IGNITION_MODE_BITS = 0o777;

export function ignitionWarnings(config: ResolvedConfig): string[] {
  return config.files
    .filter((f) => (f.mode & ~IGNITION_MODE_BITS) !== 0)
    .map(
      (f) =>
        `${f.path}: Ignition ${IGNITION_VERSION} cannot set setuid/setgid/sticky bits; written with mode ${(f.mode & IGNITION_MODE_BITS).toString(8).padStart(4, '0')} instead of ${f.mode.toString(8).padStart(4, '0')}`,
    );
}

interface IgnitionOwner {
  name?: string;
  id?: number;
}

function owner(part: string): IgnitionOwner | undefined {
  if (part === 'root') return undefined; // Ignition's default
  return isNumericId(part) ? { id: Number(part) } : { name: part };
}

/** Readable text up to this many bytes may be written percent-encoded (see dataUrl). */
export const IGNITION_TEXT_MAX = 128;

/**
 * A file's `data:` URL in two parts, so its data is written into the output once:
 * percent-encoded text, or the bytes the output builder writes as base64.
 */
export interface DataUrl {
  scheme: 'data:,' | 'data:;base64,';
  /** Percent-encoded text (ASCII), or the bytes to write as base64. */
  data: string | Buffer;
  compression?: 'gzip';
}

/**
 * RFC 2397 data URL: base64, or gzip + base64 when that is smaller. Readable text of at most
 * IGNITION_TEXT_MAX bytes (a hostname, a one-line setting) is percent-encoded instead when that
 * is no longer, as Butane does, so it stays readable. Longer text is not: percent-encoded it is
 * unreadable anyway (every space and line break is %20 and %0A), larger than base64 for config
 * text (3.1 against 2.75 MiB for the benchmark's text) and ~8x slower to make.
 */
export function dataUrl(
  file: ResolvedFile,
  purpose: Purpose,
  encodings: Map<string, string> | undefined,
): DataUrl {
  const content = file.content;
  const b64Size = base64Length(content.length);
  if (content.length <= IGNITION_TEXT_MAX && isReadableText(content)) {
    const text = encodeURIComponent(content.toString('utf8'));
    if (text.length <= b64Size) {
      encodings?.set(file.path, 'text data URL');
      return { scheme: 'data:,', data: text };
    }
  }
  const zipped = gzipIfSmaller(content, b64Size, purpose);
  if (zipped) {
    encodings?.set(file.path, 'gzip data URL');
    return { scheme: 'data:;base64,', data: zipped, compression: 'gzip' };
  }
  encodings?.set(file.path, 'base64 data URL');
  return { scheme: 'data:;base64,', data: content };
}

export function renderIgnition(
  config: ResolvedConfig,
  _context: RenderContext,
  encodings?: Map<string, string>,
): Buffer {
  // The document is written by hand, byte for byte as JSON.stringify(doc, null, 2) lays it out
  // (the golden files hold it to that): building the object tree and stringifying it cost more
  // than the rest of a large render, and the data URLs, most of the bytes, are copied in once
  // (base64 and percent-encoding are plain ASCII and need no escaping).
  const out = new ByteBuilder();
  out.ascii(`{\n  "ignition": {\n    "version": "${IGNITION_VERSION}"\n  }`);
  if (config.files.length > 0) {
    out.ascii(',\n  "storage": {\n    "files": [');
    config.files.forEach((file, i) => {
      const url = dataUrl(file, config.purpose, encodings);
      out.text(
        `${i > 0 ? ',' : ''}\n      {\n        "path": ${jsonString(file.path)},\n        "mode": ${file.mode & IGNITION_MODE_BITS},\n        "overwrite": true,\n        "contents": {\n          "source": "${url.scheme}`,
      );
      if (typeof url.data === 'string') out.ascii(url.data);
      else out.base64(url.data);
      out.ascii(
        url.compression
          ? `",\n          "compression": "${url.compression}"\n        }`
          : '"\n        }',
      );
      const user = owner(file.user);
      const group = owner(file.group);
      if (user) out.text(`,\n        "user": ${ownerJson(user)}`);
      if (group) out.text(`,\n        "group": ${ownerJson(group)}`);
      out.ascii('\n      }');
    });
    out.ascii('\n    ]\n  }');
  }
  let units = 0;
  for (const unit of config.units) {
    const enabled = !unit.mask && effectiveEnable(unit);
    // a unit with nothing to write, enable or mask would only draw a warning
    if (!unit.mask && !enabled && unit.content === undefined && unit.dropIns.length === 0) continue;
    out.ascii(units++ > 0 ? ',' : ',\n  "systemd": {\n    "units": [');
    out.text(`\n      {\n        "name": ${jsonString(unit.name)}`);
    if (unit.mask) out.ascii(',\n        "mask": true');
    else if (enabled) out.ascii(',\n        "enabled": true');
    if (unit.content !== undefined) out.text(`,\n        "contents": ${jsonString(unit.content)}`);
    if (unit.dropIns.length > 0) {
      out.ascii(',\n        "dropins": [');
      unit.dropIns.forEach((d, j) => {
        out.text(
          `${j > 0 ? ',' : ''}\n          {\n            "name": ${jsonString(d.name)},\n            "contents": ${jsonString(d.content)}\n          }`,
        );
      });
      out.ascii('\n        ]');
    }
    out.ascii('\n      }');
  }
  if (units > 0) out.ascii('\n    ]\n  }');
  return out.ascii('\n}\n').toBuffer();
}

/** Characters JSON.stringify escapes (controls, quote, backslash) or may (lone surrogates). */
// eslint-disable-next-line no-control-regex -- control characters are exactly what it looks for
const JSON_ESCAPED = /[\u0000-\u001f"\\\ud800-\udfff]/;

/** A JSON string literal, exactly as JSON.stringify writes it, without calling it when it need not. */
function jsonString(s: string): string {
  return JSON_ESCAPED.test(s) ? JSON.stringify(s) : `"${s}"`;
}

function ownerJson(o: IgnitionOwner): string {
  const field =
    o.id !== undefined ? `"id": ${JSON.stringify(o.id)}` : `"name": ${jsonString(o.name ?? '')}`;
  return `{\n          ${field}\n        }`;
}
