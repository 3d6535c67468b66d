import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ByteBuilder } from './byte-builder.js';

type Op =
  | { op: 'text'; s: string }
  | { op: 'ascii'; s: string }
  | { op: 'bytes'; b: Buffer }
  | { op: 'bytesOf'; b: Buffer; start: number; end: number }
  | { op: 'base64'; b: Buffer; width: number };

const asciiString = (maxLength: number) =>
  fc.string({
    unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)),
    maxLength,
  });

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 40 }).map((s) => ({ op: 'text' as const, s })),
  // short and long (a part of its own) ASCII
  asciiString(2000).map((s) => ({ op: 'ascii' as const, s })),
  fc.uint8Array({ maxLength: 300 }).map((a) => ({ op: 'bytes' as const, b: Buffer.from(a) })),
  fc.tuple(fc.uint8Array({ maxLength: 300 }), fc.nat(), fc.nat()).map(([a, x, y]) => {
    const [start, end] = [x % (a.length + 1), y % (a.length + 1)].sort((p, q) => p - q);
    return { op: 'bytesOf' as const, b: Buffer.from(a), start: start ?? 0, end: end ?? 0 };
  }),
  fc
    .tuple(
      fc.uint8Array({ maxLength: 2500 }),
      fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 1100 })),
    )
    .map(([a, width]) => ({ op: 'base64' as const, b: Buffer.from(a), width })),
);

/** What the builder must produce, written the slow and obvious way. */
function expected(ops: readonly Op[]): Buffer {
  return Buffer.concat(
    ops.map((o) => {
      switch (o.op) {
        case 'text':
          return Buffer.from(o.s, 'utf8');
        case 'ascii':
          return Buffer.from(o.s, 'latin1');
        case 'bytes':
          return o.b;
        case 'bytesOf':
          return o.b.subarray(o.start, o.end);
        case 'base64': {
          const text = o.b.toString('base64');
          if (o.width === 0) return Buffer.from(text, 'latin1');
          const lines: string[] = [];
          for (let i = 0; i < text.length; i += o.width) lines.push(text.slice(i, i + o.width));
          return Buffer.from(lines.join('\n'), 'latin1');
        }
      }
    }),
  );
}

describe('ByteBuilder', () => {
  it('writes every part in order, exactly, whatever the mix of sizes and kinds', () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 12 }), (ops) => {
        const out = new ByteBuilder();
        for (const o of ops) {
          if (o.op === 'text') out.text(o.s);
          else if (o.op === 'ascii') out.ascii(o.s);
          else if (o.op === 'bytes') out.bytes(o.b);
          else if (o.op === 'bytesOf') out.bytesOf(o.b, o.start, o.end);
          else out.base64(o.b, o.width);
        }
        const want = expected(ops);
        expect(out.length).toBe(want.length);
        expect(out.toBuffer().equals(want)).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it('keeps UTF-8 text written through text() and push() intact', () => {
    const out = new ByteBuilder().text('é ').push('中', '😀').ascii('x'.repeat(600)).text('ü');
    expect(out.toString()).toBe(`é 中😀${'x'.repeat(600)}ü`);
  });

  it('writes long stretches of text (cut into parts) exactly', () => {
    const pieces = Array.from({ length: 20_000 }, (_, i) =>
      i % 3 === 0 ? `héllo ${i}\n` : `w${i} `,
    );
    const out = new ByteBuilder();
    for (const [i, p] of pieces.entries()) {
      if (i % 2 === 0) out.text(p);
      else out.push(p, '');
    }
    const want = Buffer.from(pieces.join(''), 'utf8');
    expect(out.length).toBe(want.length);
    expect(out.toBuffer().equals(want)).toBe(true);
  });

  it('writes base64 on one line, or cut into lines of the given width, no LF after the last', () => {
    const b = Buffer.from('any carnal pleasure'); // 19 bytes: 28 characters, padded
    expect(new ByteBuilder().base64(b).toString()).toBe('YW55IGNhcm5hbCBwbGVhc3VyZQ==');
    expect(new ByteBuilder().base64(b, 12).toString()).toBe('YW55IGNhcm5h\nbCBwbGVhc3Vy\nZQ==');
    expect(new ByteBuilder().base64(b, 14).toString()).toBe('YW55IGNhcm5hbC\nBwbGVhc3VyZQ==');
    expect(new ByteBuilder().base64(b, 28).length).toBe(28);
    expect(new ByteBuilder().base64(Buffer.alloc(0), 4).toString()).toBe('');
  });

  it('keeps builders that are open at once apart, and takes no writes once finished', () => {
    const a = new ByteBuilder().text('a1 ');
    const b = new ByteBuilder().text('b1 ');
    a.base64(Buffer.from('first'));
    b.bytes(Buffer.from('second'));
    expect(b.toString()).toBe('b1 second');
    const c = new ByteBuilder().text('c'); // takes the scratch buffer b gave back
    expect(a.text(' a2').toString()).toBe('a1 Zmlyc3Q= a2');
    expect(c.toString()).toBe('c');
    expect(() => a.text('more')).not.toThrow(); // joined, not written yet
    expect(() => a.bytes(Buffer.from('x'))).toThrow(/after toBuffer/);
    expect(a.toBuffer()).toBe(a.toBuffer());
  });

  it('grows past any size and hands out a Buffer the next render cannot touch', () => {
    const big = Buffer.alloc(5 * 1024 * 1024, 7); // above what is kept for the next builder
    const first = new ByteBuilder().text('head ').bytes(big).base64(big.subarray(0, 3000), 100);
    const out = first.toBuffer();
    expect(out.length).toBe(5 + big.length + 4000 + 39);
    const copy = Buffer.from(out);
    const second = new ByteBuilder();
    for (let i = 0; i < 1000; i++) second.ascii('z'.repeat(600));
    expect(second.length).toBe(600_000);
    second.toBuffer();
    expect(out.equals(copy)).toBe(true);
  });
});
