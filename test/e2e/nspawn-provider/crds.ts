// The test-only nspawn provider's API (docs/testing.md, "Cluster API on real nodes"): four kinds in
// a test group, each CRD labelled with the Cluster API contract it serves, so Cluster API's
// manager reads them as it reads any provider's. Never shipped: deploy/ knows nothing of them.

export const NSPAWN_GROUP = 'nspawn.test.oscar.dev';
export const NSPAWN_VERSION = 'v1alpha1';
export const NSPAWN_API = `${NSPAWN_GROUP}/${NSPAWN_VERSION}`;

/** The kinds: an infrastructure cluster, an (external) control plane, machines and their template. */
export const NSPAWN_KINDS = [
  'NspawnCluster',
  'NspawnControlPlane',
  'NspawnMachine',
  'NspawnMachineTemplate',
] as const;

export type NspawnKind = (typeof NSPAWN_KINDS)[number];

export function pluralOf(kind: NspawnKind): string {
  return `${kind.toLowerCase()}s`;
}

/** One CRD: schemaless (the provider reads what it needs), status as a subresource. */
export function nspawnCrd(kind: NspawnKind): Record<string, unknown> {
  const plural = pluralOf(kind);
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name: `${plural}.${NSPAWN_GROUP}`,
      // Cluster API reads an object of this kind by its v1beta2 contract, at this version
      labels: { 'cluster.x-k8s.io/v1beta2': NSPAWN_VERSION },
    },
    spec: {
      group: NSPAWN_GROUP,
      names: { kind, listKind: `${kind}List`, plural, singular: kind.toLowerCase() },
      scope: 'Namespaced',
      versions: [
        {
          name: NSPAWN_VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          schema: {
            openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
          },
        },
      ],
    },
  };
}

/** The four CRDs as one List, for one server-side apply. */
export function nspawnCrdList(): Record<string, unknown> {
  return { apiVersion: 'v1', kind: 'List', items: NSPAWN_KINDS.map(nspawnCrd) };
}
