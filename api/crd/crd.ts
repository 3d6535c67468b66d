/**
 * Derives the CustomResourceDefinition manifests from the typebox schema in api/schema.ts,
 * so the API server, the CLI and the controller all enforce one definition.
 */
import { OSC_NAME_MAX, OSC_NAME_TOO_LONG } from '../validate.js';
import { stringify } from 'yaml';
import {
  BOOTSTRAP_GROUP,
  BOOTSTRAP_VERSION,
  CAPI_CONTRACT_LABEL,
  OSCAR_CONFIG_KIND,
  OSCAR_CONFIG_TEMPLATE_KIND,
} from '../bootstrap/constants.js';
import {
  OscarConfigSpec,
  OscarConfigStatus,
  OscarConfigTemplateSpec,
} from '../bootstrap/schema.js';
import {
  GROUP,
  OSC_KIND,
  OSC_NODE_KIND,
  OperatingSystemConfigNodeSpec,
  OperatingSystemConfigNodeStatus,
  OperatingSystemConfigSpec,
  OperatingSystemConfigStatus,
  VERSION,
} from '../schema.js';

type Json = Record<string, unknown>;

/** A plain-JSON copy of a typebox schema, with typebox's own markers removed. */
function toOpenApi(schema: unknown): Json {
  return JSON.parse(JSON.stringify(schema), (_key, value: unknown) => {
    if (value && typeof value === 'object' && !Array.isArray(value)) {
      const node = value as Json;
      if (Array.isArray(node.required) && node.required.length === 0) delete node.required;
    }
    return value;
  }) as Json;
}

function rootSchema(description: string, properties: Json, required: string[] = []): Json {
  return {
    type: 'object',
    description,
    ...(required.length > 0 ? { required } : {}),
    properties: {
      apiVersion: {
        type: 'string',
        description: 'APIVersion defines the versioned schema of this representation of an object.',
      },
      kind: {
        type: 'string',
        description:
          'Kind is a string value representing the REST resource this object represents.',
      },
      // The API server refuses anything but `type` here (metadata is implicitly specified).
      metadata: { type: 'object' },
      ...properties,
    },
  };
}

export interface CrdManifest {
  fileName: string;
  object: Json;
}

interface CrdOptions {
  kind: string;
  shortName: string;
  scope: 'Namespaced' | 'Cluster';
  columns: Json[];
  schema: Json;
  /** Default: oscar.dev v1alpha1. */
  group?: string;
  version?: string;
  labels?: Record<string, string>;
  categories?: string[];
  /** Default true; a template has no status. */
  status?: boolean;
}

/**
 * The parts every oscar CRD shares: one served storage version, a status subresource. The name is
 * <lowercase kind>s.<group>, the form Cluster API computes (contract.CalculateCRDName) to find a
 * provider's CRD without listing them.
 */
