/**
 * The one strict reading of a PEM block oscar did not make itself (docs/identity.md, "One
 * reading of a request"). Go's encoding/pem — what kube-apiserver and kube-controller-manager's
 * signer use — skips junk before a block, takes the first of several, accepts headers, spaces,
 * tabs and CR, and skips a block whose base64 does not decode; Node's base64 decoder ignores
 * junk characters and missing padding. Two readers that lenient can read two different requests
 * in one text. So oscar reads only the form on which both are provably the same:
 *
 *   -----BEGIN <label>-----\n
 *   one or more lines of base64 alphabet only, each ending in \n
 *   -----END <label>-----        (optionally followed by one \n, then nothing)
 *
 * The base64 is canonical: its length a multiple of 4, '=' only as the final padding, and the
 * decoded bytes re-encode to exactly the same text (no stray bits). On this form Go's pem.Decode
 * finds this block first (the only BEGIN and END lines), reads no headers (no ':' in base64),
 * and decodes the same bytes; the differential test checks it against Go itself.
 */

export interface PemLimits {
  /** Most bytes the whole text may have; checked before anything is decoded. */
  maxBytes: number;
}

const BASE64_LINE = /^[A-Za-z0-9+/=]+$/;

/** The DER bytes of the single `label` block that is the whole of `text`, or why not. */
export function readStrictPem(text: Buffer, label: string, limits: PemLimits): Buffer | Error {
  if (text.length > limits.maxBytes) {
    return new Error(
      `it is ${String(text.length)} bytes; at most ${String(limits.maxBytes)} are read`,
    );
  }
  const begin = `-----BEGIN ${label}-----\n`;
  const end = `-----END ${label}-----`;
  const body = bodyOf(text.toString('latin1'), begin, end);
  if (body instanceof Error) return body;
  const lines = body.split('\n');
  // The body ends in '\n' (bodyOf), so the last element is empty; every other one is a line.
  lines.pop();
  if (!lines.every((line) => BASE64_LINE.test(line))) {
    return new Error(
      `between the ${label} lines there must be only lines of base64 (A-Z a-z 0-9 + / =), each ending in a newline: no headers, spaces, tabs or CR`,
    );
  }
  const joined = lines.join('');
  // Node writes base64 only in the canonical form: a text that is its own re-encoding has a
  // length that is a multiple of 4, '=' only as the final padding and no stray bits.
  const der = Buffer.from(joined, 'base64');
  if (der.toString('base64') !== joined) {
    return new Error(
      'its base64 is not canonical: the length must be a multiple of 4, with = only as the final padding and no stray bits',
    );
  }
  return der;
}

function bodyOf(text: string, begin: string, end: string): string | Error {
  const form = `exactly one PEM block (${begin.trim()} … ${end}) with nothing before or after it`;
  if (!text.startsWith(begin)) {
    return new Error(`it must be ${form}; it does not start with ${begin.trim()}`);
  }
  const rest = text.endsWith(`${end}\n`)
    ? text.slice(begin.length, -(end.length + 1))
    : text.endsWith(end)
      ? text.slice(begin.length, -end.length)
      : undefined;
  if (rest === undefined) return new Error(`it must be ${form}; it does not end with ${end}`);
  if (rest.includes('-----')) {
    return new Error(`it must be ${form}; it holds another BEGIN or END line`);
  }
  if (!rest.endsWith('\n')) return new Error(`it must be ${form}; ${end} must start a line`);
  return rest;
}
