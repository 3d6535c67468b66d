// Boots a real systemd node from the cached root in systemd-nspawn and talks to it through the
// container's own systemd PID (nsenter), because machinectl / systemctl -M / systemd-run -M do not
// work on these hosts (PID 1 is not systemd). See docs in /work/shared/NODE-TESTING.md.
import { spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { run, type RunOptions, type RunResult } from './exec.js';

export interface Bind {
  /** Host path. */
  src: string;
  /** Path inside the node. */
  dst: string;
  /** Read-only (default true: a test rarely wants the node writing into the host). */
  ro?: boolean;
}

export interface NoCloudSeed {
  /** user-data as cloud-init reads it (e.g. "#cloud-config\n..."). */
  userData: string;
  /** meta-data; default "instance-id: <name>\nlocal-hostname: <name>\n". */
  metaData?: string;
}

export interface BootOptions {
  /** Root file system (from nodeRoot()); never modified: the node runs on a volatile overlay. */
  root: string;
  /** Machine name and hostname: [a-z0-9-], at most 64 characters, unique among running nodes. */
  name: string;
  binds?: readonly Bind[];
  /** Own network namespace with only loopback. Default: share the host's (reaches host loopback). */
  privateNetwork?: boolean;
  /** Run in this existing network namespace (/run/netns/NAME, e.g. from netns.ts nodeNetwork). */
  networkNamespacePath?: string;
  /** Extra capabilities for the node, e.g. CAP_NET_ADMIN (which nspawn does not give it here). */
  capabilities?: string[];
  /**
   * Default true: the node runs on a tmpfs overlay and the root stays pristine. false: the node
   * writes into `root` itself — for a root that must survive a reboot (persistentRoot()).
   */
  volatile?: boolean;
  /** cloud-init NoCloud seed, bound to /var/lib/cloud/seed/nocloud. */
  seed?: NoCloudSeed;
  /**
   * Boot without cloud-init (its generator honours /etc/cloud/cloud-init.disabled): no cloud-init
   * stages at boot, for tests that do not provision through user-data.
   */
  disableCloudInit?: boolean;
  /** How long to wait for the container's systemd and its bus. Default 60 s. */
  startTimeoutMs?: number;
  /**
   * Lets the node write /proc/sys (SYSTEMD_NSPAWN_API_VFS_WRITABLE): kubelet sets sysctls that are
   * not namespaced, so they change on the host — the test must put them back (hostSysctls()).
   */
  writableProcSys?: boolean;
}

export interface ExecOptions extends Pick<RunOptions, 'input' | 'timeoutMs'> {
  /** Extra environment for the command (on top of a clean PATH/LANG, not the host's env). */
  env?: Record<string, string>;
}

export interface Node {
  readonly name: string;
  /** PID of systemd-nspawn on the host (of the current boot). */
  readonly pid: number;
  /** Host PID of the container's systemd (its PID 1), of the current boot. */
  readonly systemdPid: number;
  /**
   * Boots so far. A node whose systemd reboots (`systemctl reboot` inside) makes systemd-nspawn
   * exit with 133; it is started again on the same root, as systemd-nspawn@.service does
   * (RestartForceExitStatus=133): the files survive (on a persistent root), the boot id is new.
   */
  readonly boots: number;
  /** Resolves once boot number `after + 1` (or later) has its systemd up; rejects if it fails. */
  waitBoot(after: number, timeoutMs?: number): Promise<void>;
  /** nspawn's stdout+stderr, including the node's console. */
  readonly logPath: string;
  /** Host path through which a path inside the node can be read (/proc/<systemd pid>/root/...). */
  hostPath(pathInNode: string): string;
  /** Runs a command inside the node (all its namespaces); resolves whatever the exit code. */
  exec(cmd: readonly string[], opts?: ExecOptions): Promise<RunResult>;
  /** exec that rejects, with the output, when the command does not exit 0. */
  execOk(cmd: readonly string[], opts?: ExecOptions): Promise<RunResult>;
  systemctl(...args: string[]): Promise<RunResult>;
  /** `systemctl show -p` as a record, e.g. show('x.service', ['MainPID', 'ActiveState']). */
  show(unit: string, props: readonly string[]): Promise<Record<string, string>>;
  /** The journal of one unit (or the whole boot), as text. */
  journal(unit?: string): Promise<string>;
  /**
   * Waits until the system is up (`is-system-running --wait`). Resolves 'running'; rejects when
   * it settles in any other state, with the failed units and their journals in the message.
   */
  waitRunning(timeoutMs?: number): Promise<string>;
  /** `cloud-init status --wait --long`; rejects unless the status is done. */
  waitCloudInit(timeoutMs?: number): Promise<string>;
  /** Host PIDs of processes still in the node's PID namespace (empty after stop()). */
  processes(): number[];
  /** SIGTERM to nspawn (the node halts), wait; SIGKILL the group if it does not. Idempotent. */
  stop(timeoutMs?: number): Promise<void>;
}

const nodeEnv = {
  PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
  LANG: 'C.UTF-8',
  TERM: 'dumb',
  SYSTEMD_PAGER: '',
  SYSTEMD_COLORS: '0',
};

const live = new Set<number>();
let exitHookInstalled = false;

/** Last resort for a test process that dies without calling stop(): no orphaned nodes. */
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const pid of live) killTree(pid);
  });
}

