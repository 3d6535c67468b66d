/**
 * The single definition of oscar's API (group oscar.dev, version v1alpha1).
 *
 * From these typebox schemas come: the TypeScript types (Static<>), the CRD manifests
 * (api/crd/crd.ts, via hack/gen-crd.ts) and the runtime validator (api/validate.ts). Everything
 * here must stay a *structural* OpenAPI schema the API server accepts: no unions, no
 * `additionalProperties: false`, a `type` on every node, a description on every field.
 *
 * Defaults are deliberately NOT in the schema: the API server would then store objects that
 * differ from what the operator wrote. oscar applies them when it resolves (api/defaults.ts).
 */
import { Type, type Static } from 'typebox';
import { noPackageManager, PACKAGES_CEL_RULE, WITHOUT_PACKAGE_MANAGER } from './os-facts.js';

export * from './constants.js';
import {
  API_VERSION,
  OSC_KIND,
  OSC_NODE_KIND,
  LIMITS,
  UNIT_SUFFIXES,
  PURPOSES,
  FORMATS,
  UNIT_COMMANDS,
  ON_CHANGE,
  FILE_ON_CHANGE,
  DISRUPTION_LEVELS,
  DRAIN_TIMEOUT_ACTIONS,
  DRAIN_PHASES,
  ENCODINGS,
  CRI_NAMES,
  CGROUP_DRIVERS,
  NON_DISRUPTIVE,
  HTTP_SCHEMES,
  GRANT_PHASES,
  NODE_SOURCES,
  ROLLOUT_PHASES,
  PAUSE_REASONS,
  ROLLOUT_LIMITS,
  FIELD_LENGTHS,
  PATTERNS,
  DRIFT_POLICIES,
  DRIFT_REPORT_ITEMS,
} from './constants.js';

interface CelRule {
  rule: string;
  message: string;
  reason?: string;
  fieldPath?: string;
}

interface KubeOptions {
  description: string;
  'x-kubernetes-validations'?: CelRule[];
  'x-kubernetes-list-type'?: 'atomic' | 'set' | 'map';
  'x-kubernetes-list-map-keys'?: string[];
  'x-kubernetes-preserve-unknown-fields'?: boolean;
  [key: string]: unknown;
}

/** A string enum as a structural schema (typebox's Enum has no `type`, which CRDs require). */
function StringEnum<const T extends readonly string[]>(values: T, options: KubeOptions) {
  return Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options });
}

const DriftPolicy = (what: string, inherits: string) =>
  StringEnum(DRIFT_POLICIES, {
    description: `What the agent does when ${what} no longer matches what it applied: "Report" (a Drifted condition, an Event and a metric; nothing is changed), "Revert" (put it back through the normal plan, restarting what a change would restart; rate-limited) or "Ignore" (neither; the next change of its declaration still writes it). ${inherits}`,
  });

// systemd allows a backslash in unit names (escapes such as \x2d), so the class includes it.
const UNIT_NAME_PATTERN = `^[A-Za-z0-9:_.\\\\-]+(@[A-Za-z0-9:_.\\\\-]*)?\\.(${UNIT_SUFFIXES.join('|')})$`;

const ObjectKeyRef = (what: 'Secret' | 'ConfigMap') =>
  Type.Object(
    {
      name: Type.String({
        description: `Name of the ${what} in the OperatingSystemConfig's namespace.`,
        minLength: 1,
        maxLength: 253,
      }),
      key: Type.String({
        description: `Key in the ${what}'s data whose bytes become the file's content.`,
        minLength: 1,
        maxLength: 253,
      }),
    },
    {
      description: `The file's content comes from a key of a ${what} in the same namespace; oscar resolves it when it renders and re-renders when it changes.`,
    },
  );

export const InlineContent = Type.Object(
  {
    encoding: Type.Optional(
      StringEnum(ENCODINGS, {
        description:
          'How `data` is encoded: "" (plain text, the default), "b64" (base64) or "gzip+b64" (gzip, then base64).',
      }),
    ),
    data: Type.String({
      description: 'The file content, encoded as `encoding` says.',
      maxLength: LIMITS.inlineDataBytes,
    }),
  },
  { description: 'The file content, written directly in the OperatingSystemConfig.' },
);

export const FileContent = Type.Object(
  {
    inline: Type.Optional(InlineContent),
    secretRef: Type.Optional(ObjectKeyRef('Secret')),
    configMapRef: Type.Optional(ObjectKeyRef('ConfigMap')),
  },
  {
    description:
      'Where the file content comes from: exactly one of inline, secretRef, configMapRef.',
    'x-kubernetes-validations': [
      {
        rule: '[has(self.inline), has(self.secretRef), has(self.configMapRef)].filter(x, x).size() == 1',
        message: 'set exactly one of content.inline, content.secretRef, content.configMapRef',
      },
    ],
  },
);

