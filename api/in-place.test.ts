import { describe, expect, it } from 'vitest';
import { replacementReason } from './in-place.js';

describe('replacementReason (the one in-place rule of the agent and the Cluster API extension)', () => {
  it('nothing applied yet, or the same OS and cgroup driver: in place', () => {
    expect(replacementReason(undefined, { type: 'flatcar' })).toBeUndefined();
    const c = { type: 'ubuntu', cri: { name: 'containerd', cgroupDriver: 'systemd' } } as const;
    expect(replacementReason(c, { ...c })).toBeUndefined();
    expect(replacementReason({ type: 'ubuntu' }, c)).toBeUndefined();
  });

  it('another spec.type or another cgroup driver: a new machine, saying which field', () => {
    expect(replacementReason({ type: 'ubuntu' }, { type: 'flatcar' })).toMatch(
      /spec.type changed from "ubuntu" to "flatcar"/,
    );
    expect(
      replacementReason(
        { type: 'ubuntu', cri: { name: 'containerd', cgroupDriver: 'systemd' } },
        { type: 'ubuntu', cri: { name: 'containerd', cgroupDriver: 'cgroupfs' } },
      ),
    ).toMatch(/spec.cri.cgroupDriver changed from systemd to cgroupfs/);
  });
});
