// The native literal block (literal-block.wat) against the JavaScript path it replaces, which
// stays the reference: isReadableText for the verdict, literalBlock for the bytes written.
import { execFileSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { bytesModule, compileWat, wasmDir } from '../../hack/wasm/compile.js';
import { ByteBuilder } from '../byte-builder.js';
import { isReadableText } from '../common.js';
import { literalBlock } from '../yaml-writer.js';
import { BLOCK_TEXT_MAX, type BlockVerdict } from './literal-block.js';

const BEFORE = '    content: ';

/** What the JavaScript path writes for `content` under a key at column 4 (as contentField). */
function reference(content: Buffer): { verdict: BlockVerdict; bytes: Buffer } {
  if (!isReadableText(content)) return { verdict: 'unreadable', bytes: Buffer.alloc(0) };
  const block = literalBlock(content.toString('utf8'), 4);
  if (block === undefined) return { verdict: 'undecided', bytes: Buffer.alloc(0) };
  return { verdict: 'written', bytes: Buffer.from(`${BEFORE}${block}\n`) };
}

function native(content: Buffer): { verdict: BlockVerdict; bytes: Buffer } {
  const out = new ByteBuilder();
  const verdict = out.literalBlock(content, 4, BEFORE);
  return { verdict, bytes: out.toBuffer() };
}

/** Agrees with the reference, and decides everything but non-ASCII and LF-only text itself. */
function expectAgreement(content: Buffer): void {
  const want = reference(content);
  const got = native(content);
  const label = JSON.stringify(content.toString('latin1'));
  if (got.verdict === 'undecided') {
    expect(got.bytes.length, label).toBe(0);
    const leftAlone = content.some((b) => b >= 0x80) || !content.some((b) => b !== 0x0a);
    expect(leftAlone || content.length === 0 || content.length > BLOCK_TEXT_MAX, label).toBe(true);
    return;
  }
  expect(got.verdict, label).toBe(want.verdict);
  expect(got.bytes.toString('latin1'), label).toBe(want.bytes.toString('latin1'));
}

/** Bytes at every edge the check looks at: controls, DEL, space and tab before an LF, UTF-8. */
const EDGY = [
  [0x0a],
  [0x0a],
  [0x09],
  [0x20],
  [0x0d],
  [0x00],
  [0x08],
  [0x0b],
  [0x1f],
  [0x7f],
  [0x7e],
  [0x21],
  [0x80],
  [0xff],
  [0xc3, 0xa9],
  [0xc2, 0x85],
  [0xe2, 0x80, 0xa8],
  [0xef, 0xbb, 0xbf],
];
const piece = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...EDGY) },
  { weight: 3, arbitrary: fc.stringMatching(/^[ -~]{1,40}$/).map((s) => [...Buffer.from(s)]) },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 8 }).map((a) => [...a]) },
);
const bytes = (maxPieces: number) =>
  fc.array(piece, { maxLength: maxPieces }).map((parts) => Buffer.from(parts.flat()));

