/**
 * oscar's bootstrap additions: what turns a blank machine into a node that follows its reconcile
 * OSC, laid over the machine's (substituted, resolved) provision config before it is rendered, so
 * cloud-config, Ignition and the script all carry them as ordinary files and units:
 *
 * - /etc/oscar/ca.crt — the API server's CA;
 * - /etc/oscar/bootstrap-kubeconfig (0600) — the API server URL, that CA and the machine's own
 *   bootstrap token;
 * - /opt/oscar/bin/oscar-agent-install — a POSIX sh script that needs curl or wget and sha256sum,
 *   with the agent's URL and sha256 in it: fetch with retries and backoff, refuse a wrong sha256,
 *   install only once checked; a no-op when the installed agent already has the sha256;
 * - oscar-agent-install.service (oneshot, after network-online) and oscar-agent.service, which
 *   runs the agent in grant mode (`--osc`) for this machine's name, namespace and reconcile OSC:
 *   the rollout controller grants a joining node the stable revision at once, outside the waves,
 *   so a pool booting together is not paced, and later changes arrive through grants (rollouts,
 *   Cluster API's in-place update).
 * Every value written into them is checked to need no quoting.
 *
 * Pure: the controller, the CLI and the benchmarks call it with what they know.
 */
import { fieldError, type FieldError } from '../../api/field-error.js';
import { compare } from '../../api/resolve.js';
import type { ResolvedConfig, ResolvedFile, ResolvedUnit } from '../../api/resolved.js';

export const CA_PATH = '/etc/oscar/ca.crt';
export const BOOTSTRAP_KUBECONFIG_PATH = '/etc/oscar/bootstrap-kubeconfig';
export const AGENT_INSTALL_PATH = '/opt/oscar/bin/oscar-agent-install';
export const AGENT_BINARY_PATH = '/opt/oscar/bin/oscar-agent';
export const AGENT_INSTALL_UNIT = 'oscar-agent-install.service';
export const AGENT_UNIT = 'oscar-agent.service';

export interface BootstrapInputs {
  machine: { name: string; namespace: string };
  /** The OscarConfig's metadata.uid: the agent asks for a certificate bound to it (docs/identity.md). */
  configUid: string;
  apiServer: { url: string; caPem: string };
  token: { id: string; secret: string };
  /** The reconcile OSC whose grants the agent follows (in the machine's namespace). */
  reconcileOsc: string;
  agent: { url: string; sha256: string };
}

/** Characters every value written unquoted into the script, the kubeconfig and a unit may hold. */
const PLAIN = /^[A-Za-z0-9._:/@%+=,~-]+$/;

// Every byte here is in every machine's user data (budget: 4 KiB for all the additions), so the
// script and units are terse; the comments that explain them are these.
// The script: curl or wget (chosen once), 8 attempts 1, 4, 9 … 49 s apart (~2.5 min); a wrong
// sha256 is refused and the download removed; the agent is moved into place only once checked,
// so a rerun (the unit restarted, a reboot) finds it and does nothing.
function installScript(url: string, sha256: string): string {
  return `#!/bin/sh
set -eu
url=${url}
sum=${sha256}
dest=${AGENT_BINARY_PATH}
ok() { echo "$sum  $1" | sha256sum -c --status; }
die() { echo "oscar: $*" >&2; exit 1; }
[ -x "$dest" ] && ok "$dest" && exit 0
if command -v curl >/dev/null; then get="curl -fsSL --connect-timeout 10 -o"
elif command -v wget >/dev/null; then get="wget -q -T 30 -O"
else die "no curl, no wget"; fi
n=1
until $get "$dest.new" "$url"; do
  [ "$n" -lt 8 ] || die "cannot fetch $url"
  sleep $((n * n))
  n=$((n + 1))
done
ok "$dest.new" || { rm -f "$dest.new"; die "$url is not sha256 $sum"; }
chmod 755 "$dest.new"
mv -f "$dest.new" "$dest"
`;
}

const INSTALL_UNIT = `[Unit]
Description=oscar agent install
Wants=network-online.target
After=network-online.target
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=${AGENT_INSTALL_PATH}
[Install]
WantedBy=multi-user.target
`;

/**
 * The agent unit's memory limit (MemoryMax=): the agent's peak on
 * a node is ~80 MiB and every decode of its input is bounded (docs/identity.md, "Decode
 * limits"); the package manager runs in its cgroup too, hence the margin.
 */
export const AGENT_MEMORY_MAX = 512 * 1024 * 1024;

/**
 * glibc's malloc settings for the agent, read once when the process starts (so the unit sets
 * them; docs/performance.md, "The quiet agent's malloc"): one arena for every thread instead of
 * one per thread (~2 MB of half-empty arenas), and blocks of 32 KiB and more mapped on their own,
 * so those V8's parser takes while the executable compiles its 1 MB script at start go back to
 * the system when freed instead of leaving a 3–8 MB hole in the heap that glibc never returns.
 */
export const AGENT_MALLOC_ENV: Readonly<Record<string, string>> = {
  MALLOC_ARENA_MAX: '1',
  MALLOC_MMAP_THRESHOLD_: '32768',
};

