// The writes of a kubelet approval, in order, in memory: the token's use recorded before the
// approval, the token deleted only when the agent no longer needs it, no token touched by a rotation.
import { describe, expect, it } from 'vitest';
import type { ConfigObject } from '../bootstrap/types.js';
import type { BootstrapLink } from './bootstrap-link.js';
import type { CsrObject } from './decide.js';
import { approveKubelet } from './kubelet-approval.js';
import type { IdentityWriter } from './writer.js';

const csr: CsrObject = {
  metadata: { name: 'csr-1' },
  spec: { request: '', signerName: 'kubernetes.io/kube-apiserver-client-kubelet' },
};

function config(agentIssued: boolean): ConfigObject {
  return {
    metadata: { name: 'm1', namespace: 'ns' },
    spec: { provisionRef: { name: 'p' }, reconcileRef: { name: 'r' }, kubeletBootstrap: true },
    status: {
      bootstrapTokenID: 'abc123',
      conditions: agentIssued
        ? [
            {
              type: 'NodeIdentity',
              status: 'True',
              reason: 'Issued',
              message: 'x',
              lastTransitionTime: '2026-12-03T10:00:00Z',
            },
          ]
        : [],
    },
  };
}

function world() {
  const calls: string[] = [];
  const writer = {
    decideCsr: (_c: CsrObject, d: { type: string; reason: string }) => {
      calls.push(`${d.type} ${d.reason}`);
      return Promise.resolve();
    },
    deleteToken: (id: string) => {
      calls.push(`deleteToken ${id}`);
      return Promise.resolve();
    },
  } as unknown as IdentityWriter;
  const bootstrap = {
    consumed: new Map(),
    tokenConsumed: (key: string, c: { reason: string }, consumer?: string) => {
      calls.push(`tokenConsumed ${key} ${c.reason} ${consumer ?? 'agent'}`);
      return Promise.resolve();
    },
    event: (_c: ConfigObject, e: { reason: string }) => {
      calls.push(`event ${e.reason}`);
      return Promise.resolve();
    },
  } as unknown as BootstrapLink;
  return { calls, deps: { writer, bootstrap, count: () => undefined } };
}

describe('approveKubelet', () => {
  it('kubelet after the agent: records, approves, deletes the token, tells', async () => {
    const { calls, deps } = world();
    await approveKubelet(
      csr,
      { kind: 'kubelet', machine: 'm1', tokenId: 'abc123' },
      config(true),
      deps,
    );
    expect(calls).toEqual([
      'tokenConsumed ns/m1 KubeletIdentityIssued kubelet',
      'Approved OscarKubeletIdentity',
      'deleteToken abc123',
      'event KubeletIdentityIssued',
    ]);
  });

  it('kubelet before the agent: the token stays for the agent', async () => {
    const { calls, deps } = world();
    await approveKubelet(
      csr,
      { kind: 'kubelet', machine: 'm1', tokenId: 'abc123' },
      config(false),
      deps,
    );
    expect(calls).toEqual([
      'tokenConsumed ns/m1 KubeletIdentityIssued kubelet',
      'Approved OscarKubeletIdentity',
      'event KubeletIdentityIssued',
    ]);
  });

  it('a rotation touches no token', async () => {
    const { calls, deps } = world();
    await approveKubelet(csr, { kind: 'kubeletRenewal', machine: 'm1' }, config(true), deps);
    expect(calls).toEqual(['Approved OscarKubeletRenewal', 'event KubeletIdentityRenewed']);
  });
});