function customResourceDefinition(o: CrdOptions): Json {
  const { kind, shortName, scope, columns, schema } = o;
  const group = o.group ?? GROUP;
  const singular = kind.toLowerCase();
  const plural = `${singular}s`;
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${group}`, ...(o.labels ? { labels: o.labels } : {}) },
    spec: {
      group,
      names: {
        kind,
        listKind: `${kind}List`,
        plural,
        singular,
        shortNames: [shortName],
        categories: o.categories ?? ['oscar'],
      },
      scope,
      versions: [
        {
          name: o.version ?? VERSION,
          served: true,
          storage: true,
          ...(o.status === false ? {} : { subresources: { status: {} } }),
          additionalPrinterColumns: columns,
          schema: { openAPIV3Schema: schema },
        },
      ],
    },
  };
}

const AGE_COLUMN = { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' };

export function operatingSystemConfigCrd(): Json {
  return customResourceDefinition({
    kind: OSC_KIND,
    shortName: 'osc',
    scope: 'Namespaced',
    // `kubectl get osc`: what it is, what it rendered, how far the rollout got (nodes that follow
    // it / have applied its checksum / are degraded / drifted); -o wide adds where the rendering went
    columns: [
      { name: 'Type', type: 'string', jsonPath: '.spec.type' },
      { name: 'Purpose', type: 'string', jsonPath: '.spec.purpose' },
      { name: 'Checksum', type: 'string', jsonPath: '.status.checksumShort' },
      { name: 'Ready', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
      {
        name: 'Nodes',
        type: 'integer',
        jsonPath: '.status.nodes.total',
        description: 'Nodes whose agent follows this config.',
      },
      {
        name: 'Updated',
        type: 'integer',
        jsonPath: '.status.nodes.updated',
        description: 'Nodes that applied the current checksum.',
      },
      {
        name: 'Degraded',
        type: 'integer',
        jsonPath: '.status.nodes.degraded',
        description: 'Nodes whose agent reports Degraded=True.',
      },
      {
        name: 'Drifted',
        type: 'integer',
        jsonPath: '.status.nodes.drifted',
        description:
          'Nodes whose agent reports Drifted=True: something it applied was changed there.',
      },
      {
        name: 'Rollout',
        type: 'string',
        jsonPath: '.status.rollout.phase',
        description: 'Phase of the gated rollout (reconcile OSCs with grant-mode nodes).',
      },
      AGE_COLUMN,
      {
        name: 'Reason',
        type: 'string',
        jsonPath: '.status.conditions[?(@.type=="Ready")].reason',
        priority: 1,
      },
      { name: 'Format', type: 'string', jsonPath: '.status.format', priority: 1 },
      { name: 'Size', type: 'integer', jsonPath: '.status.size', priority: 1 },
      { name: 'Secret', type: 'string', jsonPath: '.status.secretRef.name', priority: 1 },
      { name: 'Revision', type: 'integer', jsonPath: '.status.rollout.revision', priority: 1 },
      {
        name: 'Failed',
        type: 'integer',
        jsonPath: '.status.rollout.nodes.failed',
        priority: 1,
      },
    ],
    schema: {
      ...rootSchema(
        'OperatingSystemConfig declares the units, files, packages and container runtime a node must carry; oscar renders it for the OS into a Secret and its agent keeps nodes in sync in place.',
        {
          spec: toOpenApi(OperatingSystemConfigSpec),
          status: toOpenApi(OperatingSystemConfigStatus),
        },
        ['spec'],
      ),
      // Refused at admission rather than failing later: its Secrets' label value is the name.
      'x-kubernetes-validations': [
        {
          rule: `size(self.metadata.name) <= ${String(OSC_NAME_MAX)}`,
          message: `metadata.name ${OSC_NAME_TOO_LONG}`,
        },
      ],
    },
  });
}

export function operatingSystemConfigNodeCrd(): Json {
  return customResourceDefinition({
    kind: OSC_NODE_KIND,
    shortName: 'oscnode',
    scope: 'Cluster',
    // `kubectl get oscnode`: which config, what it got and what it carries (short checksums, to
    // compare with the OSC's), whether it is healthy; -o wide adds where from and why
    columns: [
      { name: 'OSC', type: 'string', jsonPath: '.status.oscRef.name' },
      { name: 'Desired', type: 'string', jsonPath: '.status.desiredChecksumShort' },
      { name: 'Applied', type: 'string', jsonPath: '.status.appliedChecksumShort' },
      { name: 'Revision', type: 'integer', jsonPath: '.status.revision.number' },
      { name: 'Phase', type: 'string', jsonPath: '.status.revision.phase' },
      // the level of the granted revision: Drain and Reboot mean the controller drained the node
      { name: 'Disruption', type: 'string', jsonPath: '.spec.revision.disruption' },
      {
        name: 'Degraded',
        type: 'string',
        jsonPath: '.status.conditions[?(@.type=="Degraded")].status',
      },
      {
        name: 'Drifted',
        type: 'string',
        jsonPath: '.status.conditions[?(@.type=="Drifted")].status',
      },
      { name: 'Last-Applied', type: 'date', jsonPath: '.status.lastAppliedTime' },
      AGE_COLUMN,
      { name: 'Namespace', type: 'string', jsonPath: '.status.oscRef.namespace', priority: 1 },
      {
        name: 'Reason',
        type: 'string',
        jsonPath: '.status.conditions[?(@.type=="Degraded")].reason',
        priority: 1,
      },
      { name: 'Secret', type: 'string', jsonPath: '.status.oscRef.secretName', priority: 1 },
      { name: 'Granted', type: 'integer', jsonPath: '.spec.revision.number', priority: 1 },
    ],
    schema: rootSchema(
      "OperatingSystemConfigNode is one node's view of its configuration, named after the node: the controller writes its spec (the revision granted to the node), the node's agent its status.",
      {
        spec: toOpenApi(OperatingSystemConfigNodeSpec),
        status: toOpenApi(OperatingSystemConfigNodeStatus),
      },
    ),
  });
}

/** Cluster API reads the bootstrap CRDs' version for its v1beta2 contract from this label. */
const CAPI_LABELS = { [CAPI_CONTRACT_LABEL]: BOOTSTRAP_VERSION };

export function oscarConfigCrd(): Json {
  return customResourceDefinition({
    kind: OSCAR_CONFIG_KIND,
    shortName: 'oscfg',
    scope: 'Namespaced',
    group: BOOTSTRAP_GROUP,
    version: BOOTSTRAP_VERSION,
    labels: CAPI_LABELS,
    categories: ['oscar', 'cluster-api'],
    columns: [
      { name: 'Provision', type: 'string', jsonPath: '.spec.provisionRef.name' },
      { name: 'Reconcile', type: 'string', jsonPath: '.spec.reconcileRef.name' },
      { name: 'Secret', type: 'string', jsonPath: '.status.dataSecretName' },
      { name: 'Ready', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
      AGE_COLUMN,
    ],
    schema: rootSchema(
      "OscarConfig is one machine's bootstrap: the provision OSC rendered with the machine's values and oscar's bootstrap additions into a Secret (status.dataSecretName), a bootstrap token bound to the machine, and the reconcile OSC its agent follows. A Cluster API bootstrap provider config (contract v1beta2), usable without Cluster API too.",
      { spec: toOpenApi(OscarConfigSpec), status: toOpenApi(OscarConfigStatus) },
      ['spec'],
    ),
  });
}

export function oscarConfigTemplateCrd(): Json {
  return customResourceDefinition({
    kind: OSCAR_CONFIG_TEMPLATE_KIND,
    shortName: 'oscfgt',
    scope: 'Namespaced',
    group: BOOTSTRAP_GROUP,
    version: BOOTSTRAP_VERSION,
    labels: CAPI_LABELS,
    categories: ['oscar', 'cluster-api'],
    status: false,
    columns: [
      { name: 'Provision', type: 'string', jsonPath: '.spec.template.spec.provisionRef.name' },
      { name: 'Reconcile', type: 'string', jsonPath: '.spec.template.spec.reconcileRef.name' },
      AGE_COLUMN,
    ],
    schema: rootSchema(
      'OscarConfigTemplate is the OscarConfig each machine of a Cluster API MachineDeployment or MachineSet gets (one per Machine, named like it).',
      { spec: toOpenApi(OscarConfigTemplateSpec) },
      ['spec'],
    ),
  });
}

export function crdManifests(): CrdManifest[] {
  return [
    { fileName: `${GROUP}_operatingsystemconfigs.yaml`, object: operatingSystemConfigCrd() },
    {
      fileName: `${GROUP}_operatingsystemconfignodes.yaml`,
      object: operatingSystemConfigNodeCrd(),
    },
    { fileName: `${BOOTSTRAP_GROUP}_oscarconfigs.yaml`, object: oscarConfigCrd() },
    { fileName: `${BOOTSTRAP_GROUP}_oscarconfigtemplates.yaml`, object: oscarConfigTemplateCrd() },
  ];
}

const HEADER = '# Generated from api/schema.ts by `npm run gen:crd`. Do not edit by hand.\n';

export function renderCrdYaml(object: Json): string {
  return HEADER + stringify(object, { lineWidth: 0 });
}

/** deploy/crds/kustomization.yaml: every generated CRD, so `kubectl apply -k deploy/` installs them all. */
export function renderCrdKustomization(): string {
  return (
    HEADER +
    stringify(
      {
        apiVersion: 'kustomize.config.k8s.io/v1beta1',
        kind: 'Kustomization',
        resources: crdManifests().map((m) => m.fileName),
      },
      { lineWidth: 0 },
    )
  );
}

/** All CRDs as one multi-document YAML stream (what `oscar crd` prints). */
export function renderAllCrdsYaml(): string {
  return crdManifests()
    .map((m) => stringify(m.object, { lineWidth: 0 }))
    .join('---\n');
}
