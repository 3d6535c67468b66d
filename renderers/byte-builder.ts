/**
 * Assembles rendered output into one Buffer. A large payload is mostly base64 and file bytes, so
 * the builder is made for that:
 * - everything is written at once into a scratch buffer that outlives the render (one, reused
 *   render after render), and toBuffer copies the finished output into a Buffer of its own;
 * - base64 is encoded file by file and written at once, so the encoded text of a payload never
 *   lives in the heap (Node encodes base64 only into a new string, one per file here, dead as
 *   soon as it is copied);
 * - a large ASCII string is copied byte for byte, without a UTF-8 pass; a Buffer (file content
 *   carried as is) is copied without being decoded to a string;
 * - the many small pieces of markup in between are joined into one string per stretch, so the
 *   copy is one call per stretch rather than one per piece.
 *
 * Why a scratch buffer: a render makes about a megabyte of short-lived strings per megabyte of
 * base64, so several minor collections run during it. Whatever lives through the render (an
 * output Buffer written in place, or a list of its parts) outlives them, is promoted, and can
 * only be freed by a full collection. Under the controller's heap settings (cli/support/memory.ts,
 * which keep the old generation tight) that was a full collection every few renders: a 2 MiB
 * render took ~5-9 ms instead of ~1 ms. Now nothing of a render outlives it but the Buffer it
 * returns, made at the very end; the scratch is old from the start and stays warm in the cache.
 *
 * The scratch is the memory of the WebAssembly module that writes literal blocks
 * (wasm/literal-block.ts), so a block's body is written natively straight into its place in the
 * output; where Node runs without WebAssembly (`--jitless`) it is a plain Buffer.
 */
import {
  type BlockVerdict,
  giveBackNativeScratch,
  NativeScratch,
  SCRATCH_AT,
  takeNativeScratch,
} from './wasm/literal-block.js';

/** A string of at least this length passed to ascii() is written at once, not joined. */
const LARGE = 512;
/** Small pieces are joined into stretches of about this many characters at most. */
const STRETCH_MAX = 32 * 1024;

/** A scratch buffer up to this size is kept for the next render; a larger one is let go. */
const SCRATCH_KEEP = 4 * 1024 * 1024;
/** The first size of a scratch buffer. */
const SCRATCH_MIN = 64 * 1024;

/**
 * The plain scratch buffer no builder is using (a builder takes it and gives it back in
 * toBuffer), where there is no native one.
 */
let idle: Buffer | undefined;

/**
 * The per-encoding methods Buffer.prototype.write and toString dispatch to. Called directly: a
 * large render makes a thousand writes, and the public wrappers' argument checks and encoding
 * lookup cost more than the copies of the small pieces. Present on every Buffer since Node's
 * early days (libraries such as ws and protobufjs use them); not in @types/node.
 */
interface RawBuffer {
  utf8Write(text: string, offset: number): number;
  latin1Write(text: string, offset: number): number;
  base64Slice(start: number, end: number): string;
}

const raw = (b: Buffer): RawBuffer => b as unknown as RawBuffer;

export function base64Length(n: number): number {
  return Math.ceil(n / 3) * 4;
}

export class ByteBuilder {
  /** The scratch buffer being written; undefined once toBuffer has made the output. */
  private buf: Buffer | undefined;
  /** The module whose memory `buf` views, when it does. */
  private readonly native: NativeScratch | undefined;
  /** Where the output starts in `buf`. */
  private readonly start: number;
  /** Where the next byte goes in `buf`. */
  private offset: number;
  /** Small pieces not yet written. */
  private pending = '';
  private result: Buffer | undefined;

  /** Where the staged markup starts in `buf`. */
  private readonly stagedAt: number;
  /** The staged markup's length in bytes, and in characters. */
  private readonly stagedBytes: number;
  private readonly stagedLength: number;

