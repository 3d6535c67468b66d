/**
 * What the approver reads of a PKCS#10 certificate request (spec.request of a CSR): its subject
 * as (type, value) pairs in order, the OIDs of its attributes (an extension request carries the
 * SANs), and whether its self-signature verifies. Parsed with @peculiar/asn1-csr; the signature is
 * checked with node:crypto over the request info's original bytes. Never throws: an unreadable
 * request is an error value, and the approver denies it.
 *
 * It reads only what kube-apiserver and the signer (Go) provably read the same way: one strict PEM
 * block and nothing else (api/pem.ts; no DER, no "NEW CERTIFICATE REQUEST", which the API server
 * refuses anyway), whose bytes are DER exactly as this parser would write them again (no BER
 * leniency, no trailing bytes). The differential test against Go's reader is
 * request.differential.test.ts.
 */
import { createPublicKey, verify } from 'node:crypto';
import { CertificationRequest } from '@peculiar/asn1-csr';
import { AsnConvert } from '@peculiar/asn1-schema';
import { readStrictPem } from '../../api/pem.js';

export const OID_COMMON_NAME = '2.5.4.3';
export const OID_ORGANIZATION = '2.5.4.10';

const DIGEST_OF: Record<string, string | null> = {
  '1.2.840.10045.4.3.2': 'sha256', // ecdsa-with-SHA256
  '1.2.840.10045.4.3.3': 'sha384',
  '1.2.840.10045.4.3.4': 'sha512',
  '1.2.840.113549.1.1.11': 'sha256', // sha256WithRSAEncryption
  '1.2.840.113549.1.1.12': 'sha384',
  '1.2.840.113549.1.1.13': 'sha512',
  '1.3.101.112': null, // Ed25519 (no separate digest)
};

export interface ParsedRequest {
  subject: { type: string; value: string }[];
  /** OIDs of the request's attributes (1.2.840.113549.1.9.14 is an extension request). */
  attributes: string[];
  signatureValid: boolean;
}

/** Most bytes of spec.request read (an RSA-4096 request is under 2 KiB of PEM). */
export const MAX_REQUEST_BYTES = 16 * 1024;

/** The PEM request → its parts, or an Error saying why it cannot be read. */
export function parseRequest(request: Buffer): ParsedRequest | Error {
  const der = readStrictPem(request, 'CERTIFICATE REQUEST', { maxBytes: MAX_REQUEST_BYTES });
  if (der instanceof Error) {
    return new Error(`the request is not in the one form oscar reads: ${der.message}`);
  }
  try {
    const csr = AsnConvert.parse(der, CertificationRequest);
    if (!Buffer.from(AsnConvert.serialize(csr)).equals(der)) {
      return new Error('the request is not a PKCS#10 certificate request in DER (strict encoding)');
    }
    const info = csr.certificationRequestInfo;
    const subject = info.subject.flatMap((rdn) =>
      rdn.map((atv) => ({ type: atv.type, value: atv.value.toString() })),
    );
    // Always there: a request without the field reads as an empty one, so the strict round trip
    // above refused it (the empty field written again is two bytes more).
    const attributes = info.attributes.map((a) => a.type);
    const raw = csr.certificationRequestInfoRaw;
    const digest = DIGEST_OF[csr.signatureAlgorithm.algorithm];
    let signatureValid = false;
    if (raw && digest !== undefined) {
      const key = createPublicKey({
        key: Buffer.from(AsnConvert.serialize(info.subjectPKInfo)),
        format: 'der',
        type: 'spki',
      });
      signatureValid = verify(digest, Buffer.from(raw), key, Buffer.from(csr.signature));
    }
    return { subject, attributes, signatureValid };
  } catch (error) {
    return new Error(
      `the request is not a PKCS#10 certificate request: ${(error as Error).message}`,
    );
  }
}
