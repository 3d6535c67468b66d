// Container images for pods on the nspawn kubelet nodes, with no registry: hack/images/build.sh
// builds a busybox and a pause image from Debian's busybox-static (buildah, cached under
// ~/.cache/oscar/images), a node gets the archives through a read-only bind mount, and a
// containerd drop-in imports them each time containerd starts — so before kubelet, which is
// ordered after containerd. containerd's sandbox_image names the local pause image; pods use
// imagePullPolicy: Never.
import { execFileSync } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Bind } from './nspawn.js';
import { missing, repoRoot } from './tools.js';

export interface LocalImages {
  /** Host directory with the archives (busybox.tar, pause.tar). */
  dir: string;
  /** References the archives carry, e.g. localhost/oscar/busybox:<recipe hash>. */
  busybox: string;
  pause: string;
}

export const imagesScript = join(repoRoot, 'hack', 'images', 'build.sh');

/** Where a node sees the archives. */
export const IMAGES_IN_NODE = '/var/lib/oscar-images';

/** Builds the images once (a few seconds) or finds them cached; undefined when that fails. */
export async function localImages(): Promise<LocalImages | undefined> {
  let dir: string;
  try {
    const out = execFileSync('bash', [imagesScript], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
      timeout: 10 * 60_000,
    });
    dir = out.trim().split('\n').pop() ?? '';
  } catch (error) {
    missing('local images', `${imagesScript} failed: ${(error as Error).message}`);
    return undefined;
  }
  const refs = new Map(
    (await readFile(join(dir, 'refs'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => l.split(' ') as [string, string]),
  );
  const busybox = refs.get('busybox.tar');
  const pause = refs.get('pause.tar');
  if (!busybox || !pause) throw new Error(`${dir}/refs lacks busybox.tar or pause.tar`);
  return { dir, busybox, pause };
}

export function imagesBind(images: LocalImages): Bind {
  return { src: images.dir, dst: IMAGES_IN_NODE, ro: true };
}

/**
 * cgroup v1 controllers nspawn mounts read-only into a container on this (hybrid) host; runc
 * creates each pod's cgroups in them, so the drop-in below makes them writable (a bind remount:
 * the host's hierarchies themselves are writable). A VM owns its cgroups and needs none of it.
 */
const CGROUP_CONTROLLERS = [
  'blkio',
  'cpu',
  'cpuacct',
  'cpuset',
  'devices',
  'freezer',
  'memory',
  'pids',
];

/**
 * A containerd drop-in that imports every archive after containerd is up and before the unit
 * counts as started (ExecStartPost), so kubelet (After=containerd.service) never sees a node
 * without them. Re-importing an image it has is a no-op, so every boot may run it.
 */
export const CONTAINERD_IMPORT_DROP_IN = `[Service]
ExecStartPre=/bin/sh -ec 'for c in ${CGROUP_CONTROLLERS.join(' ')}; do mount -o remount,bind,rw /sys/fs/cgroup/$c; done'
ExecStartPost=/bin/sh -ec 'for f in ${IMAGES_IN_NODE}/*.tar; do /usr/bin/ctr -n k8s.io images import "$f"; done'
`;

/** Writes the import drop-in into a node's (persistent) root before it boots. */
export async function prepareImageImport(root: string): Promise<void> {
  const dir = join(root, 'etc/systemd/system/containerd.service.d');
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, '50-oscar-images.conf'), CONTAINERD_IMPORT_DROP_IN);
}

const CRI_TABLE = '[plugins."io.containerd.grpc.v1.cri"]';
const CRI_CNI_TABLE = '[plugins."io.containerd.grpc.v1.cri".cni]';

/**
 * containerd's config.toml (version 2, as in examples/kubelet-worker/) for a container on this
 * host: the CRI plugin's sandbox_image set to `pause` (the table goes before its first sub-table);
 * oom_score_adj never below containerd's own (restrict_oom_score_adj: this host grants no
 * CAP_SYS_RESOURCE, so the -998 containerd gives a sandbox is refused and runc's init dies with
 * "can't get final child's PID from pipe: EOF"); runc on cgroupfs paths, since kubelet without QoS
 * cgroups (cgroupsPerQOS: false, kubelet-support) gives pods no parent slice and runc's systemd
 * driver refuses a path without one; and no new session keyring per container (nspawn's seccomp
 * filter refuses keyctl).
 */
export function containerConfigToml(toml: string, pause: string): string {
  if (!toml.includes('SystemdCgroup = true')) {
    throw new Error('config.toml does not set SystemdCgroup = true for runc; nothing to adapt');
  }
  return withCriSettings(toml, [
    `sandbox_image = "${checkedRef(pause)}"`,
    'restrict_oom_score_adj = true',
  ]).replace('SystemdCgroup = true', 'SystemdCgroup = false\n  NoNewKeyring = true');
}

/** `ref` when it is a plain image reference (it goes into TOML unescaped). */
function checkedRef(ref: string): string {
  if (!/^[a-z0-9./:_-]+$/.test(ref)) throw new Error(`containerConfigToml: bad reference '${ref}'`);
  return ref;
}

/** `toml` with `lines` (keys of the CRI plugin, none set yet) in the CRI plugin's table. */
export function withCriSettings(toml: string, lines: readonly string[]): string {
  for (const line of lines) {
    const key = line.split(' ')[0] ?? line;
    if (toml.includes(key)) throw new Error(`config.toml already sets ${key}`);
  }
  if (!toml.includes(CRI_CNI_TABLE)) {
    throw new Error(`config.toml has no ${CRI_CNI_TABLE} table to put the CRI settings before`);
  }
  const settings = lines.map((l) => `  ${l}\n`).join('');
  return toml.replace(CRI_CNI_TABLE, `${CRI_TABLE}\n${settings}${CRI_CNI_TABLE}`);
}
