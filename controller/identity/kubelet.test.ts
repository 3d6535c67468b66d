import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { certificateRequest, newNodeKey } from '../../agent/identity/csr.js';
import type { CsrObject } from './decide.js';
import { decideKubelet, type KubeletContext, type KubeletMachine } from './kubelet.js';
import { parseRequest } from './request.js';

function pemFor(cn: string, orgs: string[]): string {
  return Buffer.from(
    certificateRequest(newNodeKey(), { commonName: cn, organizations: orgs }),
  ).toString('base64');
}
const good = pemFor('system:node:m1', ['system:nodes']);

const BY_TOKEN = {
  username: 'system:bootstrap:abc123',
  groups: ['system:bootstrappers', 'system:bootstrappers:oscar', 'system:authenticated'],
};
const BY_NODE = { username: 'system:node:m1', groups: ['system:nodes', 'system:authenticated'] };

/** What kubelet sends: no expirationSeconds, ECDSA usages. */
function csr(over: Partial<CsrObject['spec']> = {}, name = 'csr-kubelet-1'): CsrObject {
  return {
    metadata: { name },
    spec: {
      request: good,
      signerName: 'kubernetes.io/kube-apiserver-client-kubelet',
      usages: ['digital signature', 'client auth'],
      ...BY_TOKEN,
      ...over,
    },
  };
}

const m1: KubeletMachine = {
  config: 'default/m1',
  machine: 'm1',
  kubeletBootstrap: true,
  kubeletDone: false,
};
function ctx(token: KubeletMachine | undefined = m1, m1Configs = [m1]): KubeletContext {
  return {
    tokenMachine: (id) => (id === 'abc123' ? token : undefined),
    machineConfigs: (machine) => (machine === 'm1' ? m1Configs : []),
    maxExpirationSeconds: 7 * 24 * 3600,
  };
}

function run(c: CsrObject, context = ctx()) {
  return decideKubelet(c, parseRequest(Buffer.from(c.spec.request, 'base64')), context);
}

function denied(c: CsrObject, reason: string, context = ctx()): string {
  const d = run(c, context);
  expect(d).toMatchObject({ action: 'deny', reason, config: 'default/m1' });
  return d.action === 'deny' ? d.message : '';
}

describe('decideKubelet: approvals', () => {
  it("approves kubelet's first client certificate for system:node:<machine> with the machine's token", () => {
    expect(run(csr())).toEqual({
      action: 'approve',
      kind: 'kubelet',
      machine: 'm1',
      config: 'default/m1',
      tokenId: 'abc123',
    });
  });
  it('approves RSA-style usages (key encipherment) and a short expirationSeconds', () => {
    const d = run(
      csr({
        usages: ['digital signature', 'key encipherment', 'client auth'],
        expirationSeconds: 3600,
      }),
    );
    expect(d.action).toBe('approve');
  });
  it("approves a rotation requested by the node's own certificate", () => {
    expect(run(csr(BY_NODE))).toEqual({
      action: 'approve',
      kind: 'kubeletRenewal',
      machine: 'm1',
      config: 'default/m1',
    });
  });
  it('approves the CSR that used the token again (a retried approval)', () => {
    const d = run(csr(), ctx({ ...m1, kubeletDone: true, consumedBy: 'csr-kubelet-1' }));
    expect(d.action).toBe('approve');
  });
});

describe('decideKubelet: refusals, one by one', () => {
  it('another node name with this machine’s token', () => {
    const msg = denied(
      csr({ request: pemFor('system:node:m2', ['system:nodes']) }),
      'WrongSubject',
    );
    expect(msg).toContain('CN=system:node:m1, O=system:nodes');
    expect(msg).toContain('CN=system:node:m2');
  });
  it('a rotation for another node name', () => {
    denied(
      csr({ ...BY_NODE, request: pemFor('system:node:m2', ['system:nodes']) }),
      'WrongSubject',
    );
  });
  it('extra groups (system:masters)', () => {
    denied(
      csr({ request: pemFor('system:node:m1', ['system:nodes', 'system:masters']) }),
      'WrongSubject',
    );
  });
  it('no group', () => {
    denied(csr({ request: pemFor('system:node:m1', []) }), 'WrongSubject');
  });
  it('an oscar agent subject on the kubelet signer', () => {
    denied(csr({ request: pemFor('oscar:node:m1', ['oscar:nodes']) }), 'WrongSubject');
  });
  it('subject alternative names (an extension request, made by openssl)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'oscar-kubelet-csr-'));
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
        '/O=system:nodes/CN=system:node:m1',
        '-addext',
        'subjectAltName=IP:10.0.0.1',
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
  it('a lifetime over the cap', () => {
    denied(csr({ expirationSeconds: 365 * 24 * 3600 }), 'LifetimeTooLong');
  });
  it('a request whose signature does not verify', () => {
    const other = Buffer.from(Buffer.from(good, 'base64').toString('latin1').replace(/A/, 'B'));
    const d = run(csr({ request: other.toString('base64') }));
    expect(d).toMatchObject({ action: 'deny', reason: 'InvalidRequest' });
  });
  it('not a certificate request at all', () => {
    denied(csr({ request: Buffer.from('hello').toString('base64') }), 'InvalidRequest');
  });
  it('a token whose config does not set spec.kubeletBootstrap', () => {
    const msg = denied(csr(), 'KubeletBootstrapOff', ctx({ ...m1, kubeletBootstrap: false }));
    expect(msg).toContain('spec.kubeletBootstrap');
  });
  it('a token that already gave kubelet its certificate (another CSR)', () => {
    const msg = denied(
      csr({}, 'csr-kubelet-2'),
      'TokenAlreadyUsed',
      ctx({ ...m1, kubeletDone: true, consumedBy: 'csr-kubelet-1' }),
    );
    expect(msg).toContain('csr-kubelet-1');
  });
  it('a machine name two configs claim', () => {
    const other = { ...m1, config: 'team-b/m1' };
    denied(csr(), 'MachineNameTaken', ctx(m1, [m1, other]));
  });
});

describe('decideKubelet: ignores what is not oscar’s (never approves it)', () => {
  it('a token no config of this controller holds (wrong token)', () => {
    expect(run(csr({ username: 'system:bootstrap:zzz999' }))).toMatchObject({ action: 'ignore' });
  });
  it('a kubeadm token (group system:bootstrappers:kubeadm:default-node-token)', () => {
    expect(
      run(
        csr({
          username: 'system:bootstrap:abc123',
          groups: ['system:bootstrappers', 'system:bootstrappers:kubeadm:default-node-token'],
        }),
      ),
    ).toMatchObject({ action: 'ignore' });
  });
  it('a node no config names', () => {
    expect(run(csr({ username: 'system:node:other', groups: ['system:nodes'] }))).toMatchObject({
      action: 'ignore',
    });
  });
  it('a node user without the system:nodes group', () => {
    expect(
      run(csr({ username: 'system:node:m1', groups: ['system:authenticated'] })),
    ).toMatchObject({ action: 'ignore' });
  });
  it('a rotation for a machine whose config does not bootstrap kubelet', () => {
    const off = { ...m1, kubeletBootstrap: false };
    expect(run(csr(BY_NODE), ctx(off, [off]))).toMatchObject({ action: 'ignore' });
  });
});
