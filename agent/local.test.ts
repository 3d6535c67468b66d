import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import type { OperatingSystemConfig } from '../api/schema.js';
import { validateOperatingSystemConfig } from '../api/validate.js';
import { desiredFromText } from './desired.js';
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

describe('a local OSC whose OS profile additions could never be written', () => {
  it('is refused with the file, the line of the document and the field, saying the profile added it', async () => {
    // valid alone; but the cri profile writes /etc/containerd/config.toml, below this file
    const text = `apiVersion: oscar.dev/v1alpha1
kind: OperatingSystemConfig
metadata:
  name: edge
spec:
  type: ubuntu
  purpose: reconcile
  cri: {name: containerd, cgroupDriver: systemd}
  files:
    - path: /etc/containerd
      content: {inline: {data: "a file where a directory must be"}}
`;
    expect(validateOperatingSystemConfig(parse(text))).toEqual([]);
    await expect(desiredFromText(text, 'edge.yaml', expandForOs)).rejects.toThrow(
      /^edge\.yaml:1: spec\.files\[\d+\]\.path: "\/etc\/containerd" is written as a file, but spec\.files\[\d+\]\.path \("\/etc\/containerd\/config\.toml"\) needs it to be a directory; keep only one of them \(with what the OS profile adds\)$/,
    );
  });
});