/** All descendants of `pid` (children first found, deepest last), from /proc/<pid>/stat. */
function descendants(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // exited while we looked
    }
    // "pid (comm) state ppid ...": comm may contain spaces and parentheses, so cut at the last ')'
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    const list = children.get(ppid) ?? [];
    list.push(Number(entry));
    children.set(ppid, list);
  }
  const out: number[] = [];
  const queue = [pid];
  for (let p = queue.shift(); p !== undefined; p = queue.shift()) {
    for (const c of children.get(p) ?? []) {
      out.push(c);
      queue.push(c);
    }
  }
  return out;
}

/**
 * SIGKILLs nspawn and everything below it. Killing only nspawn orphans the container: its init is
 * a child in its own session, is not killed with nspawn, and keeps the whole node running.
 * Killing a PID namespace's init kills every process in that namespace.
 */
function killTree(pid: number): void {
  for (const p of [...descendants(pid), pid]) {
    try {
      process.kill(p, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const markerVar = 'OSCAR_NODE';

/**
 * Host PIDs of node inits (the container's systemd) booted by bootNode with this name, found by
 * the OSCAR_NODE=<name> variable in their environment. Empty once the node is fully stopped; lets
 * a test prove that even a failed boot left nothing running.
 */
export function nodeInits(name: string): number[] {
  const needle = `\0${markerVar}=${name}\0`;
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (`\0${readFileSync(`/proc/${entry}/environ`, 'latin1')}`.includes(needle))
        pids.push(Number(entry));
    } catch {
      // exited while we looked, or a kernel thread
    }
  }
  return pids;
}

/** Host PIDs whose PID namespace is `nsLink` (e.g. "pid:[4026532301]"). */
function pidsInNamespace(nsLink: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readlinkSync(`/proc/${entry}/ns/pid`) === nsLink) pids.push(Number(entry));
    } catch {
      // exited while we looked, or not ours to read
    }
  }
  return pids;
}

/** The systemd child of the nspawn process, once its private bus socket exists. */
async function findContainerSystemd(
  nspawnPid: number,
  deadline: number,
  logPath: string,
): Promise<number> {
  for (;;) {
    const r = await run('pgrep', ['-P', String(nspawnPid), '-x', 'systemd']);
    const pid = Number(r.stdout.trim().split('\n')[0]);
    if (r.code === 0 && pid > 0 && existsSync(`/proc/${pid}/root/run/systemd/private`)) return pid;
    if (!alive(nspawnPid)) {
      throw new Error(`systemd-nspawn exited during boot; log ${logPath}:\n${tail(logPath)}`);
    }
    if (Date.now() > deadline) {
      throw new Error(
        `the node's systemd did not come up in time; log ${logPath}:\n${tail(logPath)}`,
      );
    }
    await sleep(50);
  }
}

