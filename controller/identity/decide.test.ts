import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { certificateRequest, newNodeKey } from '../../agent/identity/csr.js';
import {
  decide,
  type CsrObject,
  type DecideContext,
  type MachineConfig,
  type TokenMachine,
} from './decide.js';
import { parseRequest } from './request.js';

const key = newNodeKey();
const goodPem = certificateRequest(key, {
  commonName: 'oscar:node:m1',
  organizations: ['oscar:nodes', 'oscar:config:u1'],
});

function csr(over: Partial<CsrObject['spec']> = {}, name = 'oscar-m1-abc'): CsrObject {
  return {
    metadata: { name },
    spec: {
      request: Buffer.from(goodPem).toString('base64'),
      signerName: 'kubernetes.io/kube-apiserver-client',
      expirationSeconds: 3600,
      usages: ['digital signature', 'client auth'],
      username: 'system:bootstrap:abc123',
      groups: ['system:bootstrappers', 'system:bootstrappers:oscar', 'system:authenticated'],
      ...over,
    },
  };
}

const m1: TokenMachine = { config: 'default/m1', uid: 'u1', machine: 'm1', tokenAvailable: true };
const holder: MachineConfig = { config: 'default/m1', uid: 'u1', issued: true };
const newcomer: MachineConfig = { config: 'team-b/m1', uid: 'u2', issued: false };
function ctx(
  token: TokenMachine | undefined = m1,
  m1Configs: MachineConfig[] = [holder],
): DecideContext {
  return {
    tokenMachine: (id) => (id === 'abc123' ? token : undefined),
    machineConfigs: (machine) => (machine === 'm1' ? m1Configs : []),
    maxExpirationSeconds: 7 * 24 * 3600,
  };
}

function run(c: CsrObject, context = ctx()) {
  return decide(c, parseRequest(Buffer.from(c.spec.request, 'base64')), context);
}

function pemFor(cn: string, orgs: string[]): string {
  return Buffer.from(
    certificateRequest(newNodeKey(), { commonName: cn, organizations: orgs }),
  ).toString('base64');
}

describe('decide: approvals', () => {
  it("approves the machine's first identity from its unused token", () => {
    expect(run(csr())).toEqual({
      action: 'approve',
      kind: 'bootstrap',
      machine: 'm1',
      config: 'default/m1',
      uid: 'u1',
      tokenId: 'abc123',
    });
  });

  it('approves key encipherment too', () => {
    const d = run(csr({ usages: ['digital signature', 'key encipherment', 'client auth'] }));
    expect(d.action).toBe('approve');
  });

  it('approves a renewal requested by the node itself', () => {
    const d = run(
      csr({
        username: 'oscar:node:m1',
        groups: ['oscar:nodes', 'oscar:config:u1', 'system:authenticated'],
      }),
    );
    expect(d).toMatchObject({ action: 'approve', kind: 'renewal', machine: 'm1' });
  });

  it('approves the same CSR again after it consumed the token (a retried approval)', () => {
    const d = run(csr(), ctx({ ...m1, tokenAvailable: false, consumedBy: 'oscar-m1-abc' }));
    expect(d.action).toBe('approve');
  });
});

describe('decide: ignores what is not oscar’s', () => {
  it('a CSR from another user', () => {
    expect(run(csr({ username: 'alice', groups: ['system:authenticated'] })).action).toBe('ignore');
  });
  it('a bootstrap token of another group (kubeadm’s)', () => {
    expect(
      run(
        csr({
          groups: ['system:bootstrappers', 'system:bootstrappers:kubeadm:default-node-token'],
        }),
      ).action,
    ).toBe('ignore');
  });
  it('a CSR already decided', () => {
    const c = csr();
    c.status = { conditions: [{ type: 'Approved', status: 'True' }] };
    expect(run(c).action).toBe('ignore');
  });
});

