/**
 * Assembles rendered output straight into one Buffer. A large payload is mostly base64 and file
 * bytes, so the builder is made for that:
 * - base64 is recorded as the bytes to encode and encoded only while the output is written, one
 *   part at a time, so the encoded text of a whole payload never lives in the heap at once (held
 *   until the end, megabytes of it were copied by every minor garbage collection, then promoted);
 * - a large ASCII string is copied once, byte for byte, without a UTF-8 pass;
 * - a Buffer (file content carried as is) is copied once, without being decoded to a string;
 * - the many small pieces of markup in between are joined into one string per stretch, so the
 *   copy into the output is one call per stretch rather than one per piece.
 */

/** A string of at least this length passed to ascii() is kept as its own part. */
const LARGE = 512;
/** Small pieces are joined into stretches of about this many characters at most. */
const STRETCH_MAX = 32 * 1024;

type Part =
  | { kind: 'utf8' | 'latin1'; text: string }
  | { kind: 'bytes'; bytes: Buffer }
  /** `bytes` as base64, cut into lines of `width` characters (0: one line). */
  | { kind: 'base64'; bytes: Buffer; width: number };

export function base64Length(n: number): number {
  return Math.ceil(n / 3) * 4;
}

export class ByteBuilder {
  private readonly parts: Part[] = [];
  /** Small pieces written since the last large part. */
  private pending = '';
  /** Bytes in `parts` (not counting `pending`). */
  private total = 0;

  /** Any text, written as UTF-8. */
  text(s: string): this {
    this.pending += s;
    // a long stretch of text (readable file contents) is cut into parts: joined into one
    // multi-MB string it would be copied once more, into fresh memory, before it is written
    if (this.pending.length >= STRETCH_MAX) this.flush();
    return this;
  }

  /** Several texts in a row. */
  push(...parts: string[]): this {
    for (const part of parts) this.text(part);
    return this;
  }

  /**
   * Text the caller knows is ASCII (quoted markup, percent-encoding): written byte for byte,
   * without a UTF-8 pass. Non-ASCII text here would be written wrongly, so only pass what is
   * ASCII by construction.
   */
  ascii(s: string): this {
    if (s.length < LARGE) return this.text(s);
    this.flush();
    this.parts.push({ kind: 'latin1', text: s });
    this.total += s.length;
    return this;
  }

  /**
   * `b` as base64 (RFC 4648, padded), on one line, or cut into lines of `width` characters with
   * an LF between them (none after the last). Encoded when the output is written.
   */
  base64(b: Buffer, width = 0): this {
    if (b.length === 0) return this;
    this.flush();
    const n = base64Length(b.length);
    this.parts.push({ kind: 'base64', bytes: b, width });
    this.total += width > 0 ? n + Math.ceil(n / width) - 1 : n;
    return this;
  }

  /** Bytes copied as they are (the caller has checked they may stand in the output verbatim). */
  bytes(b: Buffer): this {
    if (b.length === 0) return this;
    this.flush();
    this.parts.push({ kind: 'bytes', bytes: b });
    this.total += b.length;
    return this;
  }

  private flush(): void {
    if (this.pending === '') return;
    this.parts.push({ kind: 'utf8', text: this.pending });
    this.total += Buffer.byteLength(this.pending, 'utf8');
    this.pending = '';
  }

  /** Bytes written so far. */
  get length(): number {
    this.flush();
    return this.total;
  }

  toBuffer(): Buffer {
    this.flush();
    const out = Buffer.allocUnsafe(this.total);
    let offset = 0;
    for (const part of this.parts) {
      if (part.kind === 'bytes') offset += part.bytes.copy(out, offset);
      else if (part.kind === 'base64') {
        const text = part.bytes.toString('base64');
        offset =
          part.width > 0
            ? writeLines(out, offset, text, part.width)
            : offset + out.write(text, offset, 'latin1');
      } else offset += out.write(part.text, offset, part.kind);
    }
    if (offset !== this.total)
      throw new Error(`ByteBuilder: wrote ${offset} of ${this.total} bytes`);
    return out;
  }

  toString(): string {
    return this.toBuffer().toString('utf8');
  }
}

/**
 * Writes `s` (ASCII) at `offset` cut into lines of `width` characters with an LF between them:
 * the whole text in one native write, then each line from the last to the second moved down into
 * place (a memmove within the output: far cheaper than writing the lines one by one as slices).
 */
function writeLines(out: Buffer, offset: number, s: string, width: number): number {
  const n = s.length;
  out.write(s, offset, 'latin1');
  const lines = Math.ceil(n / width);
  for (let k = lines - 1; k > 0; k--) {
    const from = offset + k * width;
    const to = from + k;
    out.copyWithin(to, from, Math.min(from + width, offset + n));
    out[to - 1] = 0x0a;
  }
  return offset + n + lines - 1;
}