  /**
   * `staged`: markup to stage, written into the scratch in one call before the output (which
   * starts after it): a renderer lays out every file's markup at once and then takes it piece by
   * piece (stagedBlock, staged), instead of writing hundreds of short strings one by one.
   */
  constructor(staged = '') {
    this.native = takeNativeScratch();
    if (this.native === undefined) {
      this.buf = idle ?? Buffer.allocUnsafeSlow(SCRATCH_MIN);
      idle = undefined;
      this.offset = 0;
    } else {
      this.buf = this.native.view;
      this.offset = SCRATCH_AT;
    }
    this.stagedAt = this.offset;
    this.stagedBytes = 0;
    this.stagedLength = staged.length;
    if (staged !== '') {
      const buf = this.room(staged.length * 3);
      this.stagedBytes = raw(buf).utf8Write(staged, this.offset);
      // 16 bytes apart at least: the module's 16-byte copy of a piece must not reach the output
      this.offset = (this.offset + this.stagedBytes + 31) & ~15;
    }
    this.start = this.offset;
  }

  /**
   * True when the staged markup is ASCII (as many bytes as characters): only then do offsets in
   * the staged string name its bytes, as stagedBlock and staged take them.
   */
  get stagedAscii(): boolean {
    return this.stagedBytes === this.stagedLength;
  }

  /** The staged markup's characters `from` to `to` (see stagedAscii), copied into the output. */
  staged(from: number, to: number): this {
    if (to <= from) return this;
    this.flush();
    const buf = this.room(to - from);
    buf.copyWithin(this.offset, this.stagedAt + from, this.stagedAt + to);
    this.offset += to - from;
    return this;
  }

  /**
   * As literalBlock(content, parentIndent, before), where `before` (the markup, with the block's
   * header as blockHeader gives it, at its end) is the staged markup's characters `from` to `to`:
   * copied into place by the same native call that writes the block. Writes nothing unless
   * 'written' (the caller then writes the markup and the content its own way).
   */
  stagedBlock(content: Buffer, parentIndent: number, from: number, to: number): BlockVerdict {
    const native = this.native;
    if (native === undefined) return 'undecided';
    this.flush();
    const end = native.writeBody(
      content,
      parentIndent,
      this.offset,
      this.stagedAt + from,
      to - from,
    );
    this.buf = native.view;
    if (typeof end !== 'number') return end;
    this.offset = end;
    return 'written';
  }

  /**
   * The first line of the literal block literalBlock() would write for `content`, or undefined
   * when it would leave the content to the JavaScript path anyway (see NativeScratch.header).
   */
  static blockHeader(content: Buffer, parentIndent: number): string | undefined {
    return NativeScratch.header(content, parentIndent);
  }

  /** Any text, written as UTF-8. */
  text(s: string): this {
    this.pending += s;
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
    const buf = this.room(s.length);
    this.offset += raw(buf).latin1Write(s, this.offset);
    return this;
  }

  /**
   * `b` as base64 (RFC 4648, padded), on one line, or cut into lines of `width` characters with
   * an LF between them (none after the last).
   */
  base64(b: Buffer, width = 0): this {
    if (b.length === 0) return this;
    this.flush();
    const n = base64Length(b.length);
    const buf = this.room(width > 0 ? n + Math.ceil(n / width) - 1 : n);
    const text = raw(b).base64Slice(0, b.length);
    this.offset =
      width > 0
        ? writeLines(buf, this.offset, text, width)
        : this.offset + raw(buf).latin1Write(text, this.offset);
    return this;
  }

  /** Bytes copied as they are (the caller has checked they may stand in the output verbatim). */
  bytes(b: Buffer): this {
    if (b.length === 0) return this;
    this.flush();
    this.offset += b.copy(this.room(b.length), this.offset);
    return this;
  }