describe('decide: every refusal, one by one', () => {
  const denied = (c: CsrObject, reason: string, context = ctx()) => {
    const d = run(c, context);
    expect(d).toMatchObject({ action: 'deny', reason });
    return d.action === 'deny' ? d.message : '';
  };

  it("another machine's name", () => {
    expect(
      denied(
        csr({ request: pemFor('oscar:node:m2', ['oscar:nodes', 'oscar:config:u1']) }),
        'WrongSubject',
      ),
    ).toMatch(/CN=oscar:node:m1, O=oscar:nodes, O=oscar:config:u1.*CN=oscar:node:m2/);
  });
  it('system:masters', () => {
    expect(
      denied(csr({ request: pemFor('oscar:node:m1', ['system:masters']) }), 'WrongSubject'),
    ).toMatch(/O=system:masters/);
  });
  it('an extra organisation', () => {
    denied(
      csr({
        request: pemFor('oscar:node:m1', ['oscar:nodes', 'oscar:config:u1', 'system:masters']),
      }),
      'WrongSubject',
    );
  });
  it('no organisation', () => {
    denied(csr({ request: pemFor('oscar:node:m1', []) }), 'WrongSubject');
  });
  it('subject alternative names (an extension request, made by openssl)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'oscar-csr-'));
    try {
      const keyFile = join(dir, 'k.pem');
      const out = join(dir, 'r.pem');
      execFileSync('openssl', [
        'ecparam',
        '-name',
        'prime256v1',
        '-genkey',
        '-noout',
        '-out',
        keyFile,
      ]);
      execFileSync('openssl', [
        'req',
        '-new',
        '-key',
        keyFile,
        '-out',
        out,
        '-subj',
        '/O=oscar:nodes/O=oscar:config:u1/CN=oscar:node:m1',
        '-addext',
        'subjectAltName=DNS:kubernetes.default',
      ]);
      const request = readFileSync(out).toString('base64');
      expect(denied(csr({ request }), 'AttributesNotAllowed')).toMatch(
        /1\.2\.840\.113549\.1\.9\.14/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  it('server auth usage', () => {
    denied(csr({ usages: ['digital signature', 'client auth', 'server auth'] }), 'WrongUsages');
  });
  it('no client auth usage', () => {
    denied(csr({ usages: ['digital signature'] }), 'WrongUsages');
  });
  it('an expirationSeconds above the cap', () => {
    denied(csr({ expirationSeconds: 7 * 24 * 3600 + 1 }), 'LifetimeTooLong');
  });
  it('no expirationSeconds (the signer default would be a year)', () => {
    const c = csr();
    delete c.spec.expirationSeconds;
    denied(c, 'LifetimeTooLong');
  });
  it('a reused token (its CSR was approved before)', () => {
    expect(
      denied(
        csr({}, 'oscar-m1-other'),
        'TokenAlreadyUsed',
        ctx({ ...m1, tokenAvailable: false, consumedBy: 'oscar-m1-abc' }),
      ),
    ).toMatch(/oscar-m1-abc/);
  });
  it('a token that is no machine’s current token here: never approved (left to its controller)', () => {
    expect(run(csr({ username: 'system:bootstrap:zzz999' })).action).toBe('ignore');
  });
  it('a renewal whose requester is not the subject', () => {
    denied(
      csr({
        username: 'oscar:node:m1',
        groups: ['oscar:nodes', 'oscar:config:u1'],
        request: pemFor('oscar:node:m2', ['oscar:nodes', 'oscar:config:u1']),
      }),
      'RenewalSubjectMismatch',
    );
  });
  it('a machine name another namespace holds: the newcomer is denied (first identity)', () => {
    const taken = ctx(m1, [
      { ...holder, issued: false },
      { ...newcomer, issued: true },
    ]);
    expect(denied(csr(), 'MachineNameTaken', taken)).toMatch(/team-b\/m1/);
    const unissued = ctx(m1, [{ ...holder, issued: false }, newcomer]);
    denied(csr(), 'MachineNameTaken', unissued);
  });
  it('…but the holder’s own retried approval still goes through (positive control)', () => {
    const retry = ctx({ ...m1, tokenAvailable: false, consumedBy: 'oscar-m1-abc' }, [
      holder,
      newcomer,
    ]);
    expect(run(csr(), retry).action).toBe('approve');
  });
  const renewal = { username: 'oscar:node:m1', groups: ['oscar:nodes', 'oscar:config:u1'] };
  it('a newcomer naming the machine never takes the holder’s renewal (positive control)', () => {
    expect(run(csr(renewal), ctx(m1, [holder, newcomer]))).toMatchObject({
      action: 'approve',
      kind: 'renewal',
      config: 'default/m1',
    });
    expect(run(csr(renewal), ctx(m1, [newcomer, holder]))).toMatchObject({
      config: 'default/m1',
    });
  });
  it('a renewal when two configs hold the name', () => {
    denied(csr(renewal), 'MachineNameTaken', ctx(m1, [holder, { ...newcomer, issued: true }]));
  });
  it('a renewal of a name reused after deletion, before its new machine has an identity', () => {
    expect(denied(csr(renewal), 'IdentityNotIssued', ctx(m1, [newcomer]))).toMatch(
      /earlier machine of that name renews nothing/,
    );
  });
  it('a renewal by the certificate of an earlier machine of that name (another config UID), once the new one is issued', () => {
    const reused = ctx(m1, [{ ...newcomer, issued: true }]);
    expect(
      denied(
        csr({ ...renewal, groups: ['oscar:nodes', 'oscar:config:u1'] }),
        'IdentityNotCurrent',
        reused,
      ),
    ).toMatch(/team-b\/m1 \(UID u2\)/);
    // positive control: the new machine's own certificate renews
    const own = {
      username: 'oscar:node:m1',
      groups: ['oscar:nodes', 'oscar:config:u2'],
      request: pemFor('oscar:node:m1', ['oscar:nodes', 'oscar:config:u2']),
    };
    expect(run(csr(own), reused)).toMatchObject({
      action: 'approve',
      kind: 'renewal',
      config: 'team-b/m1',
      uid: 'u2',
    });
  });
  it('a renewal naming two config UIDs', () => {
    denied(
      csr({ ...renewal, groups: ['oscar:nodes', 'oscar:config:u1', 'oscar:config:u2'] }),
      'IdentityNotCurrent',
    );
  });
  it('a renewal by a certificate of the form before config UIDs: not renewed, re-provision', () => {
    expect(
      denied(
        csr({
          ...renewal,
          groups: ['oscar:nodes'],
          request: pemFor('oscar:node:m1', ['oscar:nodes']),
        }),
        'IdentityOutdated',
      ),
    ).toMatch(/re-provision/);
  });
  it('a renewal keeps its UID: its request naming another UID than its own', () => {
    expect(
      denied(
        csr({ ...renewal, request: pemFor('oscar:node:m1', ['oscar:nodes', 'oscar:config:u2']) }),
        'RenewalSubjectMismatch',
      ),
    ).toMatch(/O=oscar:config:u1/);
  });
  it("a first identity must name its token's config UID, not another", () => {
    denied(
      csr({ request: pemFor('oscar:node:m1', ['oscar:nodes', 'oscar:config:u2']) }),
      'WrongSubject',
    );
    denied(csr({ request: pemFor('oscar:node:m1', ['oscar:nodes']) }), 'WrongSubject');
  });
  it('a renewal for a machine that is gone: never approved', () => {
    expect(
      run(csr({ username: 'oscar:node:m9', groups: ['oscar:nodes', 'oscar:config:u1'] })).action,
    ).toBe('ignore');
  });
  it('a signer other than kube-apiserver-client', () => {
    denied(csr({ signerName: 'kubernetes.io/kubelet-serving' }), 'WrongSigner');
  });
  it('a request that is not PKCS#10', () => {
    denied(csr({ request: Buffer.from('hello').toString('base64') }), 'InvalidRequest');
  });
  it('a request whose signature does not verify', () => {
    const der = derOf(goodPem);
    der.writeUInt8((der.at(-3) ?? 0) ^ 0xff, der.length - 3); // inside the signature
    denied(csr({ request: pemOf(der) }), 'InvalidRequest');
  });
  it('a request signed with an algorithm oscar does not know (positive control: a known one)', () => {
    const der = derOf(goodPem);
    const ecdsaSha256 = Buffer.from('06082a8648ce3d040302', 'hex');
    const at = der.lastIndexOf(ecdsaSha256);
    expect(run(csr({ request: pemOf(der) })).action).toBe('approve');
    der.writeUInt8(0x05, at + ecdsaSha256.length - 1); // 1.2.840.10045.4.3.5: no algorithm oscar knows
    expect(denied(csr({ request: pemOf(der) }), 'InvalidRequest')).toMatch(/signature/);
  });
  it('a request in DER, not PEM (the API server reads only PEM)', () => {
    denied(csr({ request: derOf(goodPem).toString('base64') }), 'InvalidRequest');
  });
  it('two blocks: its own name in a first block Go skips (a junk character), another user in the second', () => {
    const own = goodPem.replace('\n', '\n.');
    const other = certificateRequest(newNodeKey(), {
      commonName: 'system:serviceaccount:kube-system:generic-garbage-collector',
      organizations: ['system:serviceaccounts'],
    });
    const renewal = { username: 'oscar:node:m1', groups: ['oscar:nodes', 'oscar:config:u1'] };
    expect(run(csr({ ...renewal })).action).toBe('approve');
    const message = denied(
      csr({ ...renewal, request: Buffer.from(own + other).toString('base64') }),
      'InvalidRequest',
    );
    expect(message).toMatch(/one form oscar reads/);
  });
});

function derOf(pem: string): Buffer {
  return Buffer.from(pem.split('\n').slice(1, -2).join(''), 'base64');
}
function pemOf(der: Buffer): string {
  const lines = der.toString('base64').match(/.{1,64}/g) ?? [];
  const text = `-----BEGIN CERTIFICATE REQUEST-----\n${lines.join('\n')}\n-----END CERTIFICATE REQUEST-----\n`;
  return Buffer.from(text).toString('base64');
}