const agentEnvironment = Object.entries(AGENT_MALLOC_ENV)
  .map(([name, value]) => `${name}=${value}`)
  .join(' ');

function agentUnit(inputs: BootstrapInputs): string {
  return `[Unit]
Description=oscar agent
Requires=${AGENT_INSTALL_UNIT}
After=${AGENT_INSTALL_UNIT}
[Service]
ExecStart=${AGENT_BINARY_PATH} agent --bootstrap-kubeconfig ${BOOTSTRAP_KUBECONFIG_PATH} --namespace ${inputs.machine.namespace} --osc ${inputs.reconcileOsc} --node ${inputs.machine.name} --config-uid ${inputs.configUid}
ExecReload=/bin/kill -HUP $MAINPID
Environment=${agentEnvironment}
Restart=always
RestartSec=5
TimeoutStopSec=20
MemoryMax=${String(AGENT_MEMORY_MAX / 1024 / 1024)}M
[Install]
WantedBy=multi-user.target
`;
}

function kubeconfig(inputs: BootstrapInputs): string {
  return `apiVersion: v1
kind: Config
clusters:
- name: oscar
  cluster: {server: "${inputs.apiServer.url}", certificate-authority: ${CA_PATH}}
users:
- name: bootstrap
  user: {token: ${inputs.token.id}.${inputs.token.secret}}
contexts:
- name: oscar
  context: {cluster: oscar, user: bootstrap}
current-context: oscar
`;
}

function file(path: string, mode: number, content: string): ResolvedFile {
  return { path, mode, user: 'root', group: 'root', content: Buffer.from(content, 'utf8') };
}

function unit(name: string, content: string): ResolvedUnit {
  return {
    name,
    enable: true,
    mask: false,
    command: 'start',
    onChange: 'none',
    content,
    dropIns: [],
    filePaths: [],
  };
}

/** The files and units, or what is wrong with the inputs (never rendered then). */
export function bootstrapAdditions(
  inputs: BootstrapInputs,
): { files: ResolvedFile[]; units: ResolvedUnit[] } | { errors: FieldError[] } {
  const errors: FieldError[] = [];
  const plain: [string, string][] = [
    ['machine.name', inputs.machine.name],
    ['machine.namespace', inputs.machine.namespace],
    ['reconcileOsc', inputs.reconcileOsc],
    ['configUid', inputs.configUid],
    ['agent.url', inputs.agent.url],
    ['apiServer.url', inputs.apiServer.url],
    ['token.id', inputs.token.id],
    ['token.secret', inputs.token.secret],
  ];
  for (const [what, value] of plain) {
    if (!PLAIN.test(value)) {
      errors.push(fieldError(what, `${JSON.stringify(value)} holds characters that need quoting`));
    }
  }
  if (!/^https?:\/\//.test(inputs.agent.url)) {
    errors.push(fieldError('agent.url', 'must be an http:// or https:// URL'));
  }
  if (!/^[0-9a-f]{64}$/.test(inputs.agent.sha256)) {
    errors.push(fieldError('agent.sha256', 'must be 64 lowercase hex digits'));
  }
  if (!inputs.apiServer.caPem.includes('-----BEGIN CERTIFICATE-----')) {
    errors.push(fieldError('apiServer.caPem', 'must be a PEM certificate'));
  }
  if (errors.length > 0) return { errors };
  return {
    files: [
      file(CA_PATH, 0o644, inputs.apiServer.caPem),
      file(BOOTSTRAP_KUBECONFIG_PATH, 0o600, kubeconfig(inputs)),
      file(AGENT_INSTALL_PATH, 0o755, installScript(inputs.agent.url, inputs.agent.sha256)),
    ],
    units: [unit(AGENT_INSTALL_UNIT, INSTALL_UNIT), unit(AGENT_UNIT, agentUnit(inputs))],
  };
}

/**
 * The provision config with the additions. A path or unit the provision OSC declares itself is
 * refused rather than overwritten: one of the two would silently lose.
 */
export function withBootstrap(
  config: ResolvedConfig,
  additions: { files: ResolvedFile[]; units: ResolvedUnit[] },
): ResolvedConfig | { errors: FieldError[] } {
  const errors: FieldError[] = [];
  const paths = new Set(additions.files.map((f) => f.path));
  const names = new Set(additions.units.map((u) => u.name));
  config.files.forEach((f) => {
    if (paths.has(f.path)) {
      errors.push(
        fieldError(
          'spec.files',
          `${f.path} is written by oscar's bootstrap additions; remove it from the provision OSC`,
        ),
      );
    }
  });
  config.units.forEach((u) => {
    if (names.has(u.name)) {
      errors.push(
        fieldError(
          'spec.units',
          `${u.name} is oscar's own bootstrap unit; remove it from the provision OSC`,
        ),
      );
    }
  });
  if (errors.length > 0) return { errors };
  return {
    ...config,
    files: [...config.files, ...additions.files].sort((a, b) => compare(a.path, b.path)),
    units: [...config.units, ...additions.units].sort((a, b) => compare(a.name, b.name)),
  };
}

/** The install script, for tests that run it and shellcheck it. */
export const agentInstallScript = installScript;
