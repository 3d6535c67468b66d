/**
 * The per-machine bootstrap API (bootstrap.oscar.dev/v1alpha1), one typebox definition for the
 * types, the CRDs (api/crd/crd.ts) and the validator (api/bootstrap/validate.ts), following Cluster
 * API's bootstrap provider contract v1beta2: an OscarConfig per machine (status.dataSecretName,
 * status.initialization.dataSecretCreated, conditions) and an OscarConfigTemplate for
 * MachineDeployments (spec.template.{metadata,spec}). The same object serves a machine created by
 * hand: apply an OscarConfig, read its Secret.
 */
import { Type, type Static } from 'typebox';
import { FORMATS } from '../constants.js';
import { Conditions, ObjectMeta } from '../schema.js';
import {
  BOOTSTRAP_API_VERSION,
  BOOTSTRAP_LIMITS,
  OSCAR_CONFIG_KIND,
  OSCAR_CONFIG_TEMPLATE_KIND,
  VALUE_KEY_PATTERN,
} from './constants.js';

/**
 * A string map as a structural schema (additionalProperties), which the API server accepts and
 * typebox's Record (patternProperties) is not.
 */
function StringMap(
  valueOptions: Record<string, unknown>,
  options: Record<string, unknown> & { description: string },
) {
  return Type.Unsafe<Record<string, string>>({
    type: 'object',
    additionalProperties: { type: 'string', ...valueOptions },
    ...options,
  });
}

const OscRef = (purpose: 'provision' | 'reconcile', what: string) =>
  Type.Object(
    {
      name: Type.String({
        description: `Name of an OperatingSystemConfig with purpose ${purpose} in the OscarConfig's namespace.`,
        minLength: 1,
        maxLength: 253,
      }),
    },
    { description: what },
  );

export const AgentSource = Type.Object(
  {
    url: Type.Optional(
      Type.String({
        description:
          "Where the machine downloads the oscar agent (http or https); overrides the controller's --agent-url.",
        minLength: 8,
        maxLength: BOOTSTRAP_LIMITS.urlLength,
        pattern: '^https?://[^\\s\'"`$\\\\]+$',
      }),
    ),
    sha256: Type.Optional(
      Type.String({
        description:
          "The agent's sha256 (64 lowercase hex digits), checked before it is installed; overrides the controller's --agent-sha256.",
        minLength: 64,
        maxLength: 64,
        pattern: '^[0-9a-f]{64}$',
      }),
    ),
  },
  {
    description:
      "Where this machine fetches the oscar agent from; each field defaults to the controller's flag (one source per cluster).",
  },
);

export const OscarConfigSpec = Type.Object(
  {
    provisionRef: OscRef(
      'provision',
      "The provision OperatingSystemConfig rendered, with this machine's values, into its user data.",
    ),
    reconcileRef: OscRef(
      'reconcile',
      "The reconcile OperatingSystemConfig the machine's agent follows once it runs.",
    ),
    format: Type.Optional(
      Type.Unsafe<(typeof FORMATS)[number]>({
        type: 'string',
        enum: [...FORMATS],
        description:
          'The user data format, when not the OS default: "cloud-config", "ignition" or "script".',
      }),
    ),
    values: Type.Optional(
      StringMap(
        {
          description: 'A value, substituted for {{ values.KEY }}.',
          maxLength: BOOTSTRAP_LIMITS.valueBytes,
        },
        {
          description:
            'Per-machine values, substituted for {{ values.KEY }} in the provision OSC\'s file and unit contents. Keys: letters, digits, "_" and "-", starting with a letter or "_".',
          maxProperties: BOOTSTRAP_LIMITS.values,
          'x-kubernetes-validations': [
            {
              rule: `self.all(k, size(k) <= ${String(BOOTSTRAP_LIMITS.valueKeyLength)} && k.matches('${VALUE_KEY_PATTERN}'))`,
              message: `values keys must match ${VALUE_KEY_PATTERN} and have at most ${String(BOOTSTRAP_LIMITS.valueKeyLength)} characters, such as "region" or "rack_id"`,
            },
          ],
        },
      ),
    ),
    agent: Type.Optional(AgentSource),
    kubeletBootstrap: Type.Optional(
      Type.Boolean({
        description:
          "The machine's kubelet TLS-bootstraps with the machine's own bootstrap token (its bootstrap kubeconfig is /etc/oscar/bootstrap-kubeconfig): oscar's approver then approves a kubelet client certificate for system:node:<machine> only, and the token lives until both the agent's and kubelet's certificates are issued (never past its TTL). Default false: the token serves the agent alone.",
      }),
    ),
  },
  {
    description:
      "One machine's bootstrap: which OSCs it uses and its own values. Its user data is rendered once, when the machine is created; later changes reach the node through the reconcile OSC, not through new user data.",
  },
);

