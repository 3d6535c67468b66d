import { describe, expect, it } from 'vitest';
import { onlyOwnConflicts } from './writer.js';

describe('onlyOwnConflicts', () => {
  it('is true only when every conflict of a failed apply is with oscar-bootstrap itself', () => {
    expect(
      onlyOwnConflicts(
        'Apply failed with 1 conflict: conflict with "oscar-bootstrap" using v1: .data.expiration',
      ),
    ).toBe(true);
    expect(
      onlyOwnConflicts(
        'Apply failed with 2 conflicts: conflicts with "kubectl-create" using v1:\n- .data.token-secret\nconflicts with "oscar-bootstrap" using v1:\n- .data.expiration',
      ),
    ).toBe(false);
    expect(onlyOwnConflicts('Apply failed with 1 conflict: conflict with "kubeadm" using v1')).toBe(
      false,
    );
    expect(onlyOwnConflicts('the object has been modified')).toBe(false);
  });
});
