/**
 * `spec.packages` on the node: installed with the package manager the node has (apt-get on
 * Debian and Ubuntu, zypper on openSUSE), the way the rendered provision script installs them.
 * Two implementations, like agent/systemd.ts: the node's own package manager, and a directory
 * root (local mode), where nothing can be installed and the "would run" log says what a node
 * would have done.
 *
 * Packages are installed, never removed: a package that leaves the config stays on the node
 * (others may depend on it; removing software is a decision for a new machine, not an in-place
 * change), as files the agent did not write stay.
 */
import { access, appendFile } from 'node:fs/promises';
import { PACKAGE_COMMANDS } from '../api/constants.js';
import { packageSpec, type ResolvedPackage } from '../api/resolved.js';
import { runCommand, type RunResult } from './systemd.js';

export interface Packages {
  /** Installs `packages` (already-installed ones are left as they are); `log` hears warnings. */
  install(packages: readonly ResolvedPackage[], log?: (message: string) => void): Promise<void>;
}

/** A package manager call that failed, with the end of what it printed. */
export class PackageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PackageError';
  }
}

type Run = (
  cmd: string,
  args: readonly string[],
  timeoutMs: number,
  env?: Readonly<Record<string, string>>,
) => Promise<RunResult>;

/** The last lines of a command's output: enough to see why, never a whole apt log. */
function tail(r: RunResult, lines = 15): string {
  const text = `${r.stdout}\n${r.stderr}`.trim().split('\n');
  return text.slice(-lines).join('\n');
}

export class SystemPackages implements Packages {
  constructor(
    private readonly run: Run = runCommand,
    /** Where to look for the package managers (the node's own /usr/bin, or a test's stand-ins). */
    private readonly binDirs: readonly string[] = ['/usr/bin', '/bin', '/usr/sbin', '/sbin'],
    private readonly timeoutMs = 15 * 60_000,
  ) {}

  async install(
    packages: readonly ResolvedPackage[],
    log: (message: string) => void = () => undefined,
  ): Promise<void> {
    if (packages.length === 0) return;
    const specs = packages.map(packageSpec);
    const apt = await this.find('apt-get');
    if (apt !== undefined) {
      // fresh lists first (a minimal image has none); a failed refresh is not fatal by itself:
      // the lists on disk may hold the packages, and the install says if they do not
      const [, ...refresh] = PACKAGE_COMMANDS.aptRefresh;
      const update = await this.run(apt, refresh, this.timeoutMs, PACKAGE_COMMANDS.aptEnv);
      if (update.code !== 0) log(`apt-get update failed, installing anyway:\n${tail(update)}`);
      // a pinned version is what the config asks for, older or not (a revert of an upgrade)
      const downgrade = packages.some((p) => p.version !== undefined) ? ['--allow-downgrades'] : [];
      const args = [...PACKAGE_COMMANDS.aptInstall.slice(1), ...downgrade, ...specs];
      this.check(
        'apt-get',
        args,
        await this.run(apt, args, this.timeoutMs, PACKAGE_COMMANDS.aptEnv),
      );
      return;
    }
    const zypper = await this.find('zypper');
    if (zypper !== undefined) {
      const args = [...PACKAGE_COMMANDS.zypperInstall.slice(1), ...specs];
      this.check('zypper', args, await this.run(zypper, args, this.timeoutMs));
      return;
    }
    throw new PackageError(
      `cannot install ${specs.join(', ')}: the node has neither apt-get nor zypper (remove spec.packages, or use an image that has them)`,
    );
  }

  private check(name: string, args: readonly string[], r: RunResult): void {
    if (r.code === 0) return;
    throw new PackageError(
      `${name} ${args.join(' ')} failed (exit ${r.code ?? `timeout after ${this.timeoutMs} ms`}):\n${tail(r)}`,
    );
  }

  private async find(name: string): Promise<string | undefined> {
    for (const dir of this.binDirs) {
      const path = `${dir}/${name}`;
      try {
        await access(path);
        return path;
      } catch {
        // not in this directory
      }
    }
    return undefined;
  }
}

/** A directory root: nothing is installed; the "would run" log records what would have been. */
export class LocalPackages implements Packages {
  constructor(private readonly logPath: string) {}

  async install(packages: readonly ResolvedPackage[]): Promise<void> {
    if (packages.length === 0) return;
    await appendFile(
      this.logPath,
      `${new Date().toISOString()} install-packages ${packages.map(packageSpec).join(' ')}\n`,
    );
  }
}
