// Red-team round 3, CSRs: the keys and signature algorithms a request may carry. Requests made by
// OpenSSL (as an attacker's tools would), each decided as the approver decides a bootstrap
// token's request; the accepted keys beside the refused ones.
import { execFileSync } from 'node:child_process';
import { createPublicKey, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
import { afterAll, describe, expect, it } from 'vitest';
import { decide, type CsrObject, type DecideContext } from './decide.js';
import { OID_COMMON_NAME, OID_ORGANIZATION, parseRequest } from './request.js';

const SUBJECT = '/O=oscar:nodes/O=oscar:config:u1/CN=oscar:node:m1';
const dir = mkdtempSync(join(tmpdir(), 'oscar-csr-keys-'));
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

let n = 0;
/** A request for m1's identity made by `openssl req` with a key from `openssl genpkey ARGS`. */
function openssl(genpkey: string[], digest = 'sha256'): Buffer {
  const key = join(dir, `k${String(++n)}.pem`);
  const out = join(dir, `r${String(n)}.pem`);
  execFileSync('openssl', ['genpkey', ...genpkey, '-out', key], { stdio: 'ignore' });
  const digestArgs = digest === 'none' ? [] : [`-${digest}`];
  execFileSync('openssl', [
    'req',
    '-new',
    '-key',
    key,
    '-out',
    out,
    '-subj',
    SUBJECT,
    ...digestArgs,
  ]);
  return readFileSync(out);
}

/**
 * A request carrying an RSA public key of `bits` bits and exponent `e` (a modulus of random odd
 * bytes: no key pair behind it) with a signature of random bytes. Only what is read before the
 * signature is checked decides it.
 */
function craftedRsa(bits: number, e: Buffer): Buffer {
  const modulus = randomBytes(bits / 8);
  modulus[0] = (modulus[0] ?? 0) | 0x80;
  modulus[modulus.length - 1] = (modulus.at(-1) ?? 0) | 1;
  const spki = createPublicKey({
    key: { kty: 'RSA', n: modulus.toString('base64url'), e: e.toString('base64url') },
    format: 'jwk',
  }).export({ type: 'spki', format: 'der' });
  const rdn = (type: string, value: string) =>
    new RelativeDistinguishedName([
      new AttributeTypeAndValue({ type, value: new AttributeValue({ utf8String: value }) }),
    ]);
  const request = new CertificationRequest({
    certificationRequestInfo: new CertificationRequestInfo({
      version: 0,
      subject: new Name([
        rdn(OID_ORGANIZATION, 'oscar:nodes'),
        rdn(OID_ORGANIZATION, 'oscar:config:u1'),
        rdn(OID_COMMON_NAME, 'oscar:node:m1'),
      ]),
      subjectPKInfo: AsnConvert.parse(spki, SubjectPublicKeyInfo),
    }),
    signatureAlgorithm: new AlgorithmIdentifier({ algorithm: '1.2.840.113549.1.1.11' }),
    signature: new Uint8Array(randomBytes(bits / 8)).buffer,
  });
  const der = Buffer.from(AsnConvert.serialize(request));
  const lines = der.toString('base64').match(/.{1,64}/g) ?? [];
  return Buffer.from(
    `-----BEGIN CERTIFICATE REQUEST-----\n${lines.join('\n')}\n-----END CERTIFICATE REQUEST-----\n`,
  );
}

const context: DecideContext = {
  tokenMachine: (id) =>
    id === 'abc123'
      ? { config: 'default/m1', uid: 'u1', machine: 'm1', tokenAvailable: true }
      : undefined,
  machineConfigs: (machine) =>
    machine === 'm1' ? [{ config: 'default/m1', uid: 'u1', issued: true }] : [],
  maxExpirationSeconds: 7 * 24 * 3600,
};

function decideRequest(pem: Buffer) {
  const csr: CsrObject = {
    metadata: { name: 'oscar-m1-abc' },
    spec: {
      request: pem.toString('base64'),
      signerName: 'kubernetes.io/kube-apiserver-client',
      expirationSeconds: 3600,
      usages: ['digital signature', 'client auth'],
      username: 'system:bootstrap:abc123',
      groups: ['system:bootstrappers', 'system:bootstrappers:oscar', 'system:authenticated'],
    },
  };
  return decide(csr, parseRequest(pem), context);
}

const EC = (curve: string) => ['-algorithm', 'EC', '-pkeyopt', `ec_paramgen_curve:${curve}`];
const RSA = (bits: number) => ['-algorithm', 'RSA', '-pkeyopt', `rsa_keygen_bits:${String(bits)}`];

describe('CSR keys and signature algorithms (red-team round 3)', () => {
  it.each([
    ['ECDSA P-256 (what the agent and kubelet make)', EC('P-256')],
    ['ECDSA P-384', EC('P-384')],
    ['RSA 2048', RSA(2048)],
  ])('approves %s', (_, genpkey) => {
    expect(decideRequest(openssl(genpkey))).toMatchObject({ action: 'approve', machine: 'm1' });
  });

  it.each([
    ['RSA 1024 (weak)', RSA(1024), /RSA key of 1024 bits/],
    ['RSA 2048 with exponent 3', [...RSA(2048), '-pkeyopt', 'rsa_keygen_pubexp:3'], /exponent 3\b/],
    ['ECDSA P-521', EC('P-521'), /curve secp521r1/],
    ['ECDSA on secp256k1', EC('secp256k1'), /curve secp256k1/],
    ['Ed25519', ['-algorithm', 'ED25519'], /type ed25519/],
  ])('refuses %s: KeyNotAllowed naming the key and what is accepted', (_, genpkey, what) => {
    const digest = genpkey.includes('ED25519') ? 'none' : 'sha256';
    const d = decideRequest(openssl(genpkey, digest));
    expect(d).toMatchObject({ action: 'deny', reason: 'KeyNotAllowed' });
    expect(d.action === 'deny' && d.message).toMatch(what);
    expect(d.action === 'deny' && d.message).toContain(
      'ECDSA P-256 or P-384, or RSA of 2048 to 4096 bits',
    );
  });

  it('refuses DSA: KeyNotAllowed', () => {
    const params = join(dir, 'dsa.params');
    execFileSync('openssl', [
      'genpkey',
      '-genparam',
      '-algorithm',
      'DSA',
      '-pkeyopt',
      'dsa_paramgen_bits:1024',
      '-out',
      params,
    ]);
    const d = decideRequest(openssl(['-paramfile', params]));
    expect(d).toMatchObject({ action: 'deny', reason: 'KeyNotAllowed' });
    expect(d.action === 'deny' && d.message).toMatch(/type dsa/);
  });

  it('refuses RSA 16384 and a 4096-bit exponent before checking their signatures (verification cost)', () => {
    for (const [bits, e] of [
      [16384, Buffer.from([1, 0, 1])],
      [4096, Buffer.concat([Buffer.from([0x80]), randomBytes(510), Buffer.from([1])])],
    ] as const) {
      const parsed = parseRequest(craftedRsa(bits, e));
      if (parsed instanceof Error) throw parsed;
      expect(parsed.keyProblem).toMatch(new RegExp(`RSA key of ${String(bits)} bits`));
      expect(parsed.signatureValid).toBe(false);
      expect(decideRequest(craftedRsa(bits, e))).toMatchObject({
        action: 'deny',
        reason: 'KeyNotAllowed',
      });
    }
  });

  it('refuses a SHA-1 signature, naming the algorithm (positive control: the same key with SHA-256)', () => {
    const sha1 = decideRequest(openssl(EC('P-256'), 'sha1'));
    expect(sha1).toMatchObject({ action: 'deny', reason: 'InvalidRequest' });
    expect(sha1.action === 'deny' && sha1.message).toContain(
      'ecdsa-with-SHA1, which oscar does not accept',
    );
    expect(decideRequest(openssl(EC('P-256'), 'sha256')).action).toBe('approve');
  });
});