export const File = Type.Object(
  {
    path: Type.String({
      description:
        'Absolute, normalised path of the file on the node (no "..", no "//", no trailing "/").',
      minLength: 2,
      maxLength: LIMITS.pathLength,
      pattern: '^/',
      'x-kubernetes-validations': [
        {
          rule: "!self.matches('//|/[.][.]?(/|$)|/$')",
          message:
            'path must be absolute and normalised: no "//", no "." or ".." segments, no trailing "/"',
        },
      ],
    }),
    permissions: Type.Optional(
      // int-or-string so that an unquoted YAML number reaches the CEL rule below and gets the
      // octal-trap message, instead of a bare "must be of type string".
      Type.Unsafe<string>({
        description:
          'File mode as a quoted octal string such as "0644" (default "0644"). Unquoted YAML numbers are refused: YAML reads 0644 as the integer 420.',
        'x-kubernetes-int-or-string': true,
        // Value validations without a type apply to strings only; integers meet the CEL rule.
        maxLength: 5,
        pattern: '^0?[0-7]{3,4}$',
        'x-kubernetes-validations': [
          {
            rule: 'type(self) == string',
            message:
              'permissions must be a quoted octal string such as "0644": unquoted, YAML reads 0644 as the integer 420 (or 644 as decimal), which is not the mode you meant',
          },
        ],
      }),
    ),
    owner: Type.Optional(
      Type.String({
        description: 'Owner as "user:group" (names or numeric ids); default "root:root".',
        maxLength: FIELD_LENGTHS.owner,
        pattern: PATTERNS.owner,
      }),
    ),
    content: FileContent,
    driftPolicy: Type.Optional(
      DriftPolicy('this file (content, mode, owner)', 'Default: spec.driftPolicy.'),
    ),
    onChange: Type.Optional(
      StringEnum(FILE_ON_CHANGE, {
        description:
          '"reboot": a change to this file takes effect only at boot (a kernel argument, a module option): the node is drained and rebooted inside try mode (reconcile configs only). Default "none": only the units that list it in filePaths react.',
      }),
    ),
  },
  { description: 'A file oscar writes on the node.' },
);

export const DropIn = Type.Object(
  {
    name: Type.String({
      description: 'File name of the drop-in, ending in ".conf".',
      minLength: 6,
      maxLength: 255,
      pattern: '^[^/]+\\.conf$',
    }),
    content: Type.String({
      description: 'The drop-in, in systemd unit file syntax.',
      maxLength: LIMITS.unitContentBytes,
    }),
  },
  { description: 'A drop-in written to /etc/systemd/system/<unit>.d/<name>.' },
);

export const Unit = Type.Object(
  {
    name: Type.String({
      description:
        'The systemd unit name, with its type suffix: "kubelet.service", "foo@.service" (a template).',
      minLength: 3,
      maxLength: LIMITS.unitNameLength,
      pattern: UNIT_NAME_PATTERN,
    }),
    enable: Type.Optional(
      Type.Boolean({ description: 'Enable the unit (systemctl enable); default true.' }),
    ),
    mask: Type.Optional(
      Type.Boolean({
        description: 'Mask the unit so nothing can start it (content must then be empty).',
      }),
    ),
    command: Type.Optional(
      StringEnum(UNIT_COMMANDS, {
        description:
          'What to do with the unit once written: "start" (default), "restart" or "stop".',
      }),
    ),
    content: Type.Optional(
      Type.String({
        description:
          'The unit file itself. Omit it to manage an existing unit of the OS through dropIns only.',
        maxLength: LIMITS.unitContentBytes,
      }),
    ),
    dropIns: Type.Optional(
      Type.Array(DropIn, {
        description: 'Drop-ins for the unit.',
        maxItems: LIMITS.dropIns,
        'x-kubernetes-list-type': 'map',
        'x-kubernetes-list-map-keys': ['name'],
      }),
    ),
    filePaths: Type.Optional(
      Type.Array(
        Type.String({
          description: 'Path of a file declared in spec.files.',
          maxLength: LIMITS.pathLength,
        }),
        {
          description:
            'Files (paths from spec.files) whose change must restart (or reload) this unit in place.',
          maxItems: LIMITS.filePaths,
          'x-kubernetes-list-type': 'set',
        },
      ),
    ),
    onChange: Type.Optional(
      StringEnum(ON_CHANGE, {
        description:
          'How the agent applies a change to this unit or its files in place: "restart" (default), "reload" (needs ExecReload=), "stopStart", "none", or "reboot" (the change takes effect at boot: the node is drained and rebooted inside try mode; reconcile configs only).',
      }),
    ),
    driftPolicy: Type.Optional(
      DriftPolicy(
        'this unit (its unit file and drop-ins, or its state: stopped, failed, disabled, masked)',
        'Default: spec.driftPolicy.',
      ),
    ),
  },
  {
    description: 'A systemd unit oscar manages on the node.',
    'x-kubernetes-validations': [
      {
        rule: '!has(self.mask) || !self.mask || !has(self.content) || size(self.content) == 0',
        message: 'a masked unit has no content: drop content or mask',
      },
      {
        rule: "!has(self.onChange) || self.onChange != 'reboot' || ((!has(self.mask) || !self.mask) && ((has(self.content) && size(self.content) > 0) || (has(self.dropIns) && size(self.dropIns) > 0) || (has(self.filePaths) && size(self.filePaths) > 0)))",
        message:
          'onChange: reboot has nothing to reboot for: the unit is masked or has no content, dropIns or filePaths; declare what changes, or use another onChange',
        fieldPath: '.onChange',
      },
    ],
  },
);

