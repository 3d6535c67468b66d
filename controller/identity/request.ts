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
import { createPublicKey, verify, type KeyObject } from 'node:crypto';
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
  /** Why the request's key is not one oscar approves (its signature was then not checked). */
  keyProblem?: string;
  /** Why the signature was not checked: an algorithm oscar does not accept (SHA-1, …). */
  signatureProblem?: string;
}

/**
 * The keys oscar approves a certificate for: what its agent and kubelet make (ECDSA P-256), with
 * P-384 and RSA 2048–4096 for an administrator's tools. Everything else is refused before its
 * signature is checked: RSA below 2048 bits is weak; larger RSA keys cost the approver (and the
 * API server on every TLS handshake with the certificate) far more to verify — an RSA-16384
 * verification took 25–40 ms here, 100 times RSA-2048's — and exponents other than 65537 are
 * what no tool makes but a crafted key; DSA, Ed25519, P-521 and other curves are made by nothing
 * oscar serves.
 */
export const ALLOWED_KEYS = 'ECDSA P-256 or P-384, or RSA of 2048 to 4096 bits with exponent 65537';
const EC_CURVES = new Set(['prime256v1', 'secp384r1']);
const RSA_BITS = { min: 2048, max: 4096 };

/** Why `key` is not one oscar approves, or undefined. */
export function keyProblem(key: KeyObject): string | undefined {
  const type = key.asymmetricKeyType ?? 'unknown';
  const details = key.asymmetricKeyDetails ?? {};
  let what: string;
  if (type === 'ec') {
    if (EC_CURVES.has(details.namedCurve ?? '')) return undefined;
    what = `an EC key on curve ${details.namedCurve ?? 'unknown'}`;
  } else if (type === 'rsa') {
    const bits = details.modulusLength ?? 0;
    const exponent = details.publicExponent ?? 0n;
    if (bits >= RSA_BITS.min && bits <= RSA_BITS.max && exponent === 65537n) return undefined;
    what = `an RSA key of ${String(bits)} bits with exponent ${exponent.toString()}`;
  } else {
    what = `a key of type ${type}`;
  }
  return `the request's key is ${what}; oscar approves ${ALLOWED_KEYS} (oscar's agent and kubelet make ECDSA P-256)`;
}

/** The signature algorithms' names for messages. */
const SIGNATURE_NAMES: Record<string, string> = {
  '1.2.840.113549.1.1.5': 'sha1WithRSAEncryption',
  '1.2.840.10045.4.1': 'ecdsa-with-SHA1',
  '1.2.840.113549.1.1.4': 'md5WithRSAEncryption',
  '1.2.840.10040.4.3': 'dsa-with-SHA1',
  '1.2.840.10045.4.3.1': 'ecdsa-with-SHA224',
};

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
    const algorithm = csr.signatureAlgorithm.algorithm;
    const digest = DIGEST_OF[algorithm];
    const key = createPublicKey({
      key: Buffer.from(AsnConvert.serialize(info.subjectPKInfo)),
      format: 'der',
      type: 'spki',
    });
    const parsed: ParsedRequest = { subject, attributes, signatureValid: false };
    const badKey = keyProblem(key);
    if (badKey !== undefined) {
      // Refused before its signature costs anything to check.
      parsed.keyProblem = badKey;
    } else if (digest === undefined) {
      parsed.signatureProblem = `its signature algorithm is ${SIGNATURE_NAMES[algorithm] ?? algorithm}, which oscar does not accept; sign with SHA-256, SHA-384 or SHA-512`;
    } else if (raw) {
      parsed.signatureValid = verify(digest, Buffer.from(raw), key, Buffer.from(csr.signature));
    }
    return parsed;
  } catch (error) {
    return new Error(
      `the request is not a PKCS#10 certificate request: ${(error as Error).message}`,
    );
  }
}

/**
 * The refusal of a parsed request's key or signature, or undefined when the signature verifies:
 * `KeyNotAllowed` naming the key and what is accepted, else `InvalidRequest` saying why.
 */
export function signatureRefusal(
  request: ParsedRequest,
): { reason: string; message: string } | undefined {
  if (request.keyProblem !== undefined) {
    return { reason: 'KeyNotAllowed', message: `spec.request: ${request.keyProblem}` };
  }
  if (request.signatureValid) return undefined;
  return {
    reason: 'InvalidRequest',
    message: `spec.request: ${request.signatureProblem ?? 'its signature does not verify with its own key'}`,
  };
}
