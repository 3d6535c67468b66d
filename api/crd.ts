/**
 * Derives the CustomResourceDefinition manifests from the typebox schema in api/schema.ts,
 * so the API server, the CLI and the controller all enforce one definition.
 */
import { stringify } from 'yaml';
import {
  GROUP,
  OSC_KIND,
  OSC_NODE_KIND,
  OperatingSystemConfigNodeSpec,
  OperatingSystemConfigNodeStatus,
  OperatingSystemConfigSpec,
  OperatingSystemConfigStatus,
  VERSION,
} from './schema.js';

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
}

/** The parts every oscar CRD shares: group, one served storage version, status subresource. */
function customResourceDefinition({ kind, shortName, scope, columns, schema }: CrdOptions): Json {
  const singular = kind.toLowerCase();
  const plural = `${singular}s`;
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${GROUP}` },
    spec: {
      group: GROUP,
      names: {
        kind,
        listKind: `${kind}List`,
        plural,
        singular,
        shortNames: [shortName],
        categories: ['oscar'],
      },
      scope,
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
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
    columns: [
      { name: 'Type', type: 'string', jsonPath: '.spec.type' },
      { name: 'Purpose', type: 'string', jsonPath: '.spec.purpose' },
      { name: 'Checksum', type: 'string', jsonPath: '.status.checksumShort' },
      { name: 'Ready', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
      { name: 'Revision', type: 'integer', jsonPath: '.status.rollout.revision' },
      { name: 'Rollout', type: 'string', jsonPath: '.status.rollout.phase' },
      { name: 'Updated', type: 'integer', jsonPath: '.status.rollout.nodes.updated' },
      { name: 'Nodes', type: 'integer', jsonPath: '.status.rollout.nodes.total' },
      { name: 'Failed', type: 'integer', jsonPath: '.status.rollout.nodes.failed', priority: 1 },
      AGE_COLUMN,
    ],
    schema: rootSchema(
      'OperatingSystemConfig declares the units, files, packages and container runtime a node must carry; oscar renders it for the OS into a Secret and its agent keeps nodes in sync in place.',
      {
        spec: toOpenApi(OperatingSystemConfigSpec),
        status: toOpenApi(OperatingSystemConfigStatus),
      },
      ['spec'],
    ),
  });
}

export function operatingSystemConfigNodeCrd(): Json {
  return customResourceDefinition({
    kind: OSC_NODE_KIND,
    shortName: 'oscnode',
    scope: 'Cluster',
    columns: [
      { name: 'Desired', type: 'string', jsonPath: '.status.desiredChecksum', priority: 1 },
      { name: 'Applied', type: 'string', jsonPath: '.status.appliedChecksum' },
      { name: 'Granted', type: 'integer', jsonPath: '.spec.revision.number' },
      { name: 'Revision', type: 'integer', jsonPath: '.status.revision.number' },
      { name: 'Phase', type: 'string', jsonPath: '.status.revision.phase' },
      {
        name: 'Degraded',
        type: 'string',
        jsonPath: '.status.conditions[?(@.type=="Degraded")].status',
      },
      AGE_COLUMN,
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

export function crdManifests(): CrdManifest[] {
  return [
    { fileName: `${GROUP}_operatingsystemconfigs.yaml`, object: operatingSystemConfigCrd() },
    {
      fileName: `${GROUP}_operatingsystemconfignodes.yaml`,
      object: operatingSystemConfigNodeCrd(),
    },
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
