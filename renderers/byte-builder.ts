/**
 * Assembles rendered output straight into one Buffer: every part is copied exactly once, and an
 * ASCII part (markup, base64) stays a one-byte string instead of being widened by a join with
 * non-Latin-1 text. A large payload is mostly base64, so this keeps rendering close to the speed
 * of the base64 pass itself.
 */
export class ByteBuilder {
  private readonly parts: string[] = [];
  /** Per part: its UTF-8 byte length, negative when the part is known to be ASCII. */
  private readonly sizes: number[] = [];
  private total = 0;

  /** Any text, written as UTF-8. */
  text(s: string): this {
    const n = Buffer.byteLength(s, 'utf8');
    this.parts.push(s);
    this.sizes.push(n);
    this.total += n;
    return this;
  }

  /** Several texts in a row. */
  push(...parts: string[]): this {
    for (const part of parts) this.text(part);
    return this;
  }

  /** Text the caller knows is ASCII (base64, quoted markup): no UTF-8 pass is needed. */
  ascii(s: string): this {
    this.parts.push(s);
    this.sizes.push(-s.length - 1);
    this.total += s.length;
    return this;
  }

  get length(): number {
    return this.total;
  }

  toBuffer(): Buffer {
    const out = Buffer.allocUnsafe(this.total);
    let offset = 0;
    for (let i = 0; i < this.parts.length; i++) {
      const s = this.parts[i] ?? '';
      const n = this.sizes[i] ?? 0;
      offset += out.write(s, offset, n < 0 ? 'latin1' : 'utf8');
    }
    if (offset !== this.total)
      throw new Error(`ByteBuilder: wrote ${offset} of ${this.total} bytes`);
    return out;
  }

  toString(): string {
    return this.toBuffer().toString('utf8');
  }
}
