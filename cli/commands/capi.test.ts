import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT_IN_PLACE, EXIT_REPLACE, runCapiPreview, type CapiPreviewFlags } from './capi.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'oscar-capi-preview-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function osc(file: string, type: string, cri = ''): Promise<string> {
  const path = join(dir, file);
  await writeFile(
    path,
    `apiVersion: oscar.dev/v1alpha1\nkind: OperatingSystemConfig\nmetadata: {name: worker}\nspec:\n  type: ${type}\n  purpose: reconcile\n${cri}  files: [{path: /etc/a, content: {inline: {data: ${file}}}}]\n`,
  );
  return path;
}

async function run(from: string, to: string, flags: Partial<CapiPreviewFlags> = {}) {
  let out = '';
  const code = await runCapiPreview(
    from,
    to,
    { namespace: 'default', detailedExitcode: true, ...flags },
    { stdout: (t) => (out += t) },
  );
  return { code, out };
}

describe('oscar capi preview (files: the extension’s own decision)', () => {
  it('a file change on the same OS: in place, exit 0', async () => {
    const r = await run(await osc('v1.yaml', 'ubuntu'), await osc('v2.yaml', 'ubuntu'));
    expect(r.code).toBe(EXIT_IN_PLACE);
    expect(r.out).toMatch(/v1\.yaml → .*v2\.yaml: machines are updated in place by oscar/);
    expect(r.out).toMatch(/why: reconcileRef .* in place \(checksum [0-9a-f]{12}\)/);
  });

  it('another OS or cgroup driver: replaced, exit 2, and why', async () => {
    const os = await run(await osc('u.yaml', 'ubuntu'), await osc('f.yaml', 'flatcar'), {
      output: 'json',
    });
    expect(os.code).toBe(EXIT_REPLACE);
    expect(JSON.parse(os.out)).toMatchObject({
      decision: 'replace',
      reason: expect.stringContaining('spec.type changed from "ubuntu" to "flatcar"') as unknown,
    });
    const cgroup = await run(
      await osc('s.yaml', 'ubuntu', '  cri: {name: containerd, cgroupDriver: systemd}\n'),
      await osc('c.yaml', 'ubuntu', '  cri: {name: containerd, cgroupDriver: cgroupfs}\n'),
    );
    expect(cgroup.code).toBe(EXIT_REPLACE);
    expect(cgroup.out).toContain('cgroupDriver changed from systemd to cgroupfs');
    // without --detailed-exitcode a replacement is a successful answer too
    expect(
      (await run(join(dir, 'u.yaml'), join(dir, 'f.yaml'), { detailedExitcode: false })).code,
    ).toBe(EXIT_IN_PLACE);
  });
});