export const Package = Type.Object(
  {
    name: Type.String({
      description: "Package name in the OS's package manager.",
      minLength: 1,
      maxLength: FIELD_LENGTHS.packageName,
      pattern: PATTERNS.packageName,
    }),
    version: Type.Optional(
      Type.String({
        description: 'Exact version to install; the newest available when omitted.',
        maxLength: FIELD_LENGTHS.packageVersion,
        pattern: PATTERNS.packageVersion,
      }),
    ),
  },
  { description: "A package installed by the OS's package manager (apt, zypper)." },
);

export const Cri = Type.Object(
  {
    name: Type.Optional(
      StringEnum(CRI_NAMES, { description: 'The container runtime; default "containerd".' }),
    ),
    cgroupDriver: Type.Optional(
      StringEnum(CGROUP_DRIVERS, {
        description: 'The runtime\'s cgroup driver; default "systemd".',
      }),
    ),
  },
  {
    description:
      "The container runtime: the renderer adds the runtime's configuration file and unit drop-in.",
  },
);

/**
 * A count of nodes or a percentage of them ("25%"), as Kubernetes' maxUnavailable. Value
 * validations without a type apply to strings only; integers meet the CEL rule.
 */
const IntOrPercent = (description: string) =>
  Type.Unsafe<number | string>({
    description,
    'x-kubernetes-int-or-string': true,
    maxLength: 4,
    pattern: '^(100|[1-9]?[0-9])%$',
    'x-kubernetes-validations': [
      {
        rule: 'type(self) == string || self >= 0',
        message: 'must be a count of nodes (0 or more) or a percentage such as "25%"',
      },
    ],
  });

export const HealthCheck = Type.Object(
  {
    name: Type.String({
      description: 'Name of the check, shown in the node report: a DNS label such as "kubelet".',
      minLength: 1,
      maxLength: 63,
      pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$',
    }),
    exec: Type.Optional(
      Type.Object(
        {
          command: Type.Array(Type.String({ description: 'An argument.', maxLength: 4096 }), {
            description:
              'The program and its arguments, run as root without a shell in the root directory; exit status 0 is healthy.',
            minItems: 1,
            maxItems: ROLLOUT_LIMITS.commandArgs,
            'x-kubernetes-list-type': 'atomic',
          }),
        },
        { description: 'Run a command on the node.' },
      ),
    ),
    httpGet: Type.Optional(
      Type.Object(
        {
          port: Type.Integer({
            description: "Port on the node's loopback (127.0.0.1), such as 10248 for kubelet.",
            minimum: 1,
            maximum: 65535,
          }),
          path: Type.Optional(
            Type.String({
              description: 'Path of the request; default "/".',
              maxLength: 1024,
              pattern: '^/[^\\\\s]*$',
            }),
          ),
          scheme: Type.Optional(
            StringEnum(HTTP_SCHEMES, {
              description:
                '"HTTP" (default) or "HTTPS" (the certificate is not verified: the request never leaves the node).',
            }),
          ),
        },
        {
          description:
            "GET a URL on the node's loopback; a 2xx or 3xx answer is healthy. Always 127.0.0.1: a check never leaves the node.",
        },
      ),
    ),
    timeoutSeconds: Type.Optional(
      Type.Integer({
        description: 'How long one run may take before it counts as failed; default 5.',
        minimum: 1,
        maximum: 300,
      }),
    ),
    periodSeconds: Type.Optional(
      Type.Integer({
        description: 'How often the check runs while the node verifies a revision; default 5.',
        minimum: 1,
        maximum: 300,
      }),
    ),
    failureThreshold: Type.Optional(
      Type.Integer({
        description:
          'Consecutive failures after which the node rolls back at once, without waiting for the deadline; default 3 (as a Kubernetes probe: a service gets period × threshold to come up).',
        minimum: 1,
        maximum: 100,
      }),
    ),
  },
  {
    description:
      'A check the node runs after applying a revision: the revision is kept only when every check passes for the soak time.',
    'x-kubernetes-validations': [
      {
        rule: '[has(self.exec), has(self.httpGet)].filter(x, x).size() == 1',
        message: 'set exactly one of exec, httpGet',
      },
    ],
  },
);

