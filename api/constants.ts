/**
 * oscar's API names, enums and limits: plain constants, without the schema library, so that a
 * module needing only these (the agent: the canonical form, the Secret contract, its node
 * report) does not load typebox and the whole schema. api/schema.ts re-exports them.
 */
import { UNIT_TYPES } from './systemd/unit-name.js';

export const GROUP = 'oscar.dev';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;
export const OSC_KIND = 'OperatingSystemConfig';
export const OSC_NODE_KIND = 'OperatingSystemConfigNode';

/** Limits shared by the CRD (so CEL cost estimates are bounded) and the deep validation. */
export const LIMITS = {
  units: 256,
  files: 1024,
  dropIns: 32,
  filePaths: 64,
  packages: 512,
  pathLength: 4096,
  unitNameLength: 255,
  /** A unit or drop-in body; systemd itself refuses unit files above a few MiB. */
  unitContentBytes: 256 * 1024,
  /** One file's inline data as written in the OSC (the base64 text when encoded). */
  inlineDataBytes: 1024 * 1024,
  /** A whole OSC document: the API server refuses requests above ~1.5 MiB (etcd's limit). */
  documentBytes: 1536 * 1024,
  /** A Kubernetes Secret's data limit: the rendered output must fit in it. */
  secretBytes: 1024 * 1024,
  /** Cloud user-data budgets are this small (AWS: 16 KiB); provision output above it warns. */
  provisionUserDataBytes: 16 * 1024,
} as const;

/**
 * What one node's agent accepts in a desired state, above one OSC's LIMITS: a reconcile Secret is
 * bounded by its bytes (1 MiB of gzip, 32 MiB decoded), not by the CRD's item counts, which exist
 * to keep the CRD's CEL cost estimate in budget (the path rule over 10,240 files estimated 8.4×
 * over it) and are the same for every OSC. 10,000 small files (kubelet, CNI, monitoring agents)
 * fit a Secret (144 KiB of gzip in hack/bench/drift.ts) and are measured there
 * (docs/performance.md, drift).
 */
export const NODE_LIMITS = {
  files: 16 * 1024,
} as const;

/**
 * The agent's state directory on a node (journal, last-applied config, lock): the agent's own,
 * so no declared file may be written in it.
 */
export const AGENT_STATE_DIR = '/var/lib/oscar';

/** The longest file name (one path component) Linux file systems take, in bytes: NAME_MAX. */
export const NAME_MAX_BYTES = 255;

/**
 * Patterns of fields whose syntax a regular expression says fully: the CRD's schema and the checks
 * of a resolved config (api/validate-config.ts) use these same strings.
 */
export const PATTERNS = {
  type: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$',
  /** "user:group" or "user", names or numeric ids. */
  owner: '^[A-Za-z0-9_][A-Za-z0-9_.-]*[$]?(:[A-Za-z0-9_][A-Za-z0-9_.-]*[$]?)?$',
  /**
   * Not ending in "-": apt-get reads "NAME-" as "remove NAME" (`apt-get install -y openssh-server-`
   * removes sshd), so such a name would make an install a removal. A trailing "+" is apt's
   * "install" and real names end in it ("g++"), so it stays.
   */
  packageName: '^[A-Za-z0-9]([A-Za-z0-9+._-]*[A-Za-z0-9+._])?$',
  packageVersion: '^[A-Za-z0-9.+~:_-]+$',
} as const;

/** What PATTERNS.packageName means, for messages (the OSC's checks and a resolved config's). */
export const PACKAGE_NAME_HINT =
  'must be a package name such as "containerd" or "kubelet": letters, digits, "+", ".", "_" and "-", not starting with "-" or ending with "-" (apt-get reads "NAME-" as "remove NAME")';

/** Lengths the schema sets on fields other than LIMITS' (characters). */
export const FIELD_LENGTHS = {
  type: 63,
  owner: 130,
  packageName: 253,
  packageVersion: 253,
} as const;

/** The unit types systemd knows, from oscar's systemd module. */
export const UNIT_SUFFIXES = UNIT_TYPES;

export const PURPOSES = ['provision', 'reconcile'] as const;
export const FORMATS = ['cloud-config', 'ignition', 'script'] as const;
export const UNIT_COMMANDS = ['start', 'restart', 'stop'] as const;
export const ON_CHANGE = ['restart', 'reload', 'none', 'stopStart', 'reboot'] as const;
/** A file's own reaction to a change: none (the units listing it in filePaths react) or a reboot. */
export const FILE_ON_CHANGE = ['none', 'reboot'] as const;
/**
 * How much a change disturbs a node, least first (docs/rollouts.md#disruption-levels): None (files
 * only), Restart (units restarted or reloaded, packages installed), Drain (the node must be emptied
 * first: the container runtime restarts), Reboot.
 */
