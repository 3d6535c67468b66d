// Spawns an external renderer (oscar renderer serve, or the example in examples/renderer) as a
// real separate process and learns its URL from the one JSON line it prints when listening.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { repoRoot } from '../../support/tools.js';

export interface RendererProcess {
  /** The URL to POST RenderRequests to. */
  url: string;
  child: ChildProcess;
  /** stderr so far (request log lines, errors). */
  stderr(): string;
  stop(): Promise<void>;
}

/** Starts `command args…` in the repo and waits for its {"msg":"listening","url":…} line. */
export async function startRendererProcess(
  command: string,
  args: readonly string[],
  options: { timeoutMs?: number; cwd?: string } = {},
): Promise<RendererProcess> {
  const child = spawn(command, args, {
    cwd: options.cwd ?? repoRoot,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const lines = createInterface({ input: child.stdout });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(
        new Error(`${command} ${args.join(' ')} did not print its URL in time; stderr:\n${stderr}`),
      );
    }, options.timeoutMs ?? 60_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(
        new Error(
          `${command} ${args.join(' ')} exited with ${String(code)} before listening; stderr:\n${stderr}`,
        ),
      );
    });
    lines.on('line', (line) => {
      try {
        const msg = JSON.parse(line) as { msg?: string; url?: string };
        if (msg.msg === 'listening' && typeof msg.url === 'string') {
          clearTimeout(timer);
          resolve(msg.url);
        }
      } catch {
        // not ours
      }
    });
  });
  return {
    url,
    child,
    stderr: () => stderr,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** `oscar renderer serve` from source, on a free loopback port (--quiet unless `quiet: false`). */
export function startOscarRendererServe(
  types: readonly string[],
  extra: readonly string[] = [],
  options: { quiet?: boolean } = {},
): Promise<RendererProcess> {
  return startRendererProcess(process.execPath, [
    '--import',
    'tsx',
    join(repoRoot, 'cli', 'oscar.ts'),
    'renderer',
    'serve',
    '--type',
    types.join(','),
    '--listen',
    '127.0.0.1:0',
    ...(options.quiet === false ? [] : ['--quiet']),
    ...extra,
  ]);
}

/** The example external renderer (examples/renderer/server.mjs), on a free loopback port. */
export function startExampleRenderer(): Promise<RendererProcess> {
  return startRendererProcess(
    process.execPath,
    [join(repoRoot, 'examples', 'renderer', 'server.mjs')],
    {
      cwd: join(repoRoot, 'examples', 'renderer'),
    },
  );
}
