import { describe, expect, it } from 'vitest';
import { identityNamespaces, memberOf, NO_NAMESPACE } from './node-index.js';

describe('rollout membership: from what oscar issued, not what a node reports', () => {
  it("a node oscar issued for namespace A is never a member of B's rollout, whatever it reports", () => {
    expect(memberOf('team-b/prod', ['team-a'])).toBe(false);
  });
  it("…and is a member of its own namespace's (positive control)", () => {
    expect(memberOf('team-a/prod', ['team-a'])).toBe(true);
  });
  it('a namespace that merely starts like the node’s is another namespace', () => {
    expect(memberOf('team-a2/prod', ['team-a'])).toBe(false);
  });
  it('a node issued in two namespaces (a name collision) belongs to neither alone', () => {
    expect(memberOf('team-a/prod', ['team-a', 'team-b'])).toBe(false);
  });
  it('a node oscar issued no identity (an administrator’s agent) follows its report as before', () => {
    expect(memberOf('team-b/prod', [])).toBe(true);
  });
});

describe('rollout membership: a node object labelled for an identity', () => {
  const issued = [{ namespace: 'team-a', uid: 'u-a' }];
  it('belongs to the namespace of the live config holding its UID (positive control)', () => {
    expect(identityNamespaces(issued, 'u-a')).toEqual(['team-a']);
    expect(memberOf('team-a/prod', identityNamespaces(issued, 'u-a'))).toBe(true);
  });
  it("whose UID no live config holds (a deleted machine's certificate made it again) belongs to no rollout", () => {
    expect(identityNamespaces([], 'u-dead')).toEqual([NO_NAMESPACE]);
    expect(memberOf('team-a/prod', identityNamespaces([], 'u-dead'))).toBe(false);
    expect(memberOf('team-b/prod', identityNamespaces([], 'u-dead'))).toBe(false);
  });
  it('labelled for an earlier machine while a new one of that name holds another UID: none', () => {
    expect(memberOf('team-a/prod', identityNamespaces(issued, 'u-old'))).toBe(false);
  });
  it('an unlabelled object keeps the issued namespaces (none: an administrator’s agent)', () => {
    expect(identityNamespaces(issued, undefined)).toEqual(['team-a']);
    expect(identityNamespaces([], undefined)).toEqual([]);
  });
});
