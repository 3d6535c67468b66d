/**
 * Ignition (Flatcar, Fedora CoreOS), spec 3.3.0: the newest version Debian's ignition-validate
 * (2.14) accepts and the one Flatcar's Ignition reads. Files are `data:` URLs (gzip-compressed
 * with `compression: gzip` when that is smaller), modes are decimal integers, owners by name
 * (or by id when numeric), units carry `enabled`, `mask`, `contents` and `dropins`.
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
  isInlineText,
  isNumericId,
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

interface IgnitionFile {
  path: string;
  mode: number;
  overwrite: boolean;
  contents: { source: string; compression?: string };
  user?: IgnitionOwner;
  group?: IgnitionOwner;
}

interface IgnitionUnit {
  name: string;
  enabled?: boolean;
  mask?: boolean;
  contents?: string;
  dropins?: { name: string; contents: string }[];
}

function owner(part: string): IgnitionOwner | undefined {
  if (part === 'root') return undefined; // Ignition's default
  return isNumericId(part) ? { id: Number(part) } : { name: part };
}

/**
 * A data URL in two parts, so its data is written into the output once: percent-encoded text,
 * or bytes that are base64-encoded only while the output is written.
 */
export interface DataUrl {
  scheme: 'data:,' | 'data:;base64,';
  /** Percent-encoded text (ASCII), or the bytes to write as base64. */
  data: string | Buffer;
  compression?: 'gzip';
}

/**
 * RFC 2397 data URL: percent-encoded for readable text up to INLINE_TEXT_MAX, else base64, or
 * gzip + base64 when that is smaller.
 */
export function dataUrl(
  file: ResolvedFile,
  purpose: Purpose,
  encodings: Map<string, string>,
): DataUrl {
  const content = file.content;
  const text = isInlineText(content) ? encodeURIComponent(content.toString('utf8')) : undefined;
  const plainSize = text?.length ?? base64Length(content.length);
  const zipped = gzipIfSmaller(content, plainSize, purpose);
  if (zipped) {
    encodings.set(file.path, 'gzip data URL');
    return { scheme: 'data:;base64,', data: zipped, compression: 'gzip' };
  }
  if (text !== undefined) {
    encodings.set(file.path, 'text data URL');
    return { scheme: 'data:,', data: text };
  }
  encodings.set(file.path, 'base64 data URL');
  return { scheme: 'data:;base64,', data: content };
}

export function renderIgnition(
  config: ResolvedConfig,
  _context: RenderContext,
  encodings: Map<string, string> = new Map(),
): Buffer {
  // The data URLs are most of the bytes and need no JSON escaping (base64 and percent-encoding
  // are plain ASCII): JSON.stringify lays out the document around placeholders, and the URLs are
  // copied in once. A placeholder is a string JSON.stringify must write as "\u0000SRCn\u0000",
  // which no other string can produce (a literal backslash in content is written as \\).
  const urls: DataUrl[] = [];
  const files: IgnitionFile[] = config.files.map((file) => {
    const url = dataUrl(file, config.purpose, encodings);
    const contents: IgnitionFile['contents'] = { source: `\u0000SRC${urls.length}\u0000` };
    if (url.compression) contents.compression = url.compression;
    urls.push(url);
    const entry: IgnitionFile = {
      path: file.path,
      mode: file.mode & IGNITION_MODE_BITS,
      overwrite: true,
      contents,
    };
    const user = owner(file.user);
    const group = owner(file.group);
    if (user) entry.user = user;
    if (group) entry.group = group;
    return entry;
  });
  const units: IgnitionUnit[] = [];
  for (const unit of config.units) {
    const entry: IgnitionUnit = { name: unit.name };
    if (unit.mask) entry.mask = true;
    else if (effectiveEnable(unit)) entry.enabled = true;
    if (unit.content !== undefined) entry.contents = unit.content;
    if (unit.dropIns.length > 0) {
      entry.dropins = unit.dropIns.map((d) => ({ name: d.name, contents: d.content }));
    }
    // a unit with nothing to write, enable or mask would only draw a warning
    if (Object.keys(entry).length > 1) units.push(entry);
  }
  const doc: Record<string, unknown> = { ignition: { version: IGNITION_VERSION } };
  if (files.length > 0) doc.storage = { files };
  if (units.length > 0) doc.systemd = { units };
  const layout = JSON.stringify(doc, null, 2).split(/"\\u0000SRC(\d+)\\u0000"/);
  const out = new ByteBuilder();
  layout.forEach((part, i) => {
    if (i % 2 === 0) out.text(part);
    else {
      const url = urls[Number(part)];
      out.ascii('"').ascii(url?.scheme ?? '');
      if (typeof url?.data === 'string') out.ascii(url.data);
      else if (url !== undefined) out.base64(url.data);
      out.ascii('"');
    }
  });
  return out.ascii('\n').toBuffer();
}
