import { describe, expect, it } from 'vitest';
import { memberOf } from './node-index.js';

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
