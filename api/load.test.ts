import { describe, expect, it } from 'vitest';
import {
  describeDocument,
  formatProblem,
  loadDocuments,
  namesDocuments,
  pathSegments,
} from './load.js';

const OSC = `apiVersion: oscar.dev/v1alpha1
kind: OperatingSystemConfig
metadata:
  name: web
spec:
  type: ubuntu
  purpose: reconcile
  files:
    - path: /etc/a
      content: {inline: {data: a}}
    - path: /etc/b
      permissions: 0644
      content: {inline: {data: b}}
`;

describe('loadDocuments', () => {
  it('knows the line of every field (its key), and of the nearest parent of a missing one', () => {
    const [doc] = loadDocuments(OSC);
    expect(doc?.line).toBe(1);
    expect(doc?.lineOf('spec.files[1].permissions')).toBe(12);
    expect(doc?.lineOf('spec.files[1]')).toBe(11);
    expect(doc?.lineOf('spec.type')).toBe(6);
    // not in the document: where its parent starts
    expect(doc?.lineOf('spec.files[1].owner')).toBe(11);
    expect(doc?.lineOf('spec.units')).toBe(5); // the line that names spec
    expect(doc?.lineOf('')).toBe(1);
  });

  it('counts lines across documents, and places a syntax error on its own line', () => {
    const docs = loadDocuments(`# leading comment\n---\n${OSC}---\nkind: [broken\n`);
    expect(docs.map((d) => d.line)).toEqual([3, 17]);
    expect(docs[0]?.lineOf('spec.files[1].permissions')).toBe(14);
    expect(docs[1]?.errors[0]).toMatchObject({ line: expect.any(Number) as number });
    expect(docs[1]?.errors[0]?.message).toMatch(/^YAML syntax error at column \d+/);
  });

  it('tolerates empty documents (a trailing ---, comments only) and marks them', () => {
    const docs = loadDocuments(`${OSC}---\n# nothing\n---\n`);
    expect(docs.map((d) => d.role)).toEqual(['osc', 'empty', 'empty']);
    expect(docs.every((d) => d.errors.length === 0)).toBe(true);
    expect(namesDocuments(docs)).toBe(false);
  });

  it('refuses a file with nothing in it', () => {
    for (const text of ['', '---\n', '# just a comment\n---\n---\n']) {
      const docs = loadDocuments(text);
      expect(docs).toHaveLength(1);
      expect(docs[0]?.errors[0]?.message).toMatch(/has no YAML documents/);
    }
  });

  it('skips objects of other kinds, but checks what means to be an OSC', () => {
    const role = (head: string): string | undefined => loadDocuments(`${head}\n`)[0]?.role;
    expect(role('apiVersion: v1\nkind: Secret\nmetadata: {name: join}')).toBe('other');
    expect(role('apiVersion: v1\nkind: ConfigMap')).toBe('other');
    expect(role('apiVersion: oscar.dev/v1alpha1\nkind: OperatingSystemConfigNode')).toBe('other');
    // no kind, a misspelt kind, another kind in oscar's group: an OSC with a wrong field
    expect(role('metadata: {name: x}')).toBe('osc');
    expect(role('apiVersion: oscar.dev/v1alpha1\nkind: OperatingSystemConfigs')).toBe('osc');
    expect(role('apiVersion: v1\nkind: operatingsystemconfig')).toBe('osc');
    expect(role('apiVersion: oscar.dev/v1alpha1\nkind: Secret')).toBe('osc');
    expect(role('- a list')).toBe('osc');
    expect(describeDocument({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'j' } })).toBe(
      'v1 Secret "j"',
    );
  });

  it('reads the items of a kind: List (kubectl get -o yaml) as documents, with their own lines', () => {
    const item = (name: string): string =>
      `- apiVersion: oscar.dev/v1alpha1\n  kind: OperatingSystemConfig\n  metadata:\n    name: ${name}\n  spec:\n    type: ubuntu\n`;
    const text = `apiVersion: v1\nitems:\n${item('a')}${item('b')}- apiVersion: v1\n  kind: Secret\n  metadata: {name: s}\nkind: List\nmetadata:\n  resourceVersion: ""\n---\n${OSC}`;
    const docs = loadDocuments(text);
    expect(docs.map((d) => [d.index, d.role, d.line])).toEqual([
      [1, 'osc', 3],
      [2, 'osc', 9],
      [3, 'other', 15],
      [4, 'osc', 22],
    ]);
    expect((docs[1]?.value as { metadata: { name: string } }).metadata.name).toBe('b');
    expect(docs[1]?.lineOf('spec.type')).toBe(14);
    expect(
      loadDocuments('apiVersion: v1\nkind: List\nitems: []\n')[0]?.errors[0]?.message,
    ).toContain('no YAML documents');
  });
});

describe('problems as lines', () => {
  it('reads file:line: path: message, naming the document when the stream has several', () => {
    const e = { path: 'spec.type', message: 'is required' };
    expect(formatProblem('a.yaml', 7, e)).toBe('a.yaml:7: spec.type: is required');
    expect(formatProblem('a.yaml', 7, e, 2)).toBe('a.yaml:7: document 2: spec.type: is required');
    expect(formatProblem('a.yaml', 1, { path: '', message: 'empty' })).toBe('a.yaml:1: empty');
  });

  it('splits field paths into segments', () => {
    expect(pathSegments('spec.files[2].content.inline.data')).toEqual([
      'spec',
      'files',
      2,
      'content',
      'inline',
      'data',
    ]);
    expect(pathSegments('spec.units[0].dropIns[1].name')).toEqual([
      'spec',
      'units',
      0,
      'dropIns',
      1,
      'name',
    ]);
    expect(pathSegments('')).toEqual([]);
  });
});
