// One reading of a CSR (docs/identity.md): every spec.request oscar's reader accepts, Go's reader
// (kube-apiserver's validation and the signer: encoding/pem's first block + x509) reads the same
// way. Inputs the two read differently must be refused by oscar's reader, so the approver denies.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { certificateRequest, newNodeKey } from '../../agent/identity/csr.js';
import { goCsrReader, readWithGo, type GoReading } from '../../test/support/csr-reader.js';
import { parseRequest, type ParsedRequest } from './request.js';

const reader = goCsrReader();
const LABEL = 'CERTIFICATE REQUEST';

function derOf(cn: string, organizations: string[]): Buffer {
  const pem = certificateRequest(newNodeKey(), { commonName: cn, organizations });
  return Buffer.from(pem.split('\n').slice(1, -2).join(''), 'base64');
}
const good = derOf('oscar:node:m1', ['oscar:nodes']);
const evil = derOf('system:serviceaccount:kube-system:generic-garbage-collector', [
  'system:serviceaccounts',
]);

interface BlockShape {
  label: string;
  width: number;
  eol: string;
  header: string;
  junk: { at: number; text: string } | undefined;
  unpad: boolean;
}

function block(der: Buffer, s: BlockShape): string {
  let b64 = der.toString('base64');
  if (s.unpad) b64 = b64.replace(/=+$/, '');
  if (s.junk) {
    const at = s.junk.at % (b64.length + 1);
    b64 = b64.slice(0, at) + s.junk.text + b64.slice(at);
  }
  const lines = b64.match(new RegExp(`[\\s\\S]{1,${String(s.width)}}`, 'g')) ?? [];
  const { eol } = s;
  return `-----BEGIN ${s.label}-----${eol}${s.header}${lines.join(eol)}${eol}-----END ${s.label}-----`;
}

const canonical: BlockShape = {
  label: LABEL,
  width: 64,
  eol: '\n',
  header: '',
  junk: undefined,
  unpad: false,
};

const shape: fc.Arbitrary<BlockShape> = fc.record({
  label: fc.constantFrom(
    LABEL,
    LABEL,
    'NEW CERTIFICATE REQUEST',
    'CERTIFICATE',
    'certificate request',
  ),
  width: fc.constantFrom(64, 64, 76, 16, 1000, 3),
  eol: fc.constantFrom('\n', '\n', '\r\n', ' \n', '\t\n', '\n\n'),
  header: fc.constantFrom('', '', 'Proc-Type: 4,ENCRYPTED\n', 'X: y\n\n', ':\n'),
  junk: fc.option(
    fc.record({
      at: fc.nat(2000),
      text: fc.constantFrom(
        '.',
        ' ',
        '\t',
        '*',
        '-',
        ':',
        '=',
        '\r',
        '\n',
        '==',
        'A',
        '\u00e9',
        '\0',
      ),
    }),
  ),
  unpad: fc.boolean(),
});

const piece = fc.oneof(
  fc.constant(''),
  fc.constant('\n'),
  fc.constant('junk\n'),
  fc.constant('-----BEGIN CERTIFICATE REQUEST-----\n'),
  fc.constant('-----END CERTIFICATE REQUEST-----\n'),
  fc.string({ maxLength: 12 }),
);

/** A text built of 1-3 blocks (good or evil DER) with junk before, between and after. */
const variant: fc.Arbitrary<Buffer> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc
      .tuple(
        piece,
        fc.array(fc.tuple(fc.boolean(), shape, piece), { minLength: 1, maxLength: 3 }),
        fc.constantFrom('', '\n', '\r\n', '\n\n', ' '),
      )
      .map(([before, blocks, tail]) =>
        Buffer.from(
          before +
            blocks.map(([isGood, s, after]) => block(isGood ? good : evil, s) + after).join('\n') +
            tail,
          'latin1',
        ),
      ),
  },
  {
    weight: 3,
    // The accepted form, any width, either request, with or without the final newline.
    arbitrary: fc
      .tuple(fc.boolean(), fc.integer({ min: 1, max: 400 }), fc.boolean())
      .map(([isGood, width, newline]) =>
        Buffer.from(block(isGood ? good : evil, { ...canonical, width }) + (newline ? '\n' : '')),
      ),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      good,
      Buffer.concat([good, Buffer.from([0])]),
      Buffer.from(good.toString('base64')),
    ),
  },
  {
    weight: 2,
    // A canonical block with one byte changed, inserted or removed anywhere.
    arbitrary: fc
      .tuple(
        fc.nat(2000),
        fc.integer({ min: 0, max: 255 }),
        fc.constantFrom('set', 'insert', 'delete'),
      )
      .map(([at, byte, op]) => {
        const text = Buffer.from(`${block(good, canonical)}\n`, 'latin1');
        const i = at % text.length;
        if (op === 'set')
          return Buffer.concat([text.subarray(0, i), Buffer.from([byte]), text.subarray(i + 1)]);
        if (op === 'insert')
          return Buffer.concat([text.subarray(0, i), Buffer.from([byte]), text.subarray(i)]);
        return Buffer.concat([text.subarray(0, i), text.subarray(i + 1)]);
      }),
  },
);

