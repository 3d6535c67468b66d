import { describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bootNode, uniqueNodeName } from './nspawn.js';

describe('bootNode option checks (before anything is spawned)', () => {
  it('names the bad field and the fix', async () => {
    const empty = await mkdtemp(join(tmpdir(), 'oscar-noroot-'));
    try {
      await expect(bootNode({ root: '/', name: 'Bad_Name' })).rejects.toThrow(
        /name 'Bad_Name' must match/,
      );
      await expect(
        bootNode({ root: '/', name: 'n1', disableCloudInit: true, seed: { userData: '' } }),
      ).rejects.toThrow(/seed is given but disableCloudInit is true/);
      await expect(bootNode({ root: empty, name: 'n1' })).rejects.toThrow(
        /has no systemd; use nodeRoot\(\)/,
      );
      await expect(
        bootNode({ root: '/', name: 'n1', binds: [{ src: 'rel', dst: '/x' }] }),
      ).rejects.toThrow(/binds\[0\]\.src 'rel' must be an absolute path/);
      await expect(
        bootNode({ root: '/', name: 'n1', binds: [{ src: '/tmp', dst: '/a:b' }] }),
      ).rejects.toThrow(/binds\[0\]\.dst/);
      await expect(
        bootNode({ root: '/', name: 'n1', binds: [{ src: '/nonexistent-oscar', dst: '/x' }] }),
      ).rejects.toThrow(/does not exist/);
    } finally {
      await rm(empty, { recursive: true });
    }
  });
});

describe('uniqueNodeName', () => {
  it('is a valid machine name and differs between calls', () => {
    const a = uniqueNodeName('Agent_E2E');
    const b = uniqueNodeName('Agent_E2E');
    expect(a).toMatch(/^[a-z0-9][a-z0-9-]{0,63}$/);
    expect(a.startsWith('agent-e2e-')).toBe(true);
    expect(a).not.toBe(b);
    expect(uniqueNodeName('x'.repeat(100)).length).toBeLessThanOrEqual(64);
  });
});