export const RolloutPolicy = Type.Object(
  {
    maxUnavailable: Type.Optional(
      IntOrPercent(
        'How many nodes may be updating (or unavailable) at once: a count or a percentage of the nodes, rounded down but at least 1; default 1.',
      ),
    ),
    canary: Type.Optional(
      Type.Object(
        {
          nodes: Type.Optional(
            IntOrPercent(
              'Size of the canary wave: a count or a percentage (rounded up); default 1.',
            ),
          ),
          pauseSeconds: Type.Optional(
            Type.Integer({
              description:
                'After the canary wave is updated, wait this long before the next wave. Omitted: wait until `oscar rollout resume`.',
              minimum: 0,
              maximum: 7 * 24 * 3600,
            }),
          ),
        },
        {
          description:
            'A first wave of a few nodes; the rollout then pauses (for pauseSeconds, or until resumed).',
        },
      ),
    ),
    soakSeconds: Type.Optional(
      Type.Integer({
        description:
          'How long a node must stay healthy after applying a revision before it counts as updated; default 60.',
        minimum: 0,
        maximum: 24 * 3600,
      }),
    ),
    progressDeadlineSeconds: Type.Optional(
      Type.Integer({
        description:
          'How long a node has, from the end of its apply, to be healthy for the soak time and to reach the API server again; otherwise it rolls back by itself. Default 600.',
        minimum: 1,
        maximum: 24 * 3600,
      }),
    ),
    failureThreshold: Type.Optional(
      IntOrPercent(
        'Failed or rolled-back nodes at which the rollout pauses by itself: a count or a percentage (rounded up, at least 1); default 1.',
      ),
    ),
    paused: Type.Optional(
      Type.Boolean({
        description:
          'Grant the new revision to no further node (nodes already updating finish). `oscar rollout pause|resume` sets it.',
      }),
    ),
    nonDisruptive: Type.Optional(
      StringEnum(NON_DISRUPTIVE, {
        description:
          '"Gate" (default): every revision goes through the waves. "Immediate": a revision that starts, restarts, reloads or stops no unit and installs no package, compared with the stable one, goes to every node at once.',
      }),
    ),
    drain: Type.Optional(
      Type.Object(
        {
          timeoutSeconds: Type.Optional(
            Type.Integer({
              description:
                "How long the controller tries to evict a node's pods (PodDisruptionBudgets honoured) before a Drain- or Reboot-level revision; default 600.",
              minimum: 1,
              maximum: 24 * 3600,
            }),
          ),
          onTimeout: Type.Optional(
            StringEnum(DRAIN_TIMEOUT_ACTIONS, {
              description:
                '"Wait" (default): keep trying, the blocking pod and PodDisruptionBudget named in status.rollout.drain; "Skip": uncordon the node and go on with the next one (it stays on its revision).',
            }),
          ),
        },
        {
          description:
            'How nodes are emptied before a revision that restarts the container runtime or reboots (docs/rollouts.md#drain).',
        },
      ),
    ),
    healthChecks: Type.Optional(
      Type.Array(HealthCheck, {
        description: 'What every node checks after applying a revision (try mode).',
        maxItems: ROLLOUT_LIMITS.healthChecks,
        'x-kubernetes-list-type': 'map',
        'x-kubernetes-list-map-keys': ['name'],
      }),
    ),
    rollback: Type.Optional(
      Type.Object(
        {
          fromRevision: Type.Integer({
            description: 'The revision undone: the rollback holds while the OSC still renders it.',
            minimum: 1,
          }),
          toRevision: Type.Integer({
            description: 'The revision every node goes back to.',
            minimum: 1,
          }),
        },
        {
          description:
            'Set by `oscar rollout undo`: every node goes back to toRevision as long as the OSC renders fromRevision; any other rendering ends it.',
        },
      ),
    ),
  },
  {
    description:
      'How a new revision of this reconcile configuration reaches the nodes whose agents follow grants (docs/rollouts.md).',
    'x-kubernetes-validations': [
      {
        rule: '!has(self.soakSeconds) || !has(self.progressDeadlineSeconds) || self.soakSeconds < self.progressDeadlineSeconds',
        message:
          'soakSeconds must be below progressDeadlineSeconds: a node could never stay healthy long enough',
        fieldPath: '.soakSeconds',
      },
    ],
  },
);

export const OperatingSystemConfigSpec = Type.Object(
  {
    type: Type.String({
      description:
        'The operating system, which picks the renderer: "ubuntu", "debian", "opensuse", "flatcar", "generic", or a type a provider registered.',
      minLength: 1,
      maxLength: FIELD_LENGTHS.type,
      pattern: PATTERNS.type,
    }),
    purpose: StringEnum(PURPOSES, {
      description:
        '"provision": the user data a new machine boots with; "reconcile": the full state the agent keeps applying in place. Immutable.',
      'x-kubernetes-validations': [
        {
          rule: 'self == oldSelf',
          message: 'purpose is immutable: create a new OperatingSystemConfig instead',
        },
      ],
    }),
    format: Type.Optional(
      StringEnum(FORMATS, {
        description:
          'Overrides the renderer\'s default output format: "cloud-config", "ignition" or "script".',
      }),
    ),
    units: Type.Optional(
      Type.Array(Unit, {
        description: 'systemd units to write, enable and start.',
        maxItems: LIMITS.units,
        'x-kubernetes-list-type': 'map',
        'x-kubernetes-list-map-keys': ['name'],
      }),
    ),
    files: Type.Optional(
      Type.Array(File, {
        description: 'Files to write.',
        maxItems: LIMITS.files,
        'x-kubernetes-list-type': 'map',
        'x-kubernetes-list-map-keys': ['path'],
      }),
    ),
    packages: Type.Optional(
      Type.Array(Package, {
        description: "Packages to install with the OS's package manager.",
        maxItems: LIMITS.packages,
        'x-kubernetes-list-type': 'map',
        'x-kubernetes-list-map-keys': ['name'],
      }),
    ),
    cri: Type.Optional(Cri),
    rollout: Type.Optional(RolloutPolicy),
    driftPolicy: Type.Optional(
      DriftPolicy(
        'a file or unit of this config',
        'Default "Report"; a file or unit can override it with its own driftPolicy.',
      ),
    ),
  },
  {
    description: 'What the node must carry: units, files, packages and the container runtime.',
    'x-kubernetes-validations': [
      {
        rule: "self.purpose == 'reconcile' || !has(self.rollout)",
        message:
          'spec.rollout applies to purpose reconcile only: a provision config is read once, at first boot',
        fieldPath: '.rollout',
      },
      {
        rule: "self.purpose == 'reconcile' || ((!has(self.units) || self.units.all(u, !has(u.onChange) || u.onChange != 'reboot')) && (!has(self.files) || self.files.all(f, !has(f.onChange) || f.onChange != 'reboot')))",
        message:
          'onChange: reboot applies to purpose reconcile only: a provision config runs once, at first boot; remove it from spec.units[].onChange and spec.files[].onChange',
        fieldPath: '.purpose',
      },
      {
        rule: PACKAGES_CEL_RULE,
        message: noPackageManager(WITHOUT_PACKAGE_MANAGER.join(', ')),
        fieldPath: '.packages',
      },
    ],
  },
);