export const OscarConfigStatus = Type.Object(
  {
    observedGeneration: Type.Optional(
      Type.Integer({ description: 'The generation the controller last processed.', minimum: 0 }),
    ),
    conditions: Type.Optional(Conditions),
    dataSecretName: Type.Optional(
      Type.String({
        description: 'The Secret holding the user data (keys value and format).',
        minLength: 1,
        maxLength: 253,
      }),
    ),
    initialization: Type.Optional(
      Type.Object(
        {
          dataSecretCreated: Type.Optional(
            Type.Boolean({ description: 'True once the user data Secret exists.' }),
          ),
        },
        {
          description:
            "Cluster API's contract: the bootstrap data is ready (the Machine controller reads it).",
        },
      ),
    ),
    format: Type.Optional(Type.String({ description: 'Format of the user data.' })),
    size: Type.Optional(
      Type.Integer({ description: 'Size in bytes of the user data.', minimum: 0 }),
    ),
    bootstrapTokenID: Type.Optional(
      Type.String({
        description:
          "The id of the machine's bootstrap token (its public half; the token authenticates as system:bootstrap:<id>).",
      }),
    ),
    bootstrapTokenNeededBy: Type.Optional(
      Type.Array(
        Type.Unsafe<'agent' | 'kubelet'>({
          type: 'string',
          enum: ['agent', 'kubelet'],
          description: 'A consumer of the token: "agent" or "kubelet".',
        }),
        {
          description:
            'Who still needs the bootstrap token: "agent" until the agent\'s certificate is issued, "kubelet" (with spec.kubeletBootstrap) until kubelet\'s is. Empty once the token is deleted.',
          maxItems: 2,
        },
      ),
    ),
  },
  { description: 'What the controller rendered for this machine.' },
);

export const OscarConfig = Type.Object(
  {
    apiVersion: Type.String({ description: `Always "${BOOTSTRAP_API_VERSION}".` }),
    kind: Type.String({ description: `Always "${OSCAR_CONFIG_KIND}".` }),
    metadata: ObjectMeta,
    spec: OscarConfigSpec,
    status: Type.Optional(OscarConfigStatus),
  },
  { description: "OscarConfig is one machine's bootstrap configuration." },
);

export const OscarConfigTemplateSpec = Type.Object(
  {
    template: Type.Object(
      {
        metadata: Type.Optional(
          Type.Object(
            {
              labels: Type.Optional(
                StringMap(
                  { description: 'A label value.' },
                  { description: 'Labels for the OscarConfigs made from this template.' },
                ),
              ),
              annotations: Type.Optional(
                StringMap(
                  { description: 'An annotation value.' },
                  { description: 'Annotations for the OscarConfigs made from this template.' },
                ),
              ),
            },
            { description: 'Metadata of the OscarConfigs made from this template.' },
          ),
        ),
        spec: OscarConfigSpec,
      },
      { description: 'The OscarConfig every machine of the set gets.' },
    ),
  },
  { description: 'A template of per-machine OscarConfigs.' },
);

export const OscarConfigTemplate = Type.Object(
  {
    apiVersion: Type.String({ description: `Always "${BOOTSTRAP_API_VERSION}".` }),
    kind: Type.String({ description: `Always "${OSCAR_CONFIG_TEMPLATE_KIND}".` }),
    metadata: ObjectMeta,
    spec: OscarConfigTemplateSpec,
  },
  {
    description:
      'OscarConfigTemplate is the OscarConfig each machine of a Cluster API MachineDeployment or MachineSet gets.',
  },
);

export type AgentSource = Static<typeof AgentSource>;
export type OscarConfigSpec = Static<typeof OscarConfigSpec>;
export type OscarConfigStatus = Static<typeof OscarConfigStatus>;
export type OscarConfig = Static<typeof OscarConfig>;
export type OscarConfigTemplateSpec = Static<typeof OscarConfigTemplateSpec>;
export type OscarConfigTemplate = Static<typeof OscarConfigTemplate>;
