/**
 * What the approver reads of a PKCS#10 certificate request (spec.request of a CSR): its subject
 * as (type, value) pairs in order, the OIDs of its attributes (an extension request carries the
 * SANs), and whether its self-signature verifies. Parsed with @peculiar/asn1-csr; the signature is
 * checked with node:crypto over the request info's original bytes. Never throws: an unreadable
 * request is an error value, and the approver denies it.
 */
import { createPublicKey, verify } from 'node:crypto';
import { CertificationRequest } from '@peculiar/asn1-csr';
import { AsnConvert } from '@peculiar/asn1-schema';

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

/** The PEM (or DER) request → its parts, or an Error saying why it cannot be read. */
export function parseRequest(request: Buffer): ParsedRequest | Error {
  try {
    const text = request.toString('latin1');
    const match = /-----BEGIN (?:NEW )?CERTIFICATE REQUEST-----([\s\S]+?)-----END/.exec(text);
    const der = match ? Buffer.from(match[1] ?? '', 'base64') : request;
    const csr = AsnConvert.parse(der, CertificationRequest);
    const info = csr.certificationRequestInfo;
    const subject = info.subject.flatMap((rdn) =>
      rdn.map((atv) => ({ type: atv.type, value: atv.value.toString() })),
    );
    // Optional in practice though typed as always there (see @peculiar/asn1-csr).
    const present = info.attributes as typeof info.attributes | undefined;
    const attributes = present ? present.map((a) => a.type) : [];
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
