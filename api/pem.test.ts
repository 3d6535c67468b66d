import { describe, expect, it } from 'vitest';
import { readStrictPem } from './pem.js';

const der = Buffer.from('0\x82\x01\x02 some DER bytes, any length 12345', 'latin1');
const b64 = der.toString('base64');
const LABEL = 'CERTIFICATE REQUEST';
const pem = (body: string, label = LABEL): string =>
  `-----BEGIN ${label}-----\n${body}\n-----END ${label}-----\n`;
const read = (text: string, maxBytes = 4096) =>
  readStrictPem(Buffer.from(text, 'latin1'), LABEL, { maxBytes });

describe('readStrictPem', () => {
  it('reads the one block, wrapped at any width, with or without the final newline', () => {
    expect(read(pem(b64))).toEqual(der);
    expect(read(pem(b64.match(/.{1,7}/g)?.join('\n') ?? ''))).toEqual(der);
    expect(read(pem(b64).slice(0, -1))).toEqual(der);
  });

  it.each([
    ['junk before', `x\n${pem(b64)}`, 'does not start with'],
    ['junk after', `${pem(b64)}x`, 'does not end with'],
    ['a blank line after', `${pem(b64)}\n`, 'does not end with'],
    ['a second block', pem(b64) + pem(b64), 'another BEGIN or END'],
    ['the NEW label', pem(b64, 'NEW CERTIFICATE REQUEST'), 'does not start with'],
    ['a header', pem(`Proc-Type: 4,ENCRYPTED\n${b64}`), 'only lines of base64'],
    ['CRLF', pem(b64).replaceAll('\n', '\r\n'), 'does not start with'],
    ['CR inside', pem(`${b64.slice(0, 8)}\r\n${b64.slice(8)}`), 'only lines of base64'],
    ['a space', pem(`${b64.slice(0, 8)} ${b64.slice(8)}`), 'only lines of base64'],
    ['a junk character', pem(`${b64.slice(0, 8)}.${b64.slice(8)}`), 'only lines of base64'],
    ['a blank line inside', pem(`${b64.slice(0, 8)}\n\n${b64.slice(8)}`), 'only lines of base64'],
    ['no body', `-----BEGIN ${LABEL}-----\n-----END ${LABEL}-----\n`, 'must start a line'],
    ['END not on its own line', pem(b64).replace('\n-----END', '-----END'), 'must start a line'],
    ['missing padding', pem(b64.replace(/=+$/, '')), 'not canonical'],
    ['padding inside', pem(`AA==${b64}`), 'not canonical'],
    ['stray bits', pem(`${b64.slice(0, -3)}B==`), 'not canonical'],
    ['DER', der.toString('latin1'), 'does not start with'],
  ])('refuses %s, saying why', (_name, text, why) => {
    const got = read(text);
    expect(got).toBeInstanceOf(Error);
    expect((got as Error).message).toContain(why);
  });

  it('refuses a text over the limit before decoding it, and reads one at the limit', () => {
    const text = pem(b64);
    expect(read(text, text.length)).toEqual(der);
    expect((read(text, text.length - 1) as Error).message).toContain('at most');
  });
});
