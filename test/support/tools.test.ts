import { describe, expect, it, vi } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MissingToolError, findTool, isCI, requireTool, toolAvailable } from './tools.js';

describe('findTool', () => {
  it('finds commands on PATH and absolute executables, not plain files', () => {
    expect(findTool('sh', '/nonexistent:/bin')).toBe('/bin/sh');
    expect(findTool('sh', '/nonexistent')).toBeUndefined();
    expect(findTool('/bin/sh')).toBe('/bin/sh');
    const dir = mkdtempSync(join(tmpdir(), 'oscar-tools-'));
    try {
      writeFileSync(join(dir, 'plain'), 'x', { mode: 0o644 });
      writeFileSync(join(dir, 'exe'), '#!/bin/sh\n', { mode: 0o755 });
      expect(findTool(join(dir, 'plain'))).toBeUndefined();
      expect(findTool('plain', dir)).toBeUndefined();
      expect(findTool('exe', dir)).toBe(join(dir, 'exe'));
      expect(findTool(dir)).toBeUndefined(); // a directory is not a tool
    } finally {
      rmSync(dir, { recursive: true });
    }
    expect(toolAvailable('oscar-no-such-tool')).toBe(false);
  });
});

describe('requireTool', () => {
  it('outside CI returns false and says why, once', () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
    try {
      expect(requireTool('oscar-no-such-tool-a', 'install it', { CI: 'false' })).toBe(false);
      expect(requireTool('oscar-no-such-tool-a', 'install it', {})).toBe(false);
      expect(warn).toHaveBeenCalledTimes(1);
      expect(String(warn.mock.calls[0]?.[0])).toContain(
        "tool 'oscar-no-such-tool-a' is not available: install it",
      );
    } finally {
      warn.mockRestore();
    }
  });

  it('in CI throws, naming the tool and the fix', () => {
    expect(() => requireTool('oscar-no-such-tool-b', 'run hack/deps.sh', { CI: 'true' })).toThrow(
      MissingToolError,
    );
    expect(() => requireTool('oscar-no-such-tool-b', 'run hack/deps.sh', { CI: 'true' })).toThrow(
      /oscar-no-such-tool-b.*run hack\/deps\.sh/,
    );
  });

  it('returns true for a present tool in and outside CI', () => {
    expect(requireTool('sh', 'x', { CI: 'true' })).toBe(true);
    expect(requireTool('sh', 'x', {})).toBe(true);
  });

  it('only the exact value "true" means CI', () => {
    expect(isCI({ CI: 'true' })).toBe(true);
    expect(isCI({ CI: '1' })).toBe(false);
    expect(isCI({})).toBe(false);
  });
});
