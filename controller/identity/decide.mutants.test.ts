// The decisions mutation testing (npm run mutation) showed no test would notice changing: each
// refusal with the approval beside it that differs only in the one thing checked.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sign } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CertificationRequest } from '@peculiar/asn1-csr';
import { AsnConvert } from '@peculiar/asn1-schema';
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
  it('the oscar:nodes group under a user that names no machine is ignored, whatever configs exist', () => {
    // a context that would find a holder for any machine name: only the user decides
    const anyMachine: DecideContext = {
      ...context,
      machineConfigs: () => [{ config: 'default/m1', uid: 'u1', issued: true }],
    };
    for (const username of ['alice', 'oscar:node:', 'system:node:m1']) {
      const c = csr({ username });
      expect(decide(c, parseRequest(Buffer.from(c.spec.request, 'base64')), anyMachine)).toEqual({
        action: 'ignore',
        why: 'not requested by an oscar identity',
      });
    }
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

describe('request: its fields', () => {
  it('refuses a request without its attributes field (PKCS#10 requires it; Go refuses it too)', () => {
    const key = newNodeKey();
    const pem = certificateRequest(key, {
      commonName: 'oscar:node:m1',
      organizations: ['oscar:nodes', 'oscar:config:u1'],
    });
    const der = Buffer.from(pem.split('\n').slice(1, -2).join(''), 'base64');
    const parsed = AsnConvert.parse(der, CertificationRequest);
    const info = parsed.certificationRequestInfo;
    const withField = AsnConvert.serialize(info).byteLength;
    (info as { attributes?: unknown }).attributes = undefined;
    const body = Buffer.from(AsnConvert.serialize(info));
    // the [0] field is really gone (compared on the signed part: an ECDSA signature's length varies)
    expect(body.length).toBeLessThan(withField);
    const request = new CertificationRequest({
      certificationRequestInfo: info,
      signatureAlgorithm: parsed.signatureAlgorithm,
      signature: new Uint8Array(sign('sha256', body, key)).buffer,
    });
    const bare = Buffer.from(AsnConvert.serialize(request));
    const lines = bare.toString('base64').match(/.{1,64}/g) ?? [];
    const pemBare = `-----BEGIN CERTIFICATE REQUEST-----\n${lines.join('\n')}\n-----END CERTIFICATE REQUEST-----\n`;
    expect(parseRequest(Buffer.from(pemBare))).toBeInstanceOf(Error);
    const c = csr({ request: Buffer.from(pemBare).toString('base64') });
    expect(run(c)).toMatchObject({ action: 'deny', reason: 'InvalidRequest' });
    expect(run(csr())).toMatchObject({ action: 'approve' }); // the same request with the field
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
  const rsa = ['-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048'];
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

// What a refusal tells the one who asked: the field and the fix. Mutation testing showed no test
// read these messages; each is checked word for word here.
describe('decide: what a refusal says', () => {
  const bootstrap = {
    username: 'system:bootstrap:abc123',
    groups: ['system:bootstrappers', 'system:bootstrappers:oscar', 'system:authenticated'],
  };
  const withConfigs = (configs: { config: string; uid: string; issued: boolean }[]) => ({
    ...context,
    machineConfigs: (m: string) => (m === 'm1' ? configs : []),
  });
  const runIn = (c: CsrObject, ctx: DecideContext) =>
    decide(c, parseRequest(Buffer.from(c.spec.request, 'base64')), ctx);

  it('usages: the allowed ones, and what was asked, "(none)" for none', () => {
    const none = csr();
    delete none.spec.usages;
    const head =
      'spec.usages must be within digital signature, key encipherment, client auth and include client auth; got ';
    expect(run(none)).toMatchObject({ message: `${head}(none)` });
    expect(run(csr({ usages: ['client auth', 'server auth'] }))).toMatchObject({
      message: `${head}client auth, server auth`,
    });
  });

  it('lifetime: the cap, and the value asked for or that none was', () => {
    const unset = csr();
    delete unset.spec.expirationSeconds;
    const head = `spec.expirationSeconds must be set and at most ${String(MAX)}; got `;
    expect(run(unset)).toMatchObject({ message: `${head}(unset: the signer default)` });
    expect(run(csr({ expirationSeconds: MAX + 1 }))).toMatchObject({
      message: `${head}${String(MAX + 1)}`,
    });
  });

  it('signer: the one asked for and the one oscar uses', () => {
    expect(run(csr({ signerName: 'kubernetes.io/kubelet-serving' }))).toMatchObject({
      reason: 'WrongSigner',
      message:
        'spec.signerName is kubernetes.io/kubelet-serving; an oscar node asks only kubernetes.io/kube-apiserver-client',
    });
  });

  it('a renewal of a machine no config here names is left, saying why', () => {
    expect(runIn(csr(), withConfigs([]))).toEqual({
      action: 'ignore',
      why: 'no OscarConfig this controller watches names machine m1: not renewed here',
    });
  });

  it('a bootstrap token of no config here is left, saying why', () => {
    expect(run(csr({ ...bootstrap, username: 'system:bootstrap:zzz999' }))).toEqual({
      action: 'ignore',
      why: 'bootstrap token zzz999 is not the current token of an OscarConfig this controller watches',
    });
  });

  it('a renewal no config has issued names every config of the machine', () => {
    const configs = [
      { config: 'a/m1', uid: 'u1', issued: false },
      { config: 'b/m1', uid: 'u2', issued: false },
    ];
    expect(runIn(csr(), withConfigs(configs))).toMatchObject({
      reason: 'IdentityNotIssued',
      message:
        'no OscarConfig naming machine m1 (a/m1, b/m1) has issued its identity yet: a certificate of an earlier machine of that name renews nothing; the new machine bootstraps with its own token',
    });
  });

  it('a renewal of a machine two configs issued names both', () => {
    const configs = [
      { config: 'a/m1', uid: 'u1', issued: true },
      { config: 'b/m1', uid: 'u2', issued: true },
    ];
    expect(runIn(csr(), withConfigs(configs))).toMatchObject({
      reason: 'MachineNameTaken',
      message:
        'machine m1 holds identities issued by OscarConfigs a/m1, b/m1: node identities are cluster-wide; rename one machine',
    });
  });

  it('a bootstrap token whose machine name another config holds names that config', () => {
    const configs = [
      { config: 'default/m1', uid: 'u1', issued: false },
      { config: 'b/m1', uid: 'u2', issued: true },
      { config: 'c/m1', uid: 'u3', issued: false },
    ];
    expect(runIn(csr(bootstrap), withConfigs(configs))).toMatchObject({
      reason: 'MachineNameTaken',
      message:
        'machine m1 is also named by OscarConfig b/m1, c/m1: node identities are cluster-wide (oscar:node:m1); rename this machine',
    });
  });

  it('a certificate of the form before config UIDs: re-provision, with the docs to read', () => {
    expect(run(csr({ groups: ['oscar:nodes', 'system:authenticated'] }))).toMatchObject({
      reason: 'IdentityOutdated',
      message:
        'the certificate of oscar:node:m1 names no oscar:config:<uid> group: it was issued before node identities were bound to their OscarConfig and is not renewed; re-provision the machine (docs/identity.md, "Upgrading")',
    });
  });

  it("a certificate of another config's UID names both UIDs", () => {
    expect(run(csr({ groups: ['oscar:nodes', 'oscar:config:u9'] }))).toMatchObject({
      reason: 'IdentityNotCurrent',
      message:
        "the certificate was issued for OscarConfig UID u9; machine m1's identity is now issued by default/m1 (UID u1): a certificate of an earlier machine of that name renews nothing",
    });
  });

  it('a subject that is not the exact one names the one it must be and the one asked for', () => {
    const other = Buffer.from(
      certificateRequest(newNodeKey(), {
        commonName: 'oscar:node:m2',
        organizations: ['oscar:nodes'],
      }),
    ).toString('base64');
    expect(run(csr({ request: other }))).toMatchObject({
      reason: 'RenewalSubjectMismatch',
      message:
        'a renewal names its requester: the subject must be exactly CN=oscar:node:m1, O=oscar:nodes, O=oscar:config:u1; the request asks for O=oscar:nodes, CN=oscar:node:m2',
    });
  });
});