export const Condition = Type.Object(
  {
    type: Type.String({ description: 'Type of the condition, such as Ready.', maxLength: 316 }),
    status: StringEnum(['True', 'False', 'Unknown'] as const, {
      description: 'Status of the condition: True, False or Unknown.',
    }),
    observedGeneration: Type.Optional(
      Type.Integer({
        description: 'The .metadata.generation the condition was set for.',
        minimum: 0,
      }),
    ),
    lastTransitionTime: Type.String({
      description: 'When the condition last changed status.',
      format: 'date-time',
    }),
    reason: Type.String({
      description: 'A CamelCase reason for the last transition.',
      maxLength: 1024,
    }),
    message: Type.String({
      description: 'A human readable message on the transition.',
      maxLength: 32768,
    }),
  },
  { description: 'A standard Kubernetes condition (metav1.Condition).' },
);

export const Conditions = Type.Array(Condition, {
  description: "The latest observations of the object's state.",
  'x-kubernetes-list-type': 'map',
  'x-kubernetes-list-map-keys': ['type'],
});

const count = (description: string) => Type.Integer({ description, minimum: 0 });
const time = (description: string) => Type.String({ description, format: 'date-time' });

/**
 * status.rollout: computed by the rollout controller, written with the rest of the status by the
 * OSC's one status writer (controller/osc/status-writer.ts).
 */
function RolloutStatus() {
  return Type.Object(
    {
      revision: Type.Integer({ description: 'The revision nodes are moving to.', minimum: 1 }),
      checksum: Type.String({ description: "The target revision's config checksum." }),
      stableRevision: Type.Optional(
        Type.Integer({
          description: 'The last revision whose rollout completed: where failed nodes go back to.',
          minimum: 1,
        }),
      ),
      phase: StringEnum(ROLLOUT_PHASES, {
        description: 'Progressing, Paused, Undoing (going back to toRevision) or Complete.',
      }),
      pauseReason: Type.Optional(
        StringEnum(PAUSE_REASONS, {
          description:
            'Why the rollout is paused: Manual (spec.rollout.paused), Canary (the canary wave is done), FailureThreshold.',
        }),
      ),
      message: Type.String({ description: 'What the rollout is doing, for people.' }),
      maxUnavailable: count('spec.rollout.maxUnavailable resolved against the node count.'),
      failureThreshold: count('spec.rollout.failureThreshold resolved against the node count.'),
      nodes: Type.Object(
        {
          total: count('Nodes whose agents follow grants for this OSC.'),
          updated: count(
            'Nodes that applied the target revision and stayed healthy for the soak time.',
          ),
          updating: count(
            'Nodes granted the target revision that have not finished (applying or verifying).',
          ),
          failed: count('Nodes whose try of the target failed (rolled back included).'),
          rolledBack: count('Nodes that reverted the target revision by themselves.'),
          rollingBack: Type.Optional(
            count(
              'Nodes rebooting back into their previous revision after a failed Reboot-level try (RollingBack): cordoned until they report RolledBack; counted in rolledBack, or in failed once past their deadline.',
            ),
          ),
          pending: count('Nodes not yet granted the target revision.'),
        },
        { description: 'The nodes, by where they are in this rollout.' },
      ),
      wave: count('Waves started so far (one wave = up to maxUnavailable nodes).'),
      waves: count('Waves this rollout needs at maxUnavailable.'),
      startTime: Type.Optional(time('When nodes started moving to this revision.')),
      completionTime: Type.Optional(time('When every node was updated.')),
      canaryCompleteTime: Type.Optional(time('When the canary wave was updated.')),
      canaryPromoted: Type.Optional(
        Type.Boolean({ description: 'The canary pause is over (its time elapsed, or resumed).' }),
      ),
      observedResume: Type.Optional(
        Type.String({
          description: 'The last oscar.dev/resume annotation value acted on.',
        }),
      ),
      retryWhenBack: Type.Optional(
        Type.Array(Type.String({ description: 'A node name.' }), {
          description:
            'Nodes a resume found rebooting back (RollingBack): each is retried, as a resume retries a failed node, once it reports RolledBack or Failed.',
          'x-kubernetes-list-type': 'atomic',
        }),
      ),
      disruption: Type.Optional(
        StringEnum(DISRUPTION_LEVELS, {
          description:
            'How much the target disturbs a node against the stable revision: None, Restart, Drain or Reboot (Drain and Reboot: each node is cordoned and drained before its grant).',
        }),
      ),
      drains: Type.Optional(
        Type.Array(
          Type.Object(
            {
              node: Type.String({ description: 'The node (cordoned by oscar).' }),
              revision: Type.Integer({
                description: 'The revision it is drained for.',
                minimum: 1,
              }),
              phase: StringEnum(DRAIN_PHASES, {
                description:
                  'Draining (evicting its pods), Drained (granted the revision), Blocked (the drain timeout passed; still trying, spec.rollout.drain.onTimeout Wait), Skipped (onTimeout Skip: uncordoned, left on its revision until resumed).',
              }),
              startTime: time('When the node was cordoned.'),
              message: Type.String({ description: 'What the drain is waiting for, for people.' }),
              rollingBackSince: Type.Optional(
                time(
                  'When the controller first saw the node rebooting back (RollingBack): its deadline runs from here.',
                ),
              ),
              pod: Type.Optional(
                Type.String({ description: 'A pod whose eviction was refused: namespace/name.' }),
              ),
              podDisruptionBudget: Type.Optional(
                Type.String({
                  description: 'The PodDisruptionBudget that refused it: namespace/name.',
                }),
              ),
            },
            { description: "One node's drain." },
          ),
          {
            description:
              'Nodes cordoned and drained for the target (Drain or Reboot level), until they confirm it.',
            'x-kubernetes-list-type': 'atomic',
          },
        ),
      ),
      revisions: Type.Optional(
        Type.Array(
          Type.Object(
            {
              revision: Type.Integer({ description: 'Its number.', minimum: 1 }),
              checksumShort: Type.String({ description: 'First 12 characters of its checksum.' }),
              secretName: Type.String({ description: 'The Secret holding it.' }),
            },
            { description: 'A revision kept.' },
          ),
          {
            description:
              'The revisions kept (newest first): targets for `oscar rollout undo --to-revision`.',
            'x-kubernetes-list-type': 'atomic',
          },
        ),
      ),
    },
    {
      description:
        'The rollout of the current revision across the nodes that follow grants (docs/rollouts.md).',
    },
  );
}