describe('ByteBuilder.literalBlock', () => {
  it('agrees with isReadableText and literalBlock on random bytes', () => {
    fc.assert(
      fc.property(bytes(20), (b) => {
        expectAgreement(b);
      }),
      { numRuns: 20000 },
    );
  });

  it('agrees on long texts, up to the largest it takes, one after another', () => {
    const line = fc.oneof(
      fc.constantFrom('', ' indented', '\tx', 'trailing ', 'tab\t', 'a\x7f', 'k: v', '#'),
      fc.stringMatching(/^[!-~][ -~]{0,120}[!-~]$/),
    );
    const text = fc
      .tuple(fc.array(line, { maxLength: 200 }), fc.constantFrom('', '\n', '\n\n'))
      .map(([lines, end]) => Buffer.from(lines.join('\n') + end).subarray(0, BLOCK_TEXT_MAX));
    fc.assert(
      fc.property(fc.array(text, { minLength: 1, maxLength: 4 }), (texts) => {
        for (const t of texts) expectAgreement(t);
      }),
      { numRuns: 500 },
    );
  });

  it('writes blocks in place one after another, with markup between, as the scratch grows', () => {
    // each block goes where the output has got to (in the module's memory, which grows under
    // it), and a block left to the JavaScript path takes back the markup written before it
    const text = fc.oneof(
      fc.stringMatching(/^[!-~][ -~\n]{0,3000}\n$/).map((t) => Buffer.from(t)),
      fc.constantFrom(Buffer.from('é\n'), Buffer.from('a \n'), Buffer.from('\n'), Buffer.from('')),
    );
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.string({ maxLength: 30 }), text), { minLength: 1, maxLength: 60 }),
        (items) => {
          // a builder holding the kept scratch, so `out` starts on a new one of 64 KiB
          const holder = new ByteBuilder();
          const out = new ByteBuilder();
          const want: Buffer[] = [];
          for (const [markup, content] of items) {
            out.text(markup);
            want.push(Buffer.from(markup));
            const verdict = out.literalBlock(content, 4, BEFORE);
            const ref = reference(content);
            if (verdict === 'written') {
              expect(ref.verdict).toBe('written');
              want.push(ref.bytes);
            } else {
              expect(verdict === 'undecided' || ref.verdict === 'unreadable').toBe(true);
            }
          }
          expect(out.toBuffer().toString('latin1')).toBe(Buffer.concat(want).toString('latin1'));
          holder.toBuffer();
        },
      ),
      { numRuns: 200 },
    );
  });

  it('writes blocks after markup staged at once (stagedBlock, staged) as literalBlock does', () => {
    // the cloud-config layout: every file's markup laid out in one string first, each piece
    // copied into place by the call that writes its block, or by staged() when it is not written
    const text = fc.oneof(
      fc.stringMatching(/^[!-~][ -~\n]{0,3000}\n$/).map((t) => Buffer.from(t)),
      fc.constantFrom(Buffer.from('é\n'), Buffer.from('a \n'), Buffer.from('\n'), Buffer.from('')),
    );
    const markup = fc.stringMatching(/^[ -~\n]{0,40}$/);
    fc.assert(
      fc.property(fc.array(fc.tuple(markup, text), { minLength: 1, maxLength: 60 }), (items) => {
        const pieces = items.map(([m, content]) => {
          const header = ByteBuilder.blockHeader(content, 4);
          return { m, content, block: header === undefined ? '' : `${BEFORE}${header}` };
        });
        const staged = pieces.map((p) => p.m + p.block).join('');
        const holder = new ByteBuilder();
        const out = new ByteBuilder(staged);
        expect(out.stagedAscii).toBe(true);
        const want: Buffer[] = [];
        let from = 0;
        for (const { m, content, block } of pieces) {
          const headerAt = from + m.length;
          const to = headerAt + block.length;
          want.push(Buffer.from(m));
          const verdict = block === '' ? 'undecided' : out.stagedBlock(content, 4, from, to);
          const ref = reference(content);
          if (verdict === 'written') {
            expect(ref.verdict).toBe('written');
            want.push(ref.bytes);
          } else {
            expect(verdict === 'undecided' || ref.verdict === 'unreadable').toBe(true);
            out.staged(from, headerAt);
          }
          from = to;
        }
        expect(out.toBuffer().toString('latin1')).toBe(Buffer.concat(want).toString('latin1'));
        holder.toBuffer();
      }),
      { numRuns: 200 },
    );
    // staged markup with a byte from 0x80 up: its offsets are not byte offsets
    const utf8 = new ByteBuilder('  - path: /é\n');
    expect(utf8.stagedAscii).toBe(false);
    expect(utf8.toBuffer().length).toBe(0);
  });

  it('agrees with every edge byte at every position around the 16-byte steps', () => {
    for (const length of [1, 2, 15, 16, 17, 31, 32, 33, 48, BLOCK_TEXT_MAX - 1, BLOCK_TEXT_MAX]) {
      const positions = new Set([0, 1, 14, 15, 16, 17, 30, 31, 32, length - 2, length - 1]);
      for (const at of [...positions].filter((p) => p >= 0 && p < length)) {
        for (const edge of EDGY) {
          const b = Buffer.alloc(length, 'x');
          Buffer.from(edge).copy(b, at);
          expectAgreement(b);
          // the same with LFs around it: lines that are empty, end there, or start there
          if (at > 0) b[at - 1] = 0x0a;
          expectAgreement(b);
          b.fill(0x0a, 0, at);
          expectAgreement(b);
        }
      }
    }
  });

  it('writes the indentation indicator, the chomping and empty lines as literalBlock does', () => {
    for (const text of [
      'a',
      'a\n',
      'a\n\n',
      'a\n\n\n',
      ' a\n',
      '\n\n a',
      '\na\n\nb\n',
      'a\n \tb',
    ]) {
      expect(native(Buffer.from(text)).verdict, JSON.stringify(text)).toBe('written');
      expectAgreement(Buffer.from(text));
    }
    expect(native(Buffer.from('a \n')).verdict).toBe('unreadable');
    expect(native(Buffer.from('\n\n')).verdict).toBe('undecided');
    expect(native(Buffer.from('é\n')).verdict).toBe('undecided');
    expect(native(Buffer.alloc(BLOCK_TEXT_MAX + 1, 'x')).verdict).toBe('undecided');
  });

  it('leaves everything to the JavaScript path where Node runs without WebAssembly', () => {
    const script = [
      "import { ByteBuilder } from './renderers/byte-builder.ts';",
      "const out = new ByteBuilder().ascii('x');",
      "const verdict = out.literalBlock(Buffer.from('a\\n'), 4, '');",
      'console.log(typeof WebAssembly, verdict, JSON.stringify(out.toString()));',
    ].join('\n');
    const run = (flags: string[]) =>
      execFileSync(
        process.execPath,
        [...flags, '--import', 'tsx', '--input-type=module', '-e', script],
        {
          encoding: 'utf8',
        },
      ).trim();
    expect(run(['--jitless'])).toBe('undefined undecided "x"');
    expect(run([])).toBe('object written "x|\\n      a\\n"');
  });

  it('ships the bytes its WebAssembly text compiles to (npm run gen:wasm)', async () => {
    const name = 'literal-block.wat';
    const compiled = await compileWat(await readFile(join(wasmDir, name), 'utf8'), name);
    const committed = await readFile(join(wasmDir, 'literal-block-bytes.ts'), 'utf8');
    expect(committed).toBe(bytesModule(name, compiled));
  });
});
