// What a real kubelet in an nspawn node needs here (NODE-TESTING.md, "A real Kubernetes node in a
// container"): the kubelet binary built from the test API server's module set, the host sysctls
// kubelet changes put back afterwards, and the few kubelet settings a container on a cgroup v1
// host needs — written into the machine's image as a kubelet drop-in, so the examples stay what a
// real machine runs.
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { bootNode, persistentRoot, type Bind, type Node } from './nspawn.js';
import { missing, repoRoot } from './tools.js';
import { waitFor } from './wait.js';

/** kubelet's and kubeadm's directory (hack/testenv/build.sh --node; ~10 min once, then cached). */
export function nodeBinaries(): string | undefined {
  try {
    const out = execFileSync('bash', [join(repoRoot, 'hack/testenv/build.sh'), '--node'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
      timeout: 60 * 60_000,
    });
    return out.trim().split('\n').pop();
  } catch (error) {
    missing('kubelet', `hack/testenv/build.sh --node failed: ${(error as Error).message}`);
    return undefined;
  }
}

/** Sysctls kubelet's container manager sets; not namespaced, so a node changes them on the host. */
const HOST_SYSCTLS = ['vm/overcommit_memory', 'kernel/panic', 'kernel/panic_on_oops'];

/** Reads the host's values now; the returned function writes them back. */
export async function hostSysctls(): Promise<() => Promise<void>> {
  const saved = await Promise.all(
    HOST_SYSCTLS.map(async (k) => [k, (await readFile(`/proc/sys/${k}`, 'utf8')).trim()] as const),
  );
  return async () => {
    for (const [k, v] of saved) await writeFile(`/proc/sys/${k}`, `${v}\n`);
  };
}

/**
 * The container's part of kubelet's configuration, as a drop-in of the examples' --config-dir:
 * this host's cgroups are v1 (kubelet 1.37 refuses them unless told), and a container cannot
 * manage QoS cgroups or node allocatable enforcement. A VM needs none of it.
 */
export const CONTAINER_KUBELET_DROP_IN = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
`;

/** Writes the drop-in into a node's (persistent) root before it boots. */
export async function prepareKubeletImage(root: string): Promise<void> {
  const dir = join(root, 'etc/kubernetes/kubelet.conf.d');
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, '90-container.conf'), CONTAINER_KUBELET_DROP_IN);
}

/**
 * nspawn binds for kubelet: the binary; /dev/kmsg (the real one is refused in a container); and
 * containerd's state on a host directory, since its overlayfs snapshotter cannot put an upper
 * layer on the node's own overlay root.
 */
export function kubeletBinds(bin: string, containerdDir: string): Bind[] {
  return [
    { src: join(bin, 'kubelet'), dst: '/usr/bin/kubelet' },
    { src: '/dev/null', dst: '/dev/kmsg', ro: false },
    { src: containerdDir, dst: '/var/lib/containerd', ro: false },
  ];
}

/** An example file's documents, verbatim, moved into namespace `ns`. */
export async function exampleDocs(
  file: string,
  ns: string,
): Promise<
  {
    apiVersion: string;
    kind: string;
    metadata: { name: string; namespace?: string };
    spec: Record<string, unknown>;
  }[]
> {
  const text = await readFile(join(repoRoot, 'examples', file), 'utf8');
  return parseAllDocuments(text).map((d) => {
    const o = d.toJS() as {
      apiVersion: string;
      kind: string;
      metadata: { name: string; namespace?: string };
      spec: Record<string, unknown>;
    };
    return { ...o, metadata: { ...o.metadata, namespace: ns } };
  });
}

export interface NodeObject {
  metadata: { name: string };
  spec?: { providerID?: string };
  status?: {
    capacity?: Record<string, string>;
    nodeInfo?: { kubeletVersion?: string };
    conditions?: { type: string; status: string; reason?: string; message?: string }[];
  };
}

export function nodeReady(n: NodeObject | undefined): boolean {
  return n?.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
}

/** A kubelet machine booted by bootKubeletMachine; `stop` ends it and removes its disks. */
export interface KubeletMachine {
  node: Node;
  /** Date.now() just before the boot. */
  bootedAt: number;
  stop: () => Promise<void>;
}

export interface KubeletMachineOptions {
  /** The cached node root (the lower layer of the machine's persistent root). */
  lower: string;
  /** nodeBinaries()'s directory. */
  bin: string;
  name: string;
  userData: string;
  /** More kubelet drop-ins (file name → content), e.g. one port per kubelet on a shared network. */
  dropIns?: Record<string, string>;
  /** More to write into the image before the first boot (kubeadm's defaults, image imports). */
  prepare?: (root: string) => Promise<void>;
  /** More host paths bound into the machine (a kubeadm binary, the local images). */
  binds?: Bind[];
}

/**
 * One machine as every kubelet suite boots it: a persistent root with the container's kubelet
 * drop-in (and `dropIns`, then whatever `prepare` writes), containerd's state on a host
 * directory, `binds` besides kubelet's, cloud-init seeded with `userData`. On a failed boot whatever was made is removed again.
 */
export async function bootKubeletMachine(o: KubeletMachineOptions): Promise<KubeletMachine> {
  const cleanups: (() => Promise<unknown>)[] = [];
  const stop = async (): Promise<void> => {
    for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
  };
  try {
    const disk = await persistentRoot(o.lower);
    cleanups.push(disk.cleanup);
    await prepareKubeletImage(disk.root);
    const dir = join(disk.root, 'etc/kubernetes/kubelet.conf.d');
    for (const [file, content] of Object.entries(o.dropIns ?? {})) {
      await writeFile(join(dir, file), content);
    }
    await o.prepare?.(disk.root);
    const containerd = await mkdtemp(join(tmpdir(), 'oscar-containerd-'));
    cleanups.push(() => rm(containerd, { recursive: true, force: true }));
    const bootedAt = Date.now();
    const node = await bootNode({
      root: disk.root,
      name: o.name,
      volatile: false,
      seed: { userData: o.userData },
      binds: [...kubeletBinds(o.bin, containerd), ...(o.binds ?? [])],
      writableProcSys: true,
    });
    cleanups.push(() => node.stop());
    return { node, bootedAt, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** A Node registers, then goes Ready: both objects and when each was seen. */
export async function waitNodeReady(
  get: (path: string) => Promise<NodeObject | undefined>,
  name: string,
  o: { registerMs: number; readyMs: number; onTimeout?: () => Promise<string> },
): Promise<{ registered: NodeObject; registeredAt: number; ready: NodeObject; readyAt: number }> {
  const path = `/api/v1/nodes/${name}`;
  const waitOptions = (timeoutMs: number) => ({
    timeoutMs,
    intervalMs: 1000,
    onTimeout: o.onTimeout,
  });
  const registered = await waitFor(
    'the Node to register',
    () => get(path),
    waitOptions(o.registerMs),
  );
  const registeredAt = Date.now();
  const ready = await waitFor(
    'the Node to be Ready',
    async () => {
      const n = await get(path);
      return nodeReady(n) ? n : undefined;
    },
    waitOptions(o.readyMs),
  );
  return { registered, registeredAt, ready, readyAt: Date.now() };
}