export const OperatingSystemConfigStatus = Type.Object(
  {
    observedGeneration: Type.Optional(
      Type.Integer({ description: 'The generation the controller last processed.', minimum: 0 }),
    ),
    conditions: Type.Optional(Conditions),
    secretRef: Type.Optional(
      Type.Object(
        {
          name: Type.String({ description: 'Name of the Secret in the same namespace.' }),
        },
        { description: 'The Secret holding the rendered output.' },
      ),
    ),
    checksum: Type.Optional(
      Type.String({ description: 'sha256 of the canonical resolved configuration.' }),
    ),
    checksumShort: Type.Optional(
      Type.String({ description: 'The first 12 characters of checksum, for display.' }),
    ),
    format: Type.Optional(Type.String({ description: 'Format of the rendered user data.' })),
    size: Type.Optional(
      Type.Integer({ description: 'Size in bytes of the rendered user data.', minimum: 0 }),
    ),
    warnings: Type.Optional(
      Type.Array(Type.String({ description: 'A warning.' }), {
        description: 'Warnings from rendering, such as a provision payload above 16 KiB.',
        'x-kubernetes-list-type': 'atomic',
      }),
    ),
    nodes: Type.Optional(
      Type.Object(
        {
          total: Type.Integer({ description: 'Nodes that follow this config.', minimum: 0 }),
          updated: Type.Integer({
            description: 'Nodes that applied the current checksum.',
            minimum: 0,
          }),
          degraded: Type.Integer({ description: 'Nodes that failed to apply.', minimum: 0 }),
          drifted: Type.Integer({
            description:
              'Nodes whose files or units no longer match what their agent applied (Drifted=True).',
            minimum: 0,
          }),
        },
        { description: 'Per-node rollout counts, from OperatingSystemConfigNode objects.' },
      ),
    ),
    rollout: Type.Optional(RolloutStatus()),
  },
  { description: 'What the controller observed and rendered.' },
);

export const ObjectMeta = Type.Object(
  {
    name: Type.String({ description: 'Name of the object.' }),
    namespace: Type.Optional(Type.String({ description: 'Namespace of the object.' })),
  },
  { description: 'Standard object metadata.', 'x-kubernetes-preserve-unknown-fields': true },
);

export const OperatingSystemConfig = Type.Object(
  {
    apiVersion: Type.String({ description: `Always "${API_VERSION}".` }),
    kind: Type.String({ description: `Always "${OSC_KIND}".` }),
    metadata: ObjectMeta,
    spec: OperatingSystemConfigSpec,
    status: Type.Optional(OperatingSystemConfigStatus),
  },
  {
    description:
      'OperatingSystemConfig declares the units, files, packages and container runtime a node must carry; oscar renders it for the OS and keeps nodes in sync.',
  },
);

export const RestartedUnit = Type.Object(
  {
    name: Type.String({ description: 'The unit.' }),
    action: Type.String({
      description: 'What the agent did: restart, reload, stopStart, start, stop.',
    }),
    time: Type.String({ description: 'When.', format: 'date-time' }),
  },
  { description: 'A unit the agent restarted, reloaded or started.' },
);