export const DISRUPTION_LEVELS = ['None', 'Restart', 'Drain', 'Reboot'] as const;
export const ENCODINGS = ['', 'b64', 'gzip+b64'] as const;
export const CRI_NAMES = ['containerd'] as const;
export const CGROUP_DRIVERS = ['systemd', 'cgroupfs'] as const;
/**
 * What the agent does when something oscar wrote on a node no longer matches what it applied:
 * report it (the default), put it back, or leave it alone (a file an operator tunes by hand).
 */
export const DRIFT_POLICIES = ['Report', 'Revert', 'Ignore'] as const;
export const DEFAULT_DRIFT_POLICY = 'Report';
/** The drifted paths and units a node report lists by name (the count covers the rest). */
export const DRIFT_REPORT_ITEMS = 16;

/** Rollouts (docs/rollouts.md). */
export const NON_DISRUPTIVE = ['Gate', 'Immediate'] as const;
export const HTTP_SCHEMES = ['HTTP', 'HTTPS'] as const;
/** What the controller does when a node's drain outlasts spec.rollout.drain.timeoutSeconds. */
export const DRAIN_TIMEOUT_ACTIONS = ['Wait', 'Skip'] as const;
export const DEFAULT_DRAIN_TIMEOUT_SECONDS = 600;
/** Where a node's drain stands (status.rollout.drains[].phase). */
export const DRAIN_PHASES = ['Draining', 'Drained', 'Blocked', 'Skipped'] as const;
/** What a node's agent answers to its grant (status.revision.phase). */
export const GRANT_PHASES = [
  'Applying',
  'Verifying',
  'Confirmed',
  'RollingBack',
  'RolledBack',
  'Failed',
] as const;
/**
 * A try rolled back after its reboot whose reboot back did not happen, or whose previous revision
 * failed its proof in the boot that brought it back (status.revision.reason with phase Failed,
 * and the node's Degraded reason): docs/rollouts.md#reboot-inside-try-mode.
 */
export const ROLLBACK_FAILED_REASONS = ['RollbackRebootFailed', 'RollbackUnhealthy'] as const;
export type RollbackFailedReason = (typeof ROLLBACK_FAILED_REASONS)[number];
/** How the agent follows its configuration (status.source). */
export const NODE_SOURCES = ['Grant', 'Secret', 'File'] as const;
export const ROLLOUT_PHASES = ['Progressing', 'Paused', 'Undoing', 'Complete'] as const;
export const PAUSE_REASONS = ['Manual', 'Canary', 'FailureThreshold'] as const;
export const ROLLOUT_LIMITS = {
  healthChecks: 16,
  commandArgs: 64,
  /** Revision Secrets kept per OSC: fixed, so RBAC can name them (docs/rollouts.md). */
  revisionSlots: 5,
} as const;

export type Purpose = (typeof PURPOSES)[number];
export type Format = (typeof FORMATS)[number];
export type UnitCommand = (typeof UNIT_COMMANDS)[number];
export type OnChange = (typeof ON_CHANGE)[number];
export type FileOnChange = (typeof FILE_ON_CHANGE)[number];
export type DisruptionLevel = (typeof DISRUPTION_LEVELS)[number];
export type Encoding = (typeof ENCODINGS)[number];
export type NonDisruptive = (typeof NON_DISRUPTIVE)[number];
export type DrainTimeoutAction = (typeof DRAIN_TIMEOUT_ACTIONS)[number];
export type DrainPhase = (typeof DRAIN_PHASES)[number];
export type GrantPhase = (typeof GRANT_PHASES)[number];
export type NodeSource = (typeof NODE_SOURCES)[number];
export type RolloutPhase = (typeof ROLLOUT_PHASES)[number];
export type PauseReason = (typeof PAUSE_REASONS)[number];
export type DriftPolicy = (typeof DRIFT_POLICIES)[number];

/**
 * How spec.packages are installed, by the rendered provision script and by the agent alike, so a
 * package arrives the same way at first boot and in place. --force-confold: a config file oscar
 * wrote is kept when a package ships one too.
 */
export const PACKAGE_COMMANDS = {
  aptEnv: { DEBIAN_FRONTEND: 'noninteractive' },
  aptRefresh: ['apt-get', 'update', '-q'],
  /**
   * APT::Cmd::Pattern-Only: a name no package has is an error, never a regular expression or glob
   * (apt-get's default would install every package matching "a.b" anywhere in its name); the
   * setting `apt` itself uses, ignored by an apt too old to know it.
   */
  aptInstall: [
    'apt-get',
    'install',
    '-y',
    '-q',
    '-o',
    'Dpkg::Options::=--force-confold',
    '-o',
    'APT::Cmd::Pattern-Only=true',
  ],
  zypperInstall: ['zypper', '--non-interactive', 'install'],
} as const;
