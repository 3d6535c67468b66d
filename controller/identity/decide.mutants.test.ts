// The decisions mutation testing (npm run mutation) showed no test would notice changing: each
// refusal with the approval beside it that differs only in the one thing checked.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { certificateRequest, newNodeKey } from '../../agent/identity/csr.js';
import { decide, type CsrObject, type DecideContext } from './decide.js';
import { MAX_REQUEST_BYTES, parseRequest } from './request.js';

const goodPem = certificateRequest(newNodeKey(), {
  commonName: 'oscar:node:m1',
  organizations: ['oscar:nodes', 'oscar:config:u1'],
});
const MAX = 7 * 24 * 3600;
const context: DecideContext = {
  tokenMachine: (id) =>
    id === 'abc123'
      ? { config: 'default/m1', uid: 'u1', machine: 'm1', tokenAvailable: true }
      : undefined,
  machineConfigs: (m) => (m === 'm1' ? [{ config: 'default/m1', uid: 'u1', issued: true }] : []),
  maxExpirationSeconds: MAX,
};
const renewal = {
  username: 'oscar:node:m1',
  groups: ['oscar:nodes', 'oscar:config:u1', 'system:authenticated'],
};

function csr(over: Partial<CsrObject['spec']> = {}): CsrObject {
  return {
    metadata: { name: 'oscar-m1-abc' },
    spec: {
      request: Buffer.from(goodPem).toString('base64'),
      signerName: 'kubernetes.io/kube-apiserver-client',
      expirationSeconds: 3600,
      usages: ['digital signature', 'client auth'],
      ...renewal,
      ...over,
    },
  };
}
const run = (c: CsrObject) =>
  decide(c, parseRequest(Buffer.from(c.spec.request, 'base64')), context);

describe('decide: the boundaries', () => {
  it('expirationSeconds exactly at the cap is approved; one second more is not', () => {
    expect(run(csr({ expirationSeconds: MAX })).action).toBe('approve');
    expect(run(csr({ expirationSeconds: MAX + 1 }))).toMatchObject({ reason: 'LifetimeTooLong' });
  });
  it('no usages at all is refused', () => {
    const c = csr();
    delete c.spec.usages;
    expect(run(c)).toMatchObject({ action: 'deny', reason: 'WrongUsages' });
  });
  it('a renewal approval carries no token to consume', () => {
    expect(run(csr())).toStrictEqual({
      action: 'approve',
      kind: 'renewal',
      machine: 'm1',
      config: 'default/m1',
      uid: 'u1',
    });
  });
});

describe('decide: who asks', () => {
  it('a node user without the oscar:nodes group is not an oscar identity', () => {
    expect(run(csr({ groups: ['system:authenticated'] })).action).toBe('ignore');
  });
  it('the oscar:nodes group without a node user is not one either', () => {
    expect(run(csr({ username: 'alice' })).action).toBe('ignore');
  });
  it('a CSR without username or groups is ignored', () => {
    const c = csr();
    delete c.spec.username;
    delete c.spec.groups;
    expect(run(c).action).toBe('ignore');
  });
  it.each(['Approved', 'Denied', 'Failed'])('a CSR already %s is left alone', (type) => {
    const c = csr();
    c.status = { conditions: [{ type, status: 'True' }] };
    expect(run(c)).toMatchObject({ action: 'ignore', why: 'already decided' });
  });
  it('a CSR with other conditions only is still decided (positive control)', () => {
    const c = csr();
    c.status = { conditions: [{ type: 'Pending', status: 'True' }] };
    expect(run(c).action).toBe('approve');
  });
});

describe('request: what it reads', () => {
  it('refuses a request over the size limit before reading it', () => {
    const body = 'A'.repeat(MAX_REQUEST_BYTES);
    const pem = `-----BEGIN CERTIFICATE REQUEST-----\n${body}\n-----END CERTIFICATE REQUEST-----\n`;
    expect((parseRequest(Buffer.from(pem)) as Error).message).toMatch(/at most 16384/);
  });
  it('refuses DER that is not strict: trailing bytes, a long-form length', () => {
    // a request short enough that its outer length takes one byte (30 81 xx)
    const short = certificateRequest(newNodeKey(), { commonName: 'n', organizations: [] });
    const der = Buffer.from(short.split('\n').slice(1, -2).join(''), 'base64');
    const pemOf = (d: Buffer) =>
      Buffer.from(
        `-----BEGIN CERTIFICATE REQUEST-----\n${d.toString('base64')}\n-----END CERTIFICATE REQUEST-----\n`,
      );
    expect(parseRequest(pemOf(der))).not.toBeInstanceOf(Error);
    const trailing = parseRequest(pemOf(Buffer.concat([der, Buffer.from([0, 0])])));
    expect((trailing as Error).message).toMatch(/strict|PKCS#10/);
    // 30 81 xx → 30 82 00 xx: the same length written in more bytes than it needs (BER, not DER)
    expect(der[1]).toBe(0x81);
    const long = Buffer.concat([Buffer.from([0x30, 0x82, 0x00]), der.subarray(2)]);
    expect(parseRequest(pemOf(long))).toBeInstanceOf(Error);
  });
});

describe('request: every signature algorithm it knows verifies (openssl-made requests)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'oscar-csr-alg-'));
  const made = (key: string[], digest: string): Buffer => {
    const keyFile = join(dir, `${key.join('-')}.key`);
    const out = join(dir, `${key.join('-')}-${digest}.csr`);
    execFileSync('openssl', ['genpkey', ...key, '-out', keyFile]);
    execFileSync('openssl', [
      'req',
      '-new',
      '-key',
      keyFile,
      `-${digest}`,
      '-out',
      out,
      '-subj',
      '/O=oscar:nodes/CN=oscar:node:m1',
    ]);
    return readFileSync(out);
  };
  const ec384 = ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-384'];
  const rsa = ['-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:1024'];
  it.each([
    [ec384, 'sha384'],
    [ec384, 'sha512'],
    [rsa, 'sha256'],
    [rsa, 'sha384'],
    [rsa, 'sha512'],
  ])('%s with %s', (key, digest) => {
    const parsed = parseRequest(made(key, digest));
    expect(parsed).toMatchObject({ signatureValid: true });
  });
  it('and an unknown one does not (ecdsa-with-SHA224 is not on the list)', () => {
    const parsed = parseRequest(made(ec384, 'sha224'));
    expect(parsed).toMatchObject({ signatureValid: false });
    rmSync(dir, { recursive: true, force: true });
  });
});