export const RevisionGrant = Type.Object(
  {
    namespace: Type.String({ description: 'Namespace of the OSC and its revision Secrets.' }),
    osc: Type.String({ description: 'Name of the OSC the revision belongs to.' }),
    number: Type.Integer({ description: 'The revision.', minimum: 1 }),
    secretName: Type.String({ description: 'The revision Secret to apply.' }),
    checksum: Type.String({
      description: "sha256 of the revision's canonical config: the agent refuses anything else.",
      pattern: '^[0-9a-f]{64}$',
    }),
    grantedTime: Type.String({
      description: 'When the controller granted it (microseconds).',
    }),
    canary: Type.Optional(
      Type.Boolean({ description: 'This node is in the canary wave of the rollout.' }),
    ),
    disruption: Type.Optional(
      StringEnum(DISRUPTION_LEVELS, {
        description:
          'How much the revision disturbs the node against its stable one: None, Restart, Drain (the controller drained the node before this grant) or Reboot (drained; the agent reboots inside try mode).',
      }),
    ),
    try: Type.Optional(
      Type.Object(
        {
          soakSeconds: Type.Integer({ description: 'See spec.rollout.soakSeconds.', minimum: 0 }),
          deadlineSeconds: Type.Integer({
            description: 'See spec.rollout.progressDeadlineSeconds.',
            minimum: 1,
          }),
          healthChecks: Type.Optional(
            Type.Array(HealthCheck, {
              description: 'See spec.rollout.healthChecks.',
              maxItems: ROLLOUT_LIMITS.healthChecks,
              'x-kubernetes-list-type': 'atomic',
            }),
          ),
        },
        {
          description:
            'Apply in try mode: keep the previous revision and go back to it unless the node stays healthy and reaches the API server again. Absent: apply plainly (first revision, undo).',
        },
      ),
    ),
  },
  { description: 'The revision the controller grants this node.' },
);

export const OperatingSystemConfigNodeSpec = Type.Object(
  { revision: Type.Optional(RevisionGrant) },
  {
    description:
      "What the controller grants this node; written only by the controller (the node's agent writes status).",
  },
);

export const RevisionReport = Type.Object(
  {
    observedGeneration: Type.Integer({
      description: 'The metadata.generation (the grant) this answers.',
      minimum: 0,
    }),
    number: Type.Integer({ description: 'The granted revision.', minimum: 1 }),
    checksum: Type.String({ description: 'Its checksum.' }),
    phase: StringEnum(GRANT_PHASES, {
      description:
        'Applying, Verifying (applied; checking health and the API server for the soak time), Confirmed, RollingBack (the node went back to its previous revision and reboots into it, or proves it in the boot that brought it back: still out of service), RolledBack (the node went back to its previous revision by itself, and after a reboot back is Ready and healthy in it), Failed (also a rollback whose reboot back did not happen or whose previous revision failed its proof: reason RollbackRebootFailed or RollbackUnhealthy).',
    }),
    reason: Type.String({ description: 'A CamelCase reason.', maxLength: 1024 }),
    message: Type.String({ description: 'What happened, for people.', maxLength: 32768 }),
    lastTransitionTime: Type.String({
      description: 'When the phase last changed.',
      format: 'date-time',
    }),
    deadline: Type.Optional(
      Type.String({
        description: 'While Verifying: when the node rolls back if not healthy.',
        format: 'date-time',
      }),
    ),
    previousChecksum: Type.Optional(
      Type.String({ description: 'What the node went (or would go) back to.' }),
    ),
  },
  { description: "The agent's answer to its grant." },
);

export const DriftedItem = Type.Object(
  {
    path: Type.Optional(
      Type.String({ description: 'The drifted file, unit file or drop-in.', maxLength: 4096 }),
    ),
    unit: Type.Optional(
      Type.String({
        description: 'The unit whose state drifted, or whose unit file or drop-in this is.',
        maxLength: 255,
      }),
    ),
    package: Type.Optional(
      Type.String({
        description:
          "The declared package that is missing, at another version, or left half-installed (as the package manager's database says).",
        maxLength: 253,
      }),
    ),
    reason: Type.String({
      description:
        'What differs: content, mode, owner, missing, notRegularFile; for a unit: stopped, failed, disabled, masked, unmasked; for a package: missing, version, broken.',
      maxLength: 256,
    }),
    expected: Type.String({
      description: 'What oscar applied: "sha256:<12 hex> 0644 root:root", or a unit state.',
      maxLength: 512,
    }),
    found: Type.String({
      description: 'What is on the node now, in the same words.',
      maxLength: 512,
    }),
    policy: Type.String({ description: 'Report or Revert: what the agent does about it.' }),
    since: Type.String({ description: 'When the agent first saw it.', format: 'date-time' }),
  },
  { description: 'One path, unit or package that no longer matches what the agent applied.' },
);

