import { describe, expect, it } from 'vitest';
import type { OperatingSystemConfig } from '../api/schema.js';
import { expandForOs } from './local.js';
import { config, file } from './testing/fixtures.js';

describe('expandForOs', () => {
  it("gives what the controller's Secret carries: the profile's units and files, the declared packages", async () => {
    const declared = {
      ...config([], [file('/etc/x', 'x\n')]),
      type: 'ubuntu',
      packages: [{ name: 'jq' }],
      cri: { name: 'containerd' as const, cgroupDriver: 'systemd' as const },
    };
    // expandForOs reads only the resolved config; the document is not needed here
    const expanded = await expandForOs(declared, {} as OperatingSystemConfig);
    // the cri profile adds containerd's config file and drop-in ...
    expect(expanded.files.map((f) => f.path)).toContain('/etc/containerd/config.toml');
    expect(expanded.units.map((u) => u.name)).toContain('containerd.service');
    // ... and the containerd package, which the provision user data installs, not the Secret
    expect(expanded.packages).toEqual([{ name: 'jq' }]);
  });
});
