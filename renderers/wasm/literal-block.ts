/**
 * A file's content written as a YAML literal block straight from its bytes: the readability check
 * and the indentation in one native pass (literal-block.wat, WebAssembly with SIMD), with no
 * string made on the way. The JavaScript path (isReadableText, toString, literalBlock) checks every
 * byte, decodes, and moves every line in separate passes: for 600 files of 3.5 KiB it cost ~4×
 * the base64 of the same bytes, this well under 1× (docs/performance.md).
 *
 * Only ASCII text is settled here (the usual config file); text with bytes from 0x80 up, and
 * text with no line that is not empty (no literal block carries it), are left to the JavaScript
 * path, which stays the reference: literal-block.test.ts checks both agree.
 */
import { WASM_BASE64 } from './literal-block-bytes.js';

/** What writeLiteralBlock did: wrote the block, found the text unreadable, or left it alone. */
export type BlockVerdict = 'written' | 'unreadable' | 'undecided';

/** The layout in the module's memory (see literal-block.wat). */
const TEXT_AT = 16;
const BODY_AT = 8192;
/** The longest text and indentation the memory layout has room for. */
export const BLOCK_TEXT_MAX = 4096;
const PAD_MAX = 16;

const LF = 0x0a;

/** The parts of the WebAssembly API used here (not in the ES2023 lib this project builds with). */
interface WasmApi {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object) => { exports: Record<string, unknown> };
}

interface Indenter {
  memory: Buffer;
  indent: (n: number, pad: number) => number;
}

/** The instance once made; null where Node runs without WebAssembly (`--jitless`). */
let indenter: Indenter | null | undefined;

/** The module, instantiated on first use (synchronously: it is 0.5 KB). */
function load(): Indenter | null {
  if (indenter !== undefined) return indenter;
  const wasm = (globalThis as unknown as { WebAssembly?: WasmApi }).WebAssembly;
  // --jitless takes WebAssembly away: every text then takes the JavaScript path
  if (wasm === undefined) return (indenter = null);
  const { exports } = new wasm.Instance(new wasm.Module(Buffer.from(WASM_BASE64, 'base64')));
  const memory = exports.memory as { buffer: ArrayBuffer };
  indenter = {
    // the memory never grows, so this view stays valid
    memory: Buffer.from(memory.buffer),
    indent: exports.indent as Indenter['indent'],
  };
  return indenter;
}

/** The block's first line by its indentation indicator and chomping, as literalBlock writes it. */
const HEADERS = {
  '': { clip: '|\n', strip: '|-\n', keep: '|+\n' },
  '2': { clip: '|2\n', strip: '|2-\n', keep: '|2+\n' },
};

/**
 * What the block is written into: the renderers' ByteBuilder fits it. Declared here, not imported,
 * so that this room stays below the renderers that use it (no import back up).
 */
export interface BlockSink {
  ascii(text: string): BlockSink;
  bytesOf(src: Buffer, start: number, end: number): BlockSink;
}

/**
 * Writes `before` (ASCII), then `content` as the literal block literalBlock(content.toString(),
 * parentIndent) would make, then an LF, into `out`, when isReadableText(content) holds; writes
 * nothing otherwise. 'unreadable' is isReadableText's verdict; 'undecided' leaves the content to
 * the JavaScript path (non-ASCII text, text of LFs only, text longer than BLOCK_TEXT_MAX).
 */
export function writeLiteralBlock(
  content: Buffer,
  parentIndent: number,
  before: string,
  out: BlockSink,
): BlockVerdict {
  const n = content.length;
  const pad = parentIndent + 2;
  if (n === 0 || n > BLOCK_TEXT_MAX || pad > PAD_MAX) return 'undecided';
  // the first byte that is not an LF: a block of LFs only cannot be written (literalBlock)
  let first = 0;
  while (first < n && content[first] === LF) first++;
  if (first === n) return 'undecided';
  const loaded = load();
  if (loaded === null) return 'undecided';
  const { memory, indent } = loaded;
  memory.set(content, TEXT_AT);
  const length = indent(n, pad);
  if (length === -1) return 'unreadable';
  if (length < 0) return 'undecided';
  const headers = HEADERS[content[first] === 0x20 ? '2' : ''];
  const endsInLf = content[n - 1] === LF;
  const header = !endsInLf
    ? headers.strip
    : n > 1 && content[n - 2] === LF
      ? headers.keep
      : headers.clip;
  out
    .ascii(before)
    .ascii(header)
    .bytesOf(memory, BODY_AT, BODY_AT + length);
  // the block's last LF: the text's own, or the one after the block that ends its value
  if (!endsInLf) out.ascii('\n');
  return 'written';
}