/** Why oscar's accepted reading differs from Go's, or undefined when they agree. */
function disagreement(ours: ParsedRequest, go: GoReading): string | undefined {
  if (!go.ok) return `Go refuses it (${go.error ?? ''})`;
  if (JSON.stringify(ours.subject) !== JSON.stringify(go.subject)) {
    return `subjects differ: ${JSON.stringify(ours.subject)} vs ${JSON.stringify(go.subject)}`;
  }
  const goHasMore = (go.extensions?.length ?? 0) > 0 || go.sans > 0;
  if (ours.attributes.length === 0 && goHasMore) return 'Go reads extensions oscar does not';
  if (ours.signatureValid && !go.signatureValid) return 'oscar verifies a signature Go does not';
  return undefined;
}

describe.skipIf(reader === undefined)(
  'one reading of a CSR: oscar vs Go (encoding/pem + x509)',
  () => {
    it('the canonical form, as the agent, openssl-style 64 and one-line widths write it, is read alike (positive control)', () => {
      const inputs = [64, 76, 10_000].map((width) =>
        Buffer.from(`${block(good, { ...canonical, width })}\n`),
      );
      inputs.push(Buffer.from(block(good, canonical))); // no final newline
      const go = readWithGo(reader ?? '', inputs);
      for (const [i, input] of inputs.entries()) {
        const ours = parseRequest(input);
        expect(ours).not.toBeInstanceOf(Error);
        expect(disagreement(ours as ParsedRequest, go[i] as GoReading)).toBeUndefined();
        expect(go[i]?.subject).toEqual([
          { type: '2.5.4.10', value: 'oscar:nodes' },
          { type: '2.5.4.3', value: 'oscar:node:m1' },
        ]);
      }
    });

    it('a first block with a junk character: Go skips it and reads the second; oscar refuses', () => {
      const input = Buffer.from(
        `${block(good, { ...canonical, junk: { at: 10, text: '.' } })}\n${block(evil, canonical)}\n`,
      );
      const [go] = readWithGo(reader ?? '', [input]);
      expect(go?.subject).toContainEqual({
        type: '2.5.4.3',
        value: 'system:serviceaccount:kube-system:generic-garbage-collector',
      });
      expect(parseRequest(input)).toBeInstanceOf(Error);
    });

    it('a NEW CERTIFICATE REQUEST block before the real one: oscar refuses', () => {
      const input = Buffer.from(
        `${block(good, { ...canonical, label: 'NEW CERTIFICATE REQUEST' })}\n${block(evil, canonical)}\n`,
      );
      expect(parseRequest(input)).toBeInstanceOf(Error);
    });

    it('every input oscar accepts, Go reads the same way (property, 3,000 variants)', () => {
      const inputs = fc.sample(variant, { numRuns: 3000, seed: 28 });
      const go = readWithGo(reader ?? '', inputs);
      const tally = { bothRead: 0, goOnly: 0, neither: 0 };
      const problems: string[] = [];
      for (const [i, input] of inputs.entries()) {
        const ours = parseRequest(input);
        const theirs = go[i] as GoReading;
        if (ours instanceof Error) {
          if (theirs.ok) tally.goOnly++;
          else tally.neither++;
          continue;
        }
        tally.bothRead++;
        const why = disagreement(ours, theirs);
        if (why !== undefined) problems.push(`${JSON.stringify(input.toString('latin1'))}: ${why}`);
      }
      expect(problems).toEqual([]);
      // The property must have exercised both sides: accepted forms and refused lenient ones.
      expect(tally.bothRead).toBeGreaterThan(50);
      expect(tally.goOnly).toBeGreaterThan(50);
      console.info(`csr differential: ${JSON.stringify(tally)}`);
    });
  },
);
