/**
 * Wiring shared by `oscar agent`, `oscar plan` and `oscar up`: the state directory and systemd for
 * a root (the node itself, or a directory), and the OS-profile expansion the renderers apply, so
 * a node gets exactly what the controller would put in its Secret.
 */
import { join } from 'node:path';
import type { ApplyDeps } from './apply.js';
import type { Expand } from './desired.js';
import { DEFAULT_STATE_DIR } from './state.js';
import { SystemctlUnitStates } from './unit-state.js';
import { LocalPackages, SystemPackages } from './packages.js';
import { LocalSystemd, SystemctlSystemd } from './systemd.js';

/**
 * Loaded on first use: the Secret path never expands (the controller already did). Exactly what
 * the controller's Secret carries: the profile's units and files, the declared packages (a
 * profile's own packages, such as containerd for spec.cri, come with the provision user data).
 */
export const expandForOs: Expand = async (config) => ({
  ...(await import('../renderers/profiles.js')).expand(config).config,
  packages: config.packages,
});

export interface RootOptions {
  root?: string;
  stateDir?: string;
}

/** "/" means this machine (real systemctl); any other root is a directory (local mode). */
export function depsFor(opts: RootOptions): ApplyDeps {
  const root = opts.root ?? '/';
  const local = root !== '/';
  const stateDir = opts.stateDir ?? (local ? join(root, DEFAULT_STATE_DIR) : DEFAULT_STATE_DIR);
  return {
    root,
    stateDir,
    systemd: local
      ? new LocalSystemd(root, join(stateDir, 'would-run.log'))
      : new SystemctlSystemd(),
    packages: local ? new LocalPackages(join(stateDir, 'would-run.log')) : new SystemPackages(),
    // in a directory root owned by an unprivileged user, owners cannot be set: compare none
    owners: !local || process.getuid?.() === 0,
    // a directory root has no systemd to ask: its units' states are not compared
    ...(local ? {} : { unitStates: new SystemctlUnitStates() }),
  };
}
