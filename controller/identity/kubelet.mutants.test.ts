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
