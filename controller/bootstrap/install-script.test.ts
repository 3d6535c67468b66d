// The agent install script of the bootstrap additions, run for real with sh, curl or wget and
// sha256sum against a loopback HTTP server (its install path moved into a temporary directory).
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requireTools } from '../../test/support/tools.js';
import { AGENT_BINARY_PATH, agentInstallScript } from './additions.js';

const AGENT = Buffer.from('#!/bin/sh\necho agent\n');
const SHA = createHash('sha256').update(AGENT).digest('hex');
let server: Server;
let base = '';
let hits = 0;
let dir = '';

beforeAll(async () => {
  server = createServer((req, res) => {
    hits++;
    if (req.url === '/agent') res.end(AGENT);
    else {
      res.statusCode = 404;
      res.end();
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${String((server.address() as AddressInfo).port)}`;
  dir = await mkdtemp(join(tmpdir(), 'oscar-install-'));
});
afterAll(async () => {
  await new Promise((r) => server.close(r));
  await rm(dir, { recursive: true, force: true });
});

/** Runs the script with its destination under `root` and PATH limited to `path`. */
async function run(
  url: string,
  sha: string,
  root: string,
  path = '/usr/bin:/bin',
): Promise<{ code: number; stderr: string }> {
  await mkdir(root, { recursive: true });
  const script = agentInstallScript(url, sha).replace(AGENT_BINARY_PATH, join(root, 'oscar-agent'));
  const file = join(root, 'install.sh');
  await writeFile(file, script);
  return new Promise((resolve) => {
    execFile('/bin/sh', [file], { env: { PATH: path }, timeout: 20_000 }, (err, _out, stderr) => {
      resolve({ code: err ? Number(err.code ?? 1) : 0, stderr });
    });
  });
}

describe('the agent install script', () => {
  const ok = requireTools(['curl', 'wget', 'sha256sum']);

  it('fetches, checks the sha256 and installs; a second run fetches nothing', async (ctx) => {
    if (!ok) return ctx.skip('curl, wget or sha256sum missing');
    const root = join(dir, 'ok');
    hits = 0;
    expect(await run(`${base}/agent`, SHA, root)).toEqual({ code: 0, stderr: '' });
    const installed = join(root, 'oscar-agent');
    expect(await readFile(installed)).toEqual(AGENT);
    expect((await stat(installed)).mode & 0o777).toBe(0o755);
    expect(hits).toBe(1);
    expect(await run(`${base}/agent`, SHA, root)).toEqual({ code: 0, stderr: '' });
    expect(hits).toBe(1);
  });

  it('refuses a download whose sha256 differs, and leaves nothing behind', async (ctx) => {
    if (!ok) return ctx.skip('curl, wget or sha256sum missing');
    const root = join(dir, 'bad');
    const r = await run(`${base}/agent`, 'f'.repeat(64), root);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`is not sha256 ${'f'.repeat(64)}`);
    expect(existsSync(join(root, 'oscar-agent'))).toBe(false);
    expect(existsSync(join(root, 'oscar-agent.new'))).toBe(false);
  });

  it('works with wget alone (no curl on PATH)', async (ctx) => {
    if (!ok) return ctx.skip('curl, wget or sha256sum missing');
    const bin = join(dir, 'wget-only');
    await mkdir(bin, { recursive: true });
    for (const tool of ['wget', 'sha256sum', 'chmod', 'mv', 'rm', 'sleep']) {
      await symlink(`/usr/bin/${tool}`, join(bin, tool)).catch(async () =>
        symlink(`/bin/${tool}`, join(bin, tool)),
      );
    }
    const root = join(dir, 'wget');
    expect(await run(`${base}/agent`, SHA, root, bin)).toEqual({ code: 0, stderr: '' });
    expect(await readFile(join(root, 'oscar-agent'))).toEqual(AGENT);
  });

  it('says so without curl or wget', async (ctx) => {
    if (!ok) return ctx.skip('curl, wget or sha256sum missing');
    const r = await run(`${base}/agent`, SHA, join(dir, 'none'), join(dir, 'empty-path'));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('no curl, no wget');
  });
});
