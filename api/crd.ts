/**
 * Derives the CustomResourceDefinition manifests from the typebox schema in api/schema.ts,
 * so the API server, the CLI and the controller all enforce one definition.
 */
import { stringify } from 'yaml';
import {
  GROUP,
  OSC_KIND,
  OSC_NODE_KIND,
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
    // `kubectl get osc`: what it is, what it rendered, how far the rollout got (nodes that follow
    // it / have applied its checksum / are degraded); -o wide adds where the rendering went
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
    // `kubectl get oscnode`: which config, what it got and what it carries (short checksums, to
    // compare with the OSC's), whether it is healthy; -o wide adds where from and why
    columns: [
      { name: 'OSC', type: 'string', jsonPath: '.status.oscRef.name' },
      { name: 'Desired', type: 'string', jsonPath: '.status.desiredChecksumShort' },
      { name: 'Applied', type: 'string', jsonPath: '.status.appliedChecksumShort' },
      {
        name: 'Degraded',
        type: 'string',
        jsonPath: '.status.conditions[?(@.type=="Degraded")].status',
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
    ],
    schema: rootSchema(
      "OperatingSystemConfigNode is one node's view of its configuration, written only by that node's agent. Named after the node.",
      { status: toOpenApi(OperatingSystemConfigNodeStatus) },
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