function tail(path: string, lines = 40): string {
  try {
    return readFileSync(path, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

function checkOptions(opts: BootOptions): void {
  if (opts.disableCloudInit === true && opts.seed !== undefined) {
    throw new Error('bootNode: seed is given but disableCloudInit is true; drop one of them');
  }
  if (!/^[a-z0-9][a-z0-9-]{0,63}$/.test(opts.name)) {
    throw new Error(
      `bootNode: name '${opts.name}' must match [a-z0-9][a-z0-9-]{0,63} (it is the hostname)`,
    );
  }
  if (
    !existsSync(join(opts.root, 'sbin', 'init')) &&
    !existsSync(join(opts.root, 'lib', 'systemd', 'systemd'))
  ) {
    throw new Error(
      `bootNode: root '${opts.root}' has no systemd; use nodeRoot() from test/support/tools.ts`,
    );
  }
  for (const [i, b] of (opts.binds ?? []).entries()) {
    for (const [field, p] of [
      ['src', b.src],
      ['dst', b.dst],
    ] as const) {
      if (!p.startsWith('/') || p.includes(':')) {
        throw new Error(
          `bootNode: binds[${i}].${field} '${p}' must be an absolute path without ':'`,
        );
      }
    }
    if (!existsSync(b.src)) throw new Error(`bootNode: binds[${i}].src '${b.src}' does not exist`);
  }
}

/** systemd-nspawn's exit status when the machine's systemd rebooted (systemd-nspawn(1)). */
export const NSPAWN_REBOOT_STATUS = 133;

/** One run of systemd-nspawn: one boot of the machine. */
interface Launch {
  pid: number;
  exited: Promise<number | null>;
}

interface Booted extends Launch {
  systemdPid: number;
  pidNs: string;
}

/**
 * The runs of systemd-nspawn for one machine: the first boot, and a new run each time the
 * machine reboots (exit 133) until stop().
 */
class Boots {
  count = 0;
  private booted: Booted | undefined;
  private launched: Launch | undefined;
  private restarting: Promise<void> | undefined;
  private stopping = false;
  private failure: Error | undefined;

  constructor(
    private readonly args: readonly string[],
    private readonly env: NodeJS.ProcessEnv,
    private readonly logPath: string,
    private readonly startTimeoutMs: number,
  ) {}

  current(): Booted {
    if (this.booted) return this.booted;
    throw new Error('the node has not booted');
  }

  async start(): Promise<void> {
    const logFd = openSync(this.logPath, 'a');
    // detached: setsid, so the node is its own process group (and never gets our tty's signals)
    const child = spawn('systemd-nspawn', this.args, {
      detached: true,
      stdio: ['ignore', logFd, logFd],
      env: this.env,
    });
    closeSync(logFd);
    const pid = child.pid;
    if (pid === undefined) {
      throw new Error(
        'bootNode: systemd-nspawn did not start (is systemd-container installed? run hack/deps.sh)',
      );
    }
    live.add(pid);
    installExitHook();
    const exited = new Promise<number | null>((resolve) => {
      child.once('exit', (code) => {
        live.delete(pid);
        resolve(code);
      });
    });
    child.unref();
    this.launched = { pid, exited };
    const deadline = Date.now() + this.startTimeoutMs;
    const systemdPid = await findContainerSystemd(pid, deadline, this.logPath);
    this.booted = { pid, exited, systemdPid, pidNs: readlinkSync(`/proc/${systemdPid}/ns/pid`) };
    this.count += 1;
    void exited.then((code) => {
      this.exitedWith(code);
    });
  }

  /**
   * A reboot starts the next run; any other exit (or one after stop()) ends the machine. The
   * ended run stays current until the next is up: its PIDs are gone, so exec fails meanwhile.
   */
  private exitedWith(code: number | null): void {
    if (this.stopping || code !== NSPAWN_REBOOT_STATUS) return;
    this.restarting = this.start().catch((error: unknown) => {
      this.failure = error instanceof Error ? error : new Error(String(error));
    });
  }

  async waitBoot(after: number, timeoutMs = 120_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.count <= after) {
      if (this.failure) throw this.failure;
      if (this.stopping) throw new Error('the node was stopped');
      if (Date.now() > deadline) {
        throw new Error(
          `no boot after boot ${String(after)} within ${String(timeoutMs)} ms; log ${this.logPath}:\n${tail(this.logPath)}`,
        );
      }
      await sleep(50);
    }
  }

  /** SIGTERM to nspawn (the node halts), wait; SIGKILL the group if it does not. */
  async stop(timeoutMs: number): Promise<void> {
    this.stopping = true;
    await this.restarting;
    const run = this.launched;
    if (!run) return;
    if (alive(run.pid)) {
      try {
        process.kill(run.pid, 'SIGTERM'); // nspawn forwards it: the node's systemd halts cleanly
      } catch {
        // already gone
      }
      const killed = await Promise.race([
        run.exited.then(() => false),
        sleep(timeoutMs).then(() => true),
      ]);
      if (killed) {
        killTree(run.pid);
        await run.exited;
      }
    }
    live.delete(run.pid);
  }
}

/** Boots a node and returns once its systemd answers on its bus (not yet fully booted). */
export async function bootNode(opts: BootOptions): Promise<Node> {
  checkOptions(opts);
  const work = await mkdtemp(join(tmpdir(), `oscar-node-${opts.name}-`));
  const logPath = join(work, 'nspawn.log');
  const args = [
    '-D',
    opts.root,
    '-b',
    '-M',
    opts.name,
    '--register=no', // no machined here
    '--keep-unit', // without it: "Failed to open system bus"
    '--console=passive',
    `--setenv=${markerVar}=${opts.name}`, // in the node's PID 1 environment: finds orphans by name
  ];
  // writes go to a tmpfs; the cached root stays pristine
  if (opts.volatile !== false) args.push('--volatile=overlay');
  if (opts.privateNetwork === true) args.push('--private-network');
  if (opts.networkNamespacePath !== undefined) {
    args.push(`--network-namespace-path=${opts.networkNamespacePath}`);
  }
  if (opts.capabilities?.length) args.push(`--capability=${opts.capabilities.join(',')}`);
  if (opts.seed !== undefined) {
    const seedDir = join(work, 'seed');
    await mkdir(seedDir);
    await writeFile(join(seedDir, 'user-data'), opts.seed.userData);
    await writeFile(
      join(seedDir, 'meta-data'),
      opts.seed.metaData ?? `instance-id: ${opts.name}\nlocal-hostname: ${opts.name}\n`,
    );
    args.push(`--bind-ro=${seedDir}:/var/lib/cloud/seed/nocloud`);
  }
  if (opts.disableCloudInit === true) {
    const marker = join(work, 'cloud-init.disabled');
    await writeFile(marker, '');
    args.push(`--bind-ro=${marker}:/etc/cloud/cloud-init.disabled`);
  }
  for (const b of opts.binds ?? [])
    args.push(`${b.ro === false ? '--bind' : '--bind-ro'}=${b.src}:${b.dst}`);

  const env =
    opts.writableProcSys === true
      ? { ...process.env, SYSTEMD_NSPAWN_API_VFS_WRITABLE: '1' }
      : process.env;
  const boot = new Boots(args, env, logPath, opts.startTimeoutMs ?? 60_000);
  let stopped = false;
  const stop = async (timeoutMs = 30_000): Promise<void> => {
    if (stopped) return;
    stopped = true;
    await boot.stop(timeoutMs);
    await rm(work, { recursive: true, force: true });
  };
  try {
    await boot.start();
  } catch (err) {
    await stop(2_000); // never leave a half-booted node behind (early boot ignores SIGTERM)
    throw err;
  }
  const systemdPid = (): number => boot.current().systemdPid;

  const exec = (cmd: readonly string[], o: ExecOptions = {}): Promise<RunResult> => {
    if (cmd.length === 0) return Promise.reject(new Error('exec: empty command'));
    return run('nsenter', ['-t', String(systemdPid()), '-a', '--', ...cmd], {
      env: { ...nodeEnv, ...o.env },
      input: o.input,
      timeoutMs: o.timeoutMs ?? 120_000,
    });
  };
  const execOk = async (cmd: readonly string[], o: ExecOptions = {}): Promise<RunResult> => {
    const r = await exec(cmd, o);
    if (r.code !== 0) {
      throw new Error(
        `in node ${opts.name}: ${cmd.join(' ')} exited ${r.code ?? r.signal ?? '?'}\n${r.stdout}${r.stderr}`,
      );
    }
    return r;
  };
  const systemctl = (...a: string[]): Promise<RunResult> => exec(['systemctl', '--no-pager', ...a]);
  const journal = async (unit?: string): Promise<string> => {
    const r = await exec([
      'journalctl',
      '--no-pager',
      '-b',
      '-o',
      'short-monotonic',
      ...(unit ? ['-u', unit] : []),
    ]);
    return r.stdout + r.stderr;
  };
  const failedReport = async (): Promise<string> => {
    const failed = await systemctl('--failed', '--no-legend', '--plain');
    const units = failed.stdout
      .split('\n')
      .map((l) => l.trim().split(/\s+/)[0] ?? '')
      .filter((u) => u !== '');
    const journals = await Promise.all(
      units.map(async (u) => `--- journal of ${u}\n${await journal(u)}`),
    );
    return `failed units:\n${failed.stdout}${journals.join('\n')}`;
  };

  return {
    name: opts.name,
    get pid() {
      return boot.current().pid;
    },
    get systemdPid() {
      return systemdPid();
    },
    get boots() {
      return boot.count;
    },
    waitBoot: (after, timeoutMs) => boot.waitBoot(after, timeoutMs),
    logPath,
    hostPath: (p) => `/proc/${String(systemdPid())}/root${p.startsWith('/') ? p : `/${p}`}`,
    exec,
    execOk,
    systemctl,
    show: async (unit, props) => {
      const r = await systemctl('show', unit, ...props.map((p) => `--property=${p}`));
      if (r.code !== 0) throw new Error(`systemctl show ${unit} failed: ${r.stderr}`);
      const out: Record<string, string> = {};
      for (const line of r.stdout.split('\n')) {
        const i = line.indexOf('=');
        if (i > 0) out[line.slice(0, i)] = line.slice(i + 1);
      }
      return out;
    },
    journal,
    waitRunning: async (timeoutMs = 120_000) => {
      const r = await exec(['systemctl', 'is-system-running', '--wait'], { timeoutMs });
      const state = r.stdout.trim();
      if (state === 'running') return state;
      throw new Error(
        `node ${opts.name} settled in state '${state || r.stderr.trim()}'\n${await failedReport()}`,
      );
    },
    waitCloudInit: async (timeoutMs = 180_000) => {
      const r = await exec(['cloud-init', 'status', '--wait', '--long'], { timeoutMs });
      // --wait prints progress dots before the report
      const text = r.stdout.replace(/^\.+\n?/, '');
      if (r.code === 0 && /^status: done$/m.test(text)) return text;
      const log = await exec(['cat', '/var/log/cloud-init.log']);
      throw new Error(
        `cloud-init in node ${opts.name} did not finish: exit ${r.code ?? r.signal ?? '?'}\n${text}${r.stderr}\n` +
          `--- /var/log/cloud-init.log (tail)\n${log.stdout.split('\n').slice(-60).join('\n')}`,
      );
    },
    processes: () => pidsInNamespace(boot.current().pidNs),
    stop,
  };
}

/**
 * Bind of this process's Node.js binary into the node (read-only, default /usr/local/bin/node), so
 * oscar's own code can run inside: it links only against glibc/libstdc++, which the bookworm root
 * has. Bind the code itself separately (e.g. { src: repoRoot, dst: '/opt/oscar' }).
 */
export function nodeRuntimeBind(dst = '/usr/local/bin/node'): Bind {
  return { src: process.execPath, dst, ro: true };
}

/** A machine name unlikely to collide with another test process's node: PREFIX-<pid>-<random>. */
export function uniqueNodeName(prefix: string): string {
  const suffix = `${process.pid.toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  return `${prefix
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, '-')
    .slice(0, 40)}-${suffix}`;
}

/** Boots, runs `fn`, and always stops the node (also when `fn` or the boot throws). */
export async function withNode<T>(opts: BootOptions, fn: (node: Node) => Promise<T>): Promise<T> {
  const node = await bootNode(opts);
  try {
    return await fn(node);
  } finally {
    await node.stop();
  }
}

/** Reads a file from inside a running node via its host path. */
export function readNodeFile(node: Node, pathInNode: string): Promise<string> {
  return readFile(node.hostPath(pathInNode), 'utf8');
}

/**
 * A root that keeps what a node writes across its boots: an overlay of `lower` (never modified)
 * with its upper layer in a temp directory, mounted on the host for the test's lifetime. Boot it
 * with volatile: false; stop and boot again for a reboot. cleanup() unmounts and removes it.
 */
export async function persistentRoot(
  lower: string,
): Promise<{ root: string; cleanup: () => Promise<void> }> {
  const work = await mkdtemp(join(tmpdir(), 'oscar-root-'));
  for (const d of ['upper', 'work', 'merged']) await mkdir(join(work, d));
  const root = join(work, 'merged');
  const r = await run('mount', [
    '-t',
    'overlay',
    'overlay',
    '-o',
    `lowerdir=${lower},upperdir=${join(work, 'upper')},workdir=${join(work, 'work')}`,
    root,
  ]);
  if (r.code !== 0) {
    await rm(work, { recursive: true, force: true });
    throw new Error(`mounting an overlay of ${lower} failed: ${r.stderr}`);
  }
  return {
    root,
    cleanup: async () => {
      await run('umount', ['-l', root]);
      await rm(work, { recursive: true, force: true });
    },
  };
}
