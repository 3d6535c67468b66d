// `oscar up [DIR]`: the local main job. Watches a folder of OperatingSystemConfig YAML (default
// examples/), and on start and on every save validates, resolves and applies each OSC to its own
// sandbox root .oscar/root/<name>/, printing the plan. No cluster and no root privileges needed:
// in a directory root the agent writes files and unit symlinks and lists the restarts it would run.
import { readdir, readFile } from 'node:fs/promises';
import { extname, join, relative, resolve } from 'node:path';
import { watch } from 'chokidar';
import { applyDesired, planFor } from '../../agent/apply.js';
import { desiredFromYaml } from '../../agent/desired.js';
import { depsFor, expandForOs } from '../../agent/local.js';
import { lockStateDir } from '../../agent/lock.js';
import { formatPlan } from '../../agent/plan.js';
import { AWAIT_WRITE_FINISH, readStableFile } from '../../agent/stable-file.js';
import { openLogger } from '../../log/logger.js';
import { onShutdownSignal, parseDuration } from '../support/shutdown.js';

const isYaml = (f: string): boolean => ['.yaml', '.yml'].includes(extname(f));

async function yamlFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  return entries
    .filter((e) => e.isFile() && isYaml(e.name))
    .map((e) => join(dir, e.name))
    .sort();
}

export interface UpOptions {
  dir: string;
  out: string;
  print: (text: string) => void;
}

/**
 * Applies every OSC of one file to its sandbox; returns false when anything failed. `changed`: the
 * file was just saved, so it is read once it stands still (an editor may be half-way through).
 */
export async function upFile(file: string, opts: UpOptions, changed = false): Promise<boolean> {
  const shown = relative(process.cwd(), file) || file;
  let text: string;
  try {
    text = changed ? (await readStableFile(file)).toString('utf8') : await readFile(file, 'utf8');
  } catch (error) {
    opts.print(`✗ ${shown}: cannot read: ${(error as Error).message}\n`);
    return false;
  }
  let all;
  try {
    all = await desiredFromYaml(text, shown, expandForOs);
  } catch (error) {
    opts.print(
      `✗ ${shown}: not applied (the sandbox keeps its last good state):\n${indent((error as Error).message)}\n`,
    );
    return false;
  }
  let ok = true;
  for (const desired of all) {
    const root = join(opts.out, 'root', desired.name);
    const deps = depsFor({ root });
    try {
      // as an agent would: `oscar agent --root` on the same sandbox is refused meanwhile
      const unlock = await lockStateDir(deps.stateDir);
      try {
        const actions = await planFor(deps, desired);
        const header = `● ${shown} → ${relative(process.cwd(), root) || root} (${desired.config.purpose}, ${desired.checksum.slice(0, 12)})`;
        opts.print(`${header}\n${indent(formatPlan(actions))}`);
        await applyDesired(deps, desired);
      } finally {
        await unlock();
      }
    } catch (error) {
      ok = false;
      opts.print(`✗ ${shown} (${desired.name}): ${(error as Error).message}\n`);
    }
  }
  return ok;
}

function indent(text: string): string {
  return text
    .split('\n')
    .map((l) => (l === '' ? l : `    ${l}`))
    .join('\n');
}

export interface UpFlags {
  out: string;
  once?: boolean;
  shutdownTimeout: string;
  logFormat?: 'json' | 'text';
  logLevel?: string;
}

/** `oscar up [DIR]` (flags in ./index.ts). */
export async function upCommand(dirArg: string, flags: UpFlags): Promise<void> {
  const dir = resolve(dirArg);
  const shutdownMs = parseDuration(flags.shutdownTimeout, '--shutdown-timeout');
  const opts: UpOptions = {
    dir,
    out: resolve(flags.out),
    print: (t) => process.stdout.write(t.endsWith('\n') ? t : `${t}\n`),
  };
  let files: string[];
  try {
    files = await yamlFiles(dir);
  } catch (error) {
    console.error(`oscar up: cannot read ${dirArg}: ${(error as Error).message}`);
    process.exitCode = 1;
    return;
  }
  opts.print(
    `oscar up: ${files.length} file(s) in ${dirArg}/ → sandbox roots in ${flags.out}/root/<name>/ (no cluster needed; restarts are listed in <root>/var/lib/oscar/would-run.log)`,
  );
  let ok = true;
  for (const f of files) ok = (await upFile(f, opts)) && ok;
  if (flags.once === true) {
    process.exitCode = ok ? 0 : 1;
    return;
  }
  const timers = new Map<string, NodeJS.Timeout>();
  // one apply at a time, in save order
  let chain = Promise.resolve();
  const watcher = watch(dir, {
    ignoreInitial: true,
    depth: 0,
    atomic: true,
    awaitWriteFinish: AWAIT_WRITE_FINISH,
  });
  const onChange = (path: string): void => {
    if (!isYaml(path)) return;
    clearTimeout(timers.get(path));
    timers.set(
      path,
      setTimeout(() => {
        timers.delete(path);
        chain = chain.then(async () => {
          await upFile(path, opts, true);
        });
      }, 150),
    );
  };
  watcher.on('add', onChange).on('change', onChange);
  watcher.on('unlink', (path) => {
    if (isYaml(path))
      opts.print(`${relative(process.cwd(), path)} removed; its sandbox stays as it was`);
  });
  // On Ctrl-C or SIGTERM: the apply in progress finishes (its journal would resume it anyway).
  onShutdownSignal(
    async (_signal, deadline) => {
      for (const t of timers.values()) clearTimeout(t);
      await deadline.within(chain);
      await deadline.within(watcher.close());
      opts.print('oscar up: stopped');
    },
    {
      log: await openLogger({
        component: 'up',
        ...(flags.logFormat ? { format: flags.logFormat } : {}),
        ...(flags.logLevel ? { level: flags.logLevel } : {}),
      }),
      timeoutMs: shutdownMs,
    },
  );
  // only now: a signal from here on finds its handler (the logger loads pino first)
  opts.print(`watching ${dirArg}/ for changes — edit a file and save; Ctrl-C to stop`);
}
