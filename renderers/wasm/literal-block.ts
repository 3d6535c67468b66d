/**
 * A file's content written as a YAML literal block straight from its bytes: the readability check
 * and the indentation in one native pass (literal-block.wat, WebAssembly with SIMD), with no
 * string made on the way. The JavaScript path (isReadableText, toString, literalBlock) checks every
 * byte, decodes, and moves every line in separate passes: for 600 files of 3.5 KiB it cost ~4×
 * the base64 of the same bytes, this well under 1× (docs/performance.md).
 *
 * The module's memory is also the renderers' scratch (NativeScratch): the ByteBuilder builds the
 * whole output in it, so the block's body is written where it belongs in the output, not copied
 * there from the module once per file.
 *
 * Only ASCII text is settled here (the usual config file); text with bytes from 0x80 up, and
 * text with no line that is not empty (no literal block carries it), are left to the JavaScript
 * path, which stays the reference: literal-block.test.ts checks both agree.
 */
import { WASM_BASE64 } from './literal-block-bytes.js';

/** What a block write did: wrote the block, found the text unreadable, or left it alone. */
export type BlockVerdict = 'written' | 'unreadable' | 'undecided';

/** The layout in the module's memory (see literal-block.wat). */
const TEXT_AT = 16;
/** Where the caller's part of the memory (the scratch) starts. */
export const SCRATCH_AT = 8192;
/** The longest text and indentation the memory layout has room for. */
export const BLOCK_TEXT_MAX = 4096;
const PAD_MAX = 16;
/** The 16 bytes the module's stores may write past the end of what it writes. */
const SLACK = 16;

const PAGE = 65536;
const LF = 0x0a;

/** indent()'s answers besides a length. */
const UNREADABLE = -1;

/** The parts of the WebAssembly API used here (not in the ES2023 lib this project builds with). */
interface WasmMemory {
  buffer: ArrayBuffer;
  grow(pages: number): number;
}
interface WasmApi {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object) => { exports: Record<string, unknown> };
}

/** The compiled module once made; null where Node runs without WebAssembly (`--jitless`). */
let compiled: { wasm: WasmApi; module: object } | null | undefined;

function compiledModule(): { wasm: WasmApi; module: object } | null {
  if (compiled !== undefined) return compiled;
  const wasm = (globalThis as unknown as { WebAssembly?: WasmApi }).WebAssembly;
  // --jitless takes WebAssembly away: every text then takes the JavaScript path
  if (wasm === undefined) return (compiled = null);
  return (compiled = { wasm, module: new wasm.Module(Buffer.from(WASM_BASE64, 'base64')) });
}

/** The block's first line by its indentation indicator and chomping, as literalBlock writes it. */
const HEADERS = {
  '': { clip: '|\n', strip: '|-\n', keep: '|+\n' },
  '2': { clip: '|2\n', strip: '|2-\n', keep: '|2+\n' },
};

/**
 * One instance of the module, its memory used as a growable scratch buffer: bytes from
 * SCRATCH_AT on are the caller's. Growing it moves nothing (the memory grows in place), but
 * makes a new view: take `view` again after room() or writeBlock().
 */
export class NativeScratch {
  /** The whole memory, as a Buffer; replaced whenever the memory grows. */
  view: Buffer;
  private readonly memory: WasmMemory;
  private readonly block: (n: number, pad: number, out: number, src: number, len: number) => number;

  private constructor(exports: Record<string, unknown>) {
    this.memory = exports.memory as WasmMemory;
    this.block = exports.block as NativeScratch['block'];
    this.view = Buffer.from(this.memory.buffer);
  }

  /** A new instance (its own memory); undefined where Node runs without WebAssembly. */
  static make(): NativeScratch | undefined {
    const c = compiledModule();
    if (c === null) return undefined;
    return new NativeScratch(new c.wasm.Instance(c.module).exports);
  }

  /** The view, with room up to byte `end` (grown to at least twice its size when it had not). */
  room(end: number): Buffer {
    const size = this.view.length;
    if (end <= size) return this.view;
    const want = Math.max(end, size * 2);
    this.memory.grow(Math.ceil((want - size) / PAGE));
    this.view = Buffer.from(this.memory.buffer);
    return this.view;
  }

  /**
   * The first line of the YAML literal block literalBlock(content.toString(), parentIndent) would
   * make (indentation indicator, chomping), when writeBody() can write the rest; undefined leaves
   * the content to the JavaScript path (empty, only LFs, longer than BLOCK_TEXT_MAX).
   */
  static header(content: Buffer, parentIndent: number): string | undefined {
    const n = content.length;
    if (n === 0 || n > BLOCK_TEXT_MAX || parentIndent + 2 > PAD_MAX) return undefined;
    // the first byte that is not an LF: a block of LFs only cannot be written (literalBlock)
    let first = 0;
    while (first < n && content[first] === LF) first++;
    if (first === n) return undefined;
    const headers = HEADERS[content[first] === 0x20 ? '2' : ''];
    if (content[n - 1] !== LF) return headers.strip;
    return n > 1 && content[n - 2] === LF ? headers.keep : headers.clip;
  }

  /**
   * After header() gave the block's first line: the rest of it (`content` indented, then an LF),
   * written at `at` when isReadableText(content) holds; returns where it ends. 'unreadable' is
   * isReadableText's verdict, 'undecided' leaves the content to the JavaScript path (text with
   * a byte from 0x80 up). Either way nothing before `at` is touched.
   *
   * With `markupLength`, the `markupLength` bytes at `markupAt` (markup the caller staged earlier
   * in the scratch, at least 16 bytes before `at`: the key and the block's header) are copied to
   * `at` first, in the same call, and the body follows them.
   */
  writeBody(
    content: Buffer,
    parentIndent: number,
    at: number,
    markupAt = 0,
    markupLength = 0,
  ): number | 'unreadable' | 'undecided' {
    const n = content.length;
    const pad = parentIndent + 2;
    // the markup, the body's longest (every other byte an LF), the LF after it, the slack
    const view = this.room(at + markupLength + n + pad * ((n >> 1) + 1) + 1 + SLACK);
    view.set(content, TEXT_AT);
    const length = this.block(n, pad, at, markupAt, markupLength);
    if (length === UNREADABLE) return 'unreadable';
    if (length < 0) return 'undecided';
    let end = at + length;
    // the block's last LF: the text's own, or the one after the block that ends its value
    if (content[n - 1] !== LF) view[end++] = LF;
    return end;
  }
}

/** The scratch no builder is using (a builder takes it and gives it back when done). */
let idle: NativeScratch | undefined;

/** A scratch for one builder: the idle one, or a new one; undefined without WebAssembly. */
export function takeNativeScratch(): NativeScratch | undefined {
  const taken = idle ?? NativeScratch.make();
  idle = undefined;
  return taken;
}

/** Gives a scratch back for the next builder, unless its memory has grown past `keepBytes`. */
export function giveBackNativeScratch(scratch: NativeScratch, keepBytes: number): void {
  if (scratch.view.length <= keepBytes) idle = scratch;
}
