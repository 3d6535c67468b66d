import { describe, expect, it } from 'vitest';
import { API_VERSION, OSC_KIND } from '../../api/schema.js';
import type { KubeObject, OwnerReference } from '../kube/types.js';
import { secretIsOscars, secretNameTakenMessage } from './secret-object.js';

function withRefs(...ownerReferences: OwnerReference[]): KubeObject {
  return { metadata: { name: 'oscar-a-reconcile', namespace: 'ns', ownerReferences } };
}
const osc = (over: Partial<OwnerReference> = {}): OwnerReference => ({
  apiVersion: API_VERSION,
  kind: OSC_KIND,
  name: 'a',
  uid: 'uid-a',
  controller: true,
  ...over,
});

describe('secretIsOscars (issue 28)', () => {
  it("is oscar's when an OSC of that name is its controller, whatever its uid (re-created OSC)", () => {
    expect(secretIsOscars(withRefs(osc()), 'a')).toBe(true);
    expect(secretIsOscars(withRefs(osc({ uid: 'old' })), 'a')).toBe(true);
  });

  it("is not oscar's without an owner reference, or with one that is not an OSC controller of that name", () => {
    expect(secretIsOscars({ metadata: { name: 'oscar-a-reconcile' } }, 'a')).toBe(false);
    expect(secretIsOscars(withRefs(osc({ name: 'b' })), 'a')).toBe(false);
    expect(secretIsOscars(withRefs(osc({ controller: false })), 'a')).toBe(false);
    expect(secretIsOscars(withRefs(osc({ kind: 'Deployment', apiVersion: 'apps/v1' })), 'a')).toBe(
      false,
    );
    expect(secretIsOscars(withRefs(osc({ apiVersion: 'other.dev/v1' })), 'a')).toBe(false);
  });

  it('says which Secret and both ways out', () => {
    const m = secretNameTakenMessage('ns', 'oscar-a-reconcile', 'a');
    expect(m).toContain('oscar-a-reconcile');
    expect(m).toContain('namespace ns');
    expect(m).toMatch(/Rename the OperatingSystemConfig, or delete or rename that Secret/);
  });
});
