/**
 * PKCS#10 certificate requests for the node's identity: an ECDSA P-256 key made here, on the
 * node, and a request naming only the subject (no extensions, so no SANs: the approver refuses
 * them). The ASN.1 structures are @peculiar/asn1-csr's; the signature is node:crypto's.
 */
import {
  createHash,
  createPublicKey,
  generateKeyPairSync,
  sign,
  type KeyObject,
} from 'node:crypto';
import { CertificationRequest, CertificationRequestInfo } from '@peculiar/asn1-csr';
import { AsnConvert } from '@peculiar/asn1-schema';
import {
  AlgorithmIdentifier,
  AttributeTypeAndValue,
  AttributeValue,
  Name,
  RelativeDistinguishedName,
  SubjectPublicKeyInfo,
} from '@peculiar/asn1-x509';

export const OID_COMMON_NAME = '2.5.4.3';
export const OID_ORGANIZATION = '2.5.4.10';
const OID_ECDSA_WITH_SHA256 = '1.2.840.10045.4.3.2';

export interface Subject {
  commonName: string;
  organizations: string[];
}

export function newNodeKey(): KeyObject {
  return generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
}

/** sha256 of the key's public half (SubjectPublicKeyInfo, DER), hex. */
export function publicKeyDigest(key: KeyObject): string {
  return createHash('sha256').update(publicDer(key)).digest('hex');
}

function publicDer(key: KeyObject): Buffer {
  return createPublicKey(key).export({ type: 'spki', format: 'der' });
}

function pem(label: string, der: Buffer): string {
  const lines = der.toString('base64').match(/.{1,64}/g) ?? [];
  return `-----BEGIN ${label}-----\n${lines.join('\n')}\n-----END ${label}-----\n`;
}

/** A certificate request for `subject`, signed with `key` (ECDSA P-256, SHA-256). PEM. */
export function certificateRequest(key: KeyObject, subject: Subject): string {
  const rdn = (type: string, value: string): RelativeDistinguishedName =>
    new RelativeDistinguishedName([
      new AttributeTypeAndValue({ type, value: new AttributeValue({ utf8String: value }) }),
    ]);
  const info = new CertificationRequestInfo({
    version: 0,
    subject: new Name([
      ...subject.organizations.map((o) => rdn(OID_ORGANIZATION, o)),
      rdn(OID_COMMON_NAME, subject.commonName),
    ]),
    subjectPKInfo: AsnConvert.parse(publicDer(key), SubjectPublicKeyInfo),
  });
  const signature = sign('sha256', Buffer.from(AsnConvert.serialize(info)), key);
  const request = new CertificationRequest({
    certificationRequestInfo: info,
    signatureAlgorithm: new AlgorithmIdentifier({ algorithm: OID_ECDSA_WITH_SHA256 }),
    signature: new Uint8Array(signature).buffer,
  });
  return pem('CERTIFICATE REQUEST', Buffer.from(AsnConvert.serialize(request)));
}