  /** Bytes `start` to `end` of `src`, copied as they are (as bytes(), with no view to make). */
  bytesOf(src: Buffer, start: number, end: number): this {
    if (end <= start) return this;
    this.flush();
    this.offset += src.copy(this.room(end - start), this.offset, start, end);
    return this;
  }

  /**
   * `before` (ASCII), then `content` as the YAML literal block literalBlock(content.toString(),
   * parentIndent) makes, then an LF, when isReadableText(content) holds: checked and written in
   * one native pass (wasm/literal-block.ts). Writes nothing otherwise: 'unreadable' is
   * isReadableText's verdict, 'undecided' leaves the content to the JavaScript path (non-ASCII
   * text, text of LFs only, text longer than BLOCK_TEXT_MAX, no WebAssembly).
   */
  literalBlock(content: Buffer, parentIndent: number, before: string): BlockVerdict {
    const native = this.native;
    if (native === undefined) return 'undecided';
    const header = NativeScratch.header(content, parentIndent);
    if (header === undefined) return 'undecided';
    // written with the markup before it (one write; flush() refuses a finished builder), taken
    // back if the body is not written
    this.pending += before;
    this.pending += header;
    this.flush();
    const end = native.writeBody(content, parentIndent, this.offset);
    this.buf = native.view;
    if (typeof end === 'number') {
      this.offset = end;
      return 'written';
    }
    this.offset -= before.length + header.length;
    return end;
  }

  /** Bytes written so far. */
  get length(): number {
    if (this.result) return this.result.length;
    this.flush();
    return this.offset - this.start;
  }

  /** The output, in a Buffer of its own. The builder is finished: it takes no more writes. */
  toBuffer(): Buffer {
    if (this.result) return this.result;
    this.flush();
    const buf = this.room(0);
    const out = Buffer.allocUnsafe(this.offset - this.start);
    buf.copy(out, 0, this.start, this.offset);
    this.result = out;
    this.buf = undefined;
    if (this.native !== undefined) giveBackNativeScratch(this.native, SCRATCH_AT + SCRATCH_KEEP);
    else if (buf.length <= SCRATCH_KEEP) idle = buf;
    return out;
  }

  toString(): string {
    return this.toBuffer().toString('utf8');
  }

  private flush(): void {
    const s = this.pending;
    if (s === '') return;
    this.pending = '';
    // UTF-8 takes at most 3 bytes per UTF-16 unit; count exactly only for long text
    const buf = this.room(s.length <= 4096 ? s.length * 3 : Buffer.byteLength(s, 'utf8'));
    this.offset += raw(buf).utf8Write(s, this.offset);
  }

  /** The scratch buffer, with room for `bytes` more; grown (doubled at least) when it has not. */
  private room(bytes: number): Buffer {
    const buf = this.buf;
    if (buf === undefined) throw new Error('ByteBuilder: written to after toBuffer()');
    const need = this.offset + bytes;
    if (need <= buf.length) return buf;
    // the native memory grows in place: nothing to copy
    if (this.native !== undefined) return (this.buf = this.native.room(need));
    const grown = Buffer.allocUnsafeSlow(2 ** Math.ceil(Math.log2(Math.max(need, buf.length * 2))));
    buf.copy(grown, 0, 0, this.offset);
    this.buf = grown;
    return grown;
  }
}

/**
 * Writes `s` (ASCII) at `offset` cut into lines of `width` characters with an LF between them:
 * the whole text in one native write, then each line from the last to the second moved down into
 * place (a memmove within the output: far cheaper than writing the lines one by one as slices).
 */
function writeLines(out: Buffer, offset: number, s: string, width: number): number {
  const n = s.length;
  raw(out).latin1Write(s, offset);
  const lines = Math.ceil(n / width);
  for (let k = lines - 1; k > 0; k--) {
    const from = offset + k * width;
    const to = from + k;
    out.copyWithin(to, from, Math.min(from + width, offset + n));
    out[to - 1] = 0x0a;
  }
  return offset + n + lines - 1;
}
