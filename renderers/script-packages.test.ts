import { execFile } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ResolvedConfig } from '../api/resolved.js';
import { defaultRegistry, renderOsc } from './registry.js';

const run = promisify(execFile);

async function script(type: string): Promise<string> {
  const config: ResolvedConfig = {
    type,
    purpose: 'provision',
    units: [],
    files: [],
    packages: [{ name: 'curl' }],
  };
  const opts = { name: 'n', namespace: 'ns', format: 'script' as const };
  return (await renderOsc(defaultRegistry(), config, opts)).userData.toString('utf8');
}

/** The script's definitions (prelude, helpers, package function), without its steps. */
function definitions(text: string): string {
  const end = text.indexOf('if [ -z "$ROOT" ]; then\n  oscar_packages');
  expect(end).toBeGreaterThan(0);
  return text.slice(0, end).replace(/^marker=[\s\S]*?^fi\n/m, '');
}

describe('the script installs packages under the usual umask', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'oscar-script-packages-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  // The script writes its files under umask 077; a package's maintainer scripts (a CA bundle,
  // a cache, a directory) must not inherit it, or what they make is readable by root alone.
  for (const type of ['debian', 'generic']) {
    it(`${type}: apt-get runs with umask 0022, the files after it with 0077`, async () => {
      const fake = join(dir, 'apt-get');
      await writeFile(fake, `#!/bin/sh\numask >>"${join(dir, 'seen')}"\n`);
      await chmod(fake, 0o755);
      const body = `${definitions(await script(type))}oscar_packages curl\numask >>"${join(dir, 'seen')}"\n`;
      await run('sh', ['-c', body], { env: { PATH: `${dir}:/usr/bin:/bin`, ROOT: dir } });
      const seen = (await readFile(join(dir, 'seen'), 'utf8')).trim().split('\n');
      // update, install, then the script's own umask again
      expect(seen).toEqual(['0022', '0022', '0077']);
    });
  }
});
