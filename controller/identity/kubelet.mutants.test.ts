// The kubelet decisions mutation testing (npm run mutation) showed no test would notice
// changing: each refusal with the approval beside it that differs only in the one thing checked.
import { describe, expect, it } from 'vitest';
import { certificateRequest, newNodeKey } from '../../agent/identity/csr.js';
import type { CsrObject } from './decide.js';
import {
  decideKubelet,
  isKubeletClientRequest,
  KUBELET_CLIENT_SIGNER,
  type KubeletContext,
  type KubeletMachine,
} from './kubelet.js';
import { parseRequest, type ParsedRequest } from './request.js';

const good = Buffer.from(
  certificateRequest(newNodeKey(), {
    commonName: 'system:node:m1',
    organizations: ['system:nodes'],
  }),
).toString('base64');
const BY_TOKEN = {
  username: 'system:bootstrap:abc123',
  groups: ['system:bootstrappers', 'system:bootstrappers:oscar'],
};
const BY_NODE = { username: 'system:node:m1', groups: ['system:nodes', 'system:authenticated'] };
const MAX = 7 * 24 * 3600;

function csr(over: Partial<CsrObject['spec']> = {}): CsrObject {
  return {
    metadata: { name: 'csr-kubelet-1' },
    spec: {
      request: good,
      signerName: KUBELET_CLIENT_SIGNER,
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
const context = (configs: (machine: string) => KubeletMachine[]): KubeletContext => ({
  tokenMachine: (id) => (id === 'abc123' ? m1 : undefined),
  machineConfigs: configs,
  maxExpirationSeconds: MAX,
});
const ctx = context((m) => (m === 'm1' ? [m1] : []));
const run = (c: CsrObject, k = ctx) =>
  decideKubelet(c, parseRequest(Buffer.from(c.spec.request, 'base64')), k);

describe('kubelet: which requests are decided here', () => {
  it("only the kubelet client signer's", () => {
    expect(KUBELET_CLIENT_SIGNER).toBe('kubernetes.io/kube-apiserver-client-kubelet');
    expect(isKubeletClientRequest(csr())).toBe(true);
    expect(isKubeletClientRequest(csr({ signerName: 'kubernetes.io/kube-apiserver-client' }))).toBe(
      false,
    );
  });
  it('system:node: with no machine name is nobody, whatever configs exist', () => {
    const anyMachine = context(() => [m1]);
    expect(run(csr({ ...BY_NODE, username: 'system:node:' }), anyMachine)).toMatchObject({
      action: 'ignore',
    });
    expect(run(csr(BY_NODE), anyMachine)).toMatchObject({ action: 'approve' }); // positive control
  });
});

describe('kubelet: refusals against their approvals', () => {
  it('a renewal for a machine two configs name is denied MachineNameTaken', () => {
    const two = context((m) => (m === 'm1' ? [m1, { ...m1, config: 'team-b/m1' }] : []));
    expect(run(csr(BY_NODE), two)).toMatchObject({ action: 'deny', reason: 'MachineNameTaken' });
    expect(run(csr(BY_NODE))).toMatchObject({ action: 'approve' });
  });
  it('an unreadable request is denied InvalidRequest', () => {
    const c = csr({ request: Buffer.from('not a request').toString('base64') });
    expect(run(c)).toMatchObject({ action: 'deny', reason: 'InvalidRequest' });
  });
  it('a signature that does not verify is denied InvalidRequest', () => {
    const parsed = parseRequest(Buffer.from(good, 'base64')) as ParsedRequest;
    expect(decideKubelet(csr(), parsed, ctx)).toMatchObject({ action: 'approve' });
    expect(decideKubelet(csr(), { ...parsed, signatureValid: false }, ctx)).toMatchObject({
      action: 'deny',
      reason: 'InvalidRequest',
    });
  });
  it('expirationSeconds exactly at the cap is approved; one more is not', () => {
    expect(run(csr({ expirationSeconds: MAX })).action).toBe('approve');
    expect(run(csr({ expirationSeconds: MAX + 1 }))).toMatchObject({ reason: 'LifetimeTooLong' });
  });
  it('a renewal approval carries no token to close', () => {
    expect(run(csr(BY_NODE))).toStrictEqual({
      action: 'approve',
      kind: 'kubeletRenewal',
      machine: 'm1',
      config: 'default/m1',
    });
  });
});

// What a refusal tells the one who asked, word for word: mutation testing showed no test read
// these messages (the decisions themselves are checked above).
describe('kubelet: what a refusal says', () => {
  const two = (m: string): KubeletMachine[] =>
    m === 'm1' ? [m1, { ...m1, config: 'b/m1' }, { ...m1, config: 'c/m1' }] : [];

  it('a token of no config here is left, saying why', () => {
    expect(run(csr({ username: 'system:bootstrap:zzz999' }))).toEqual({
      action: 'ignore',
      why: 'bootstrap token zzz999 is not the current token of an OscarConfig this controller watches',
    });
  });

  it('a token whose machine name other configs hold names them, with the bootstrap prefix', () => {
    expect(run(csr(), context(two))).toMatchObject({
      reason: 'MachineNameTaken',
      message:
        'machine m1 is also named by OscarConfig b/m1, c/m1: node names are cluster-wide; rename one machine',
    });
  });

  it('a renewal of a machine several configs name names them all', () => {
    expect(run(csr(BY_NODE), context(two))).toMatchObject({
      reason: 'MachineNameTaken',
      message:
        'machine m1 is named by OscarConfigs default/m1, b/m1, c/m1: node names are cluster-wide; rename one machine',
    });
  });

  it('a renewal of a machine no config here names, or whose config has no kubeletBootstrap, is left', () => {
    expect(
      run(
        csr(BY_NODE),
        context(() => []),
      ),
    ).toEqual({
      action: 'ignore',
      why: 'no OscarConfig this controller watches names machine m1',
    });
    expect(
      run(
        csr(BY_NODE),
        context(() => [{ ...m1, kubeletBootstrap: false }]),
      ),
    ).toEqual({
      action: 'ignore',
      why: 'OscarConfig default/m1 does not set spec.kubeletBootstrap',
    });
  });

  it('anyone else is left, saying why', () => {
    expect(run(csr({ username: 'alice', groups: [] }))).toEqual({
      action: 'ignore',
      why: 'not requested by an oscar machine token or a node oscar bootstrapped',
    });
  });

  it('usages and lifetime: the allowed ones and the cap, with what was asked; the prefix says who asked', () => {
    const none = csr();
    delete none.spec.usages;
    expect(run(none)).toMatchObject({
      reason: 'WrongUsages',
      message:
        'kubelet certificate with the bootstrap token of machine m1: spec.usages must be within digital signature, key encipherment, client auth and include client auth; got (none)',
    });
    expect(run(csr({ ...BY_NODE, usages: ['client auth', 'server auth'] }))).toMatchObject({
      reason: 'WrongUsages',
      message:
        'kubelet certificate renewal by system:node:m1: spec.usages must be within digital signature, key encipherment, client auth and include client auth; got client auth, server auth',
    });
    expect(run(csr({ expirationSeconds: MAX + 1 }))).toMatchObject({
      reason: 'LifetimeTooLong',
      message: `kubelet certificate with the bootstrap token of machine m1: spec.expirationSeconds is ${String(MAX + 1)}; at most ${String(MAX)}`,
    });
  });

  it('a subject that is not the exact one names the one it must be and the one asked for', () => {
    const other = Buffer.from(
      certificateRequest(newNodeKey(), {
        commonName: 'system:node:m2',
        organizations: ['system:nodes'],
      }),
    ).toString('base64');
    expect(run(csr({ request: other }))).toMatchObject({
      reason: 'WrongSubject',
      message:
        'kubelet certificate with the bootstrap token of machine m1: the subject must be exactly CN=system:node:m1, O=system:nodes; the request asks for O=system:nodes, CN=system:node:m2',
    });
  });

  it('a request whose signature does not verify says so', () => {
    const der = Buffer.from(
      Buffer.from(good, 'base64').toString().split('\n').slice(1, -2).join(''),
      'base64',
    );
    der[der.length - 1] = (der[der.length - 1] ?? 0) ^ 1; // the signature's last byte
    const lines = der.toString('base64').match(/.{1,64}/g) ?? [];
    const pem = `-----BEGIN CERTIFICATE REQUEST-----\n${lines.join('\n')}\n-----END CERTIFICATE REQUEST-----\n`;
    expect(run(csr({ request: Buffer.from(pem).toString('base64') }))).toMatchObject({
      reason: 'InvalidRequest',
      message:
        'kubelet certificate with the bootstrap token of machine m1: spec.request: its signature does not verify with its own key',
    });
  });
});