export const OperatingSystemConfigNodeStatus = Type.Object(
  {
    source: Type.Optional(
      StringEnum(NODE_SOURCES, {
        description:
          'How the agent follows its configuration: Grant (the controller paces it), Secret (the latest reconcile Secret), File.',
      }),
    ),
    revision: Type.Optional(RevisionReport),
    oscRef: Type.Optional(
      Type.Object(
        {
          namespace: Type.String({ description: 'Namespace of the OperatingSystemConfig.' }),
          name: Type.String({ description: 'Name of the OperatingSystemConfig.' }),
          secretName: Type.Optional(Type.String({ description: 'The reconcile Secret followed.' })),
        },
        { description: 'The configuration this node follows.' },
      ),
    ),
    desiredChecksum: Type.Optional(
      Type.String({ description: 'Checksum of the configuration the agent last received.' }),
    ),
    desiredChecksumShort: Type.Optional(
      Type.String({ description: 'The first 12 characters of desiredChecksum, for display.' }),
    ),
    appliedChecksum: Type.Optional(
      Type.String({ description: 'Checksum of the configuration last applied successfully.' }),
    ),
    appliedChecksumShort: Type.Optional(
      Type.String({ description: 'The first 12 characters of appliedChecksum, for display.' }),
    ),
    conditions: Type.Optional(Conditions),
    lastError: Type.Optional(
      Type.Object(
        {
          message: Type.String({ description: 'What failed.' }),
          unit: Type.Optional(Type.String({ description: 'The failing unit, if any.' })),
          journal: Type.Optional(
            Type.Array(Type.String({ description: 'A journal line.' }), {
              description: "The failing unit's last journal lines.",
              'x-kubernetes-list-type': 'atomic',
            }),
          ),
          time: Type.String({ description: 'When it failed.', format: 'date-time' }),
        },
        { description: 'The last failure to apply.' },
      ),
    ),
    restartedUnits: Type.Optional(
      Type.Array(RestartedUnit, {
        description: 'Units touched by the last apply.',
        'x-kubernetes-list-type': 'atomic',
      }),
    ),
    lastAppliedTime: Type.Optional(
      Type.String({ description: 'When the last apply finished.', format: 'date-time' }),
    ),
    drift: Type.Optional(
      Type.Object(
        {
          count: Type.Integer({
            description: 'How many paths and units drifted (items lists the first of them).',
            minimum: 0,
          }),
          items: Type.Optional(
            Type.Array(DriftedItem, {
              description: `The drifted paths and units, at most ${String(DRIFT_REPORT_ITEMS)}.`,
              maxItems: DRIFT_REPORT_ITEMS,
              'x-kubernetes-list-type': 'atomic',
            }),
          ),
        },
        {
          description:
            'What on the node no longer matches what the agent applied (see the Drifted condition).',
        },
      ),
    ),
    needsReplacement: Type.Optional(
      Type.Boolean({
        description:
          'The desired change cannot be made in place (another OS type, a runtime switch): replace the machine.',
      }),
    ),
    rebootRequired: Type.Optional(
      Type.Boolean({
        description:
          "The node says it needs a reboot: /var/run/reboot-required, left by Debian's and Ubuntu's packages. The node's next revision is Reboot-level (drained, then rebooted inside try mode).",
      }),
    ),
  },
  { description: "What the node's agent observed and applied." },
);

export const OperatingSystemConfigNode = Type.Object(
  {
    apiVersion: Type.String({ description: `Always "${API_VERSION}".` }),
    kind: Type.String({ description: `Always "${OSC_NODE_KIND}".` }),
    metadata: ObjectMeta,
    spec: Type.Optional(OperatingSystemConfigNodeSpec),
    status: Type.Optional(OperatingSystemConfigNodeStatus),
  },
  {
    description:
      "OperatingSystemConfigNode is one node's view of its configuration: the controller writes its spec (the revision granted), the node's agent its status.",
  },
);

export type InlineContent = Static<typeof InlineContent>;
export type FileContent = Static<typeof FileContent>;
export type File = Static<typeof File>;
export type DropIn = Static<typeof DropIn>;
export type Unit = Static<typeof Unit>;
export type Package = Static<typeof Package>;
export type Cri = Static<typeof Cri>;
export type OperatingSystemConfigSpec = Static<typeof OperatingSystemConfigSpec>;
export type OperatingSystemConfigStatus = Static<typeof OperatingSystemConfigStatus>;
export type OperatingSystemConfig = Static<typeof OperatingSystemConfig>;
export type Condition = Static<typeof Condition>;
export type OperatingSystemConfigNodeStatus = Static<typeof OperatingSystemConfigNodeStatus>;
export type OperatingSystemConfigNode = Static<typeof OperatingSystemConfigNode>;
export type RestartedUnit = Static<typeof RestartedUnit>;
export type HealthCheck = Static<typeof HealthCheck>;
export type RolloutPolicy = Static<typeof RolloutPolicy>;
export type RevisionGrant = Static<typeof RevisionGrant>;
export type RevisionReport = Static<typeof RevisionReport>;
export type OperatingSystemConfigNodeSpec = Static<typeof OperatingSystemConfigNodeSpec>;
export type RolloutStatus = NonNullable<OperatingSystemConfigStatus['rollout']>;
export type DriftedItem = Static<typeof DriftedItem>;

/** Used by the CRD generator to walk the schema: every node is plain JSON Schema. */
export type SchemaNode = Record<string, unknown>;
