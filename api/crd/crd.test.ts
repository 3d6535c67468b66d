import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { crdManifests, renderCrdKustomization, renderCrdYaml } from './crd.js';

type Node = Record<string, unknown>;

/** Every schema node with its path, for structural checks. */
function* walk(node: Node, path: string): Generator<[string, Node]> {
  yield [path, node];
  const props = node.properties as Record<string, Node> | undefined;
  for (const [key, child] of Object.entries(props ?? {})) yield* walk(child, `${path}.${key}`);
  if (node.items) yield* walk(node.items as Node, `${path}[]`);
}

describe('the CRDs', () => {
  it('are all listed in deploy/crds/kustomization.yaml (run `npm run gen:crd`)', () => {
    const committed = readFileSync(
      join(import.meta.dirname, '..', '..', 'deploy', 'crds', 'kustomization.yaml'),
      'utf8',
    );
    expect(committed).toBe(renderCrdKustomization());
  });

  for (const manifest of crdManifests()) {
    describe(manifest.fileName, () => {
      it('match the committed files in deploy/crds (run `npm run gen:crd` after a schema change)', () => {
        const committed = readFileSync(
          join(import.meta.dirname, '..', '..', 'deploy', 'crds', manifest.fileName),
          'utf8',
        );
        expect(committed).toBe(renderCrdYaml(manifest.object));
      });

      const version = (manifest.object.spec as Node).versions as Node[];
      const schema = (version[0]?.schema as Node).openAPIV3Schema as Node;

      it('are structural: a type (or int-or-string) on every node, no unions, no additionalProperties: false', () => {
        for (const [path, node] of walk(schema, '')) {
          if (path === '.metadata') continue;
          expect(
            node.type !== undefined || node['x-kubernetes-int-or-string'] === true,
            `${path} has a type`,
          ).toBe(true);
          for (const forbidden of ['anyOf', 'oneOf', 'allOf', 'not', '$ref', '$id']) {
            expect(node[forbidden], `${path} has no ${forbidden}`).toBeUndefined();
          }
          expect(node.additionalProperties, path).not.toBe(false);
        }
      });

      it('describe every field, so kubectl explain is useful', () => {
        for (const [path, node] of walk(schema, '')) {
          if (path === '.metadata') continue; // the API server allows nothing but `type` there
          expect(
            typeof node.description === 'string' && node.description.length > 0,
            `${path} has a description`,
          ).toBe(true);
        }
      });

      it('bound every list and string that a CEL rule reads, so the API server can estimate cost', () => {
        for (const [path, node] of walk(schema, '')) {
          if (node.type === 'array' && path.startsWith('.spec')) {
            expect(node.maxItems, `${path} has maxItems`).toBeTypeOf('number');
          }
        }
      });
    });
  }

  it('give OperatingSystemConfig the short name osc, a status subresource and printer columns', () => {
    const [osc] = crdManifests();
    const spec = osc?.object.spec as Node;
    expect((spec.names as Node).shortNames).toEqual(['osc']);
    const v = (spec.versions as Node[])[0] as Node;
    expect(v.subresources).toEqual({ status: {} });
    const columns = v.additionalPrinterColumns as Node[];
    const shown = (wide: boolean): unknown[] =>
      columns.filter((c) => (c.priority === 1) === wide).map((c) => c.name);
    expect(shown(false)).toEqual([
      'Type',
      'Purpose',
      'Checksum',
      'Ready',
      'Nodes',
      'Updated',
      'Degraded',
      'Drifted',
      'Rollout',
      'Age',
    ]);
    expect(shown(true)).toEqual(['Reason', 'Format', 'Size', 'Secret', 'Revision', 'Failed']);
  });

  it('carry the CEL rules for one content source, immutable purpose and permissions as strings', () => {
    const text = JSON.stringify(crdManifests()[0]?.object);
    expect(text).toContain(
      '[has(self.inline), has(self.secretRef), has(self.configMapRef)].filter(x, x).size() == 1',
    );
    expect(text).toContain('self == oldSelf');
    expect(text).toContain('type(self) == string');
    const parsed = parse(renderCrdYaml(crdManifests()[0]!.object)) as Node;
    expect(parsed.kind).toBe('CustomResourceDefinition');
  });

  it('make OperatingSystemConfigNode cluster-scoped with short name oscnode', () => {
    const node = crdManifests()[1]?.object.spec as Node;
    expect(node.scope).toBe('Cluster');
    expect((node.names as Node).shortNames).toEqual(['oscnode']);
  });

  it("give the bootstrap CRDs what Cluster API's contract v1beta2 looks for", () => {
    const byName = new Map(
      crdManifests().map((m) => [(m.object.metadata as Node).name as string, m.object]),
    );
    for (const [name, kind] of [
      ['oscarconfigs.bootstrap.oscar.dev', 'OscarConfig'],
      ['oscarconfigtemplates.bootstrap.oscar.dev', 'OscarConfigTemplate'],
    ] as const) {
      const crd = byName.get(name);
      expect(crd, name).toBeDefined();
      // contract.CalculateCRDName: lowercase plural kind + "." + group; the label maps the
      // contract to the CRD version.
      expect((crd?.metadata as Node).labels).toEqual({ 'cluster.x-k8s.io/v1beta2': 'v1alpha1' });
      const spec = crd?.spec as Node;
      expect(spec.scope).toBe('Namespaced');
      expect((spec.names as Node).kind).toBe(kind);
      expect((spec.names as Node).listKind).toBe(`${kind}List`);
    }
    const config = (byName.get('oscarconfigs.bootstrap.oscar.dev')?.spec as Node)
      .versions as Node[];
    const status = (
      ((config[0]?.schema as Node).openAPIV3Schema as Node).properties as Record<string, Node>
    ).status as Node;
    const fields = status.properties as Record<string, Node>;
    expect(Object.keys(fields)).toEqual(
      expect.arrayContaining([
        'dataSecretName',
        'initialization',
        'conditions',
        'observedGeneration',
      ]),
    );
    expect(Object.keys(fields.initialization?.properties as Node)).toEqual(['dataSecretCreated']);
    expect(config[0]?.subresources).toEqual({ status: {} });
    const template = (byName.get('oscarconfigtemplates.bootstrap.oscar.dev')?.spec as Node)
      .versions as Node[];
    const tspec = (
      ((template[0]?.schema as Node).openAPIV3Schema as Node).properties as Record<string, Node>
    ).spec as Node;
    const inner = ((tspec.properties as Record<string, Node>).template as Node).properties as Node;
    expect(Object.keys(inner).sort()).toEqual(['metadata', 'spec']);
  });
});
