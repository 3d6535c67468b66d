// The generated CRDs against the real API server: accepted and Established, the
// schema and CEL rules refuse bad OperatingSystemConfigs with a message that names
// the field, and the examples are accepted and read back unchanged.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ApiextensionsV1Api } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { adminKubeConfig, createTestNamespace, skipWithoutCluster } from './support/cluster.js';
import { objectApi, OSC_API_VERSION, refusal } from './support/objects.js';

skipWithoutCluster();

const repoRoot = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..');

type Json = Record<string, unknown>;
/** Plain-object view of an OSC (client-node's metadata type is a class). */
interface Osc {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  spec: Json;
}

/** A valid OSC every invalid case starts from, so each case breaks exactly one thing. */
function validOsc(name: string, namespace: string): Osc {
  return {
    apiVersion: OSC_API_VERSION,
    kind: 'OperatingSystemConfig',
    metadata: { name, namespace },
    spec: {
      type: 'ubuntu',
      purpose: 'reconcile',
      units: [
        {
          name: 'demo.service',
          content: '[Service]\nExecStart=/bin/true\n',
          filePaths: ['/etc/demo/demo.conf'],
        },
      ],
      files: [
        {
          path: '/etc/demo/demo.conf',
          permissions: '0644',
          owner: 'root:root',
          content: { inline: { data: 'hello\n' } },
        },
      ],
      packages: [{ name: 'curl' }],
      cri: { name: 'containerd', cgroupDriver: 'systemd' },
    },
  };
}

const unit0 = (s: Json): Json => (s.units as Json[])[0] as Json;
const file0 = (s: Json): Json => (s.files as Json[])[0] as Json;

interface InvalidCase {
  name: string;
  /** Breaks the spec of a valid OSC in place. */
  mutate: (spec: Json) => void;
  /** The field path the API server must name, then what it must say about it. */
  field: string;
  message: RegExp;
}

const invalidCases: InvalidCase[] = [
  {
    name: 'spec.type missing',
    mutate: (s) => delete s.type,
    field: 'spec.type',
    message: /Required value/,
  },
  {
    name: 'spec.purpose missing',
    mutate: (s) => delete s.purpose,
    field: 'spec.purpose',
    message: /Required value/,
  },
  {
    name: 'spec.purpose not an allowed value',
    mutate: (s) => (s.purpose = 'install'),
    field: 'spec.purpose',
    message: /Unsupported value: "install": supported values: "provision", "reconcile"/,
  },
  {
    name: 'spec.type not a DNS label',
    mutate: (s) => (s.type = 'Ubuntu_22'),
    field: 'spec.type',
    message: /should match '\^\[a-z0-9\]/,
  },
  {
    name: 'spec.format not an allowed value',
    mutate: (s) => (s.format = 'yaml'),
    field: 'spec.format',
    message: /Unsupported value: "yaml"/,
  },
  {
    name: 'unit name without a type suffix',
    mutate: (s) => (unit0(s).name = 'kubelet'),
    field: 'spec.units[0].name',
    message: /should match/,
  },
  {
    name: 'masked unit that has content (CEL)',
    mutate: (s) => (unit0(s).mask = true),
    field: 'spec.units[0]',
    message: /a masked unit has no content: drop content or mask/,
  },
  {
    name: 'unit onChange not an allowed value',
    mutate: (s) => (unit0(s).onChange = 'kill'),
    field: 'spec.units[0].onChange',
    message: /Unsupported value: "kill"/,
  },
  {
    name: 'drop-in name not ending in .conf',
    mutate: (s) => (unit0(s).dropIns = [{ name: 'override.txt', content: '[Service]\n' }]),
    field: 'spec.units[0].dropIns[0].name',
    message: /should match/,
  },
  {
    name: 'two units with the same name (list map key)',
    mutate: (s) => (s.units as Json[]).push({ name: 'demo.service' }),
    field: 'spec.units[1]',
    message: /Duplicate value/,
  },
  {
    name: 'relative file path',
    mutate: (s) => (file0(s).path = 'etc/demo.conf'),
    field: 'spec.files[0].path',
    message: /should match '\^\/'/,
  },
  {
    name: 'file path with a ".." segment (CEL)',
    mutate: (s) => (file0(s).path = '/etc/../shadow'),
    field: 'spec.files[0].path',
    message: /path must be absolute and normalised/,
  },
  {
    name: 'file path with a trailing slash (CEL)',
    mutate: (s) => (file0(s).path = '/etc/demo/'),
    field: 'spec.files[0].path',
    message: /path must be absolute and normalised/,
  },
  {
    name: 'permissions as a YAML integer (0644 read as 420) (CEL)',
    mutate: (s) => (file0(s).permissions = 420),
    field: 'spec.files[0].permissions',
    message: /permissions must be a quoted octal string such as "0644"/,
  },
  {
    name: 'permissions not octal (pattern on the string branch of int-or-string)',
    mutate: (s) => (file0(s).permissions = '0988'),
    field: 'spec.files[0].permissions',
    message: /should match '\^0\?\[0-7\]\{3,4\}\$'/,
  },
  {
    name: 'owner with three parts',
    mutate: (s) => (file0(s).owner = 'root:root:root'),
    field: 'spec.files[0].owner',
    message: /should match/,
  },
  {
    name: 'file content from two sources (CEL)',
    mutate: (s) =>
      (file0(s).content = { inline: { data: 'x' }, secretRef: { name: 's', key: 'k' } }),
    field: 'spec.files[0].content',
    message: /set exactly one of content.inline, content.secretRef, content.configMapRef/,
  },
  {
    name: 'file content with no source (CEL)',
    mutate: (s) => (file0(s).content = {}),
    field: 'spec.files[0].content',
    message: /set exactly one of content.inline, content.secretRef, content.configMapRef/,
  },
  {
    name: 'inline encoding not an allowed value',
    mutate: (s) => (file0(s).content = { inline: { encoding: 'gzip', data: 'x' } }),
    field: 'spec.files[0].content.inline.encoding',
    message: /Unsupported value: "gzip"/,
  },
  {
    name: 'secretRef without a key',
    mutate: (s) => (file0(s).content = { secretRef: { name: 's' } }),
    field: 'spec.files[0].content.secretRef.key',
    message: /Required value/,
  },
  {
    name: 'packages on flatcar (CEL with fieldPath)',
    mutate: (s) => (s.type = 'flatcar'),
    field: 'spec.packages',
    message: /flatcar has no package manager: remove spec.packages/,
  },
  {
    name: 'container runtime other than containerd',
    mutate: (s) => (s.cri = { name: 'docker' }),
    field: 'spec.cri.name',
    message: /Unsupported value: "docker"/,
  },
  {
    name: 'a rollout policy on a provision OSC (CEL)',
    mutate: (s) => {
      s.purpose = 'provision';
      s.rollout = { maxUnavailable: 1 };
    },
    field: 'spec.rollout',
    message: /spec.rollout applies to purpose reconcile only/,
  },
  {
    name: 'maxUnavailable negative (CEL on the integer branch of int-or-string)',
    mutate: (s) => (s.rollout = { maxUnavailable: -1 }),
    field: 'spec.rollout.maxUnavailable',
    message: /must be a count of nodes \(0 or more\) or a percentage/,
  },
  {
    name: 'maxUnavailable a word (pattern on the string branch)',
    mutate: (s) => (s.rollout = { maxUnavailable: 'half' }),
    field: 'spec.rollout.maxUnavailable',
    message: /should match/,
  },
  {
    name: 'soak not below the progress deadline (CEL)',
    mutate: (s) => (s.rollout = { soakSeconds: 120, progressDeadlineSeconds: 60 }),
    field: 'spec.rollout.soakSeconds',
    message: /soakSeconds must be below progressDeadlineSeconds/,
  },
  {
    name: 'a health check with both exec and httpGet (CEL)',
    mutate: (s) =>
      (s.rollout = {
        healthChecks: [{ name: 'k', exec: { command: ['/bin/true'] }, httpGet: { port: 10248 } }],
      }),
    field: 'spec.rollout.healthChecks[0]',
    message: /set exactly one of exec, httpGet/,
  },
  {
    name: 'two health checks with one name (list-map key)',
    mutate: (s) =>
      (s.rollout = {
        healthChecks: [
          { name: 'k', exec: { command: ['/bin/true'] } },
          { name: 'k', httpGet: { port: 1 } },
        ],
      }),
    field: 'spec.rollout.healthChecks[1]',
    message: /Duplicate value/,
  },
  {
    name: 'onChange: reboot on a provision OSC (CEL)',
    mutate: (s) => {
      s.purpose = 'provision';
      file0(s).onChange = 'reboot';
    },
    field: 'spec.purpose',
    message: /onChange: reboot applies to purpose reconcile only/,
  },
  {
    name: 'onChange: reboot with nothing to reboot for (CEL)',
    mutate: (s) => (s.units = [{ name: 'modules.service', onChange: 'reboot' }]),
    field: 'spec.units[0].onChange',
    message: /onChange: reboot has nothing to reboot for/,
  },
  {
    name: 'a drain policy that waits for nothing',
    mutate: (s) => (s.rollout = { drain: { timeoutSeconds: 0 } }),
    field: 'spec.rollout.drain.timeoutSeconds',
    message: /should be greater than or equal to 1/,
  },
];

describe('CRDs', () => {
  it('are accepted, Established and served', async () => {
    const ext = adminKubeConfig().makeApiClient(ApiextensionsV1Api);
    for (const name of [
      'operatingsystemconfigs.oscar.dev',
      'operatingsystemconfignodes.oscar.dev',
    ]) {
      const crd = await ext.readCustomResourceDefinition({ name });
      const status = (type: string): string | undefined =>
        crd.status?.conditions?.find((c) => c.type === type)?.status;
      expect(status('NamesAccepted'), name).toBe('True');
      expect(status('Established'), name).toBe('True');
      expect(crd.status?.acceptedNames?.kind, name).toBe(crd.spec.names.kind);
    }
    const list = await objectApi(adminKubeConfig()).list(OSC_API_VERSION, 'OperatingSystemConfig');
    expect(list.items).toBeInstanceOf(Array);
  });
});

describe('the API server refuses invalid OperatingSystemConfigs', () => {
  it('has at least 12 distinct cases', () => {
    expect(new Set(invalidCases.map((c) => c.name)).size).toBeGreaterThanOrEqual(12);
  });

  it.each(invalidCases)('$name', async (c) => {
    const ns = await createTestNamespace('invalid');
    const api = objectApi(adminKubeConfig());
    const good = validOsc('good', ns);
    // The baseline really is valid (dry run): the refusal below is caused by the mutation only.
    await api.create(good, undefined, 'All');
    const bad = validOsc('bad', ns);
    c.mutate(bad.spec);
    const r = await refusal(() => api.create(bad));
    expect(r.code).toBe(422);
    expect(r.message).toContain(`${c.field}:`);
    expect(r.message).toMatch(c.message);
  });

  it('refuses a change of the immutable spec.purpose (transition rule)', async () => {
    const ns = await createTestNamespace('immutable');
    const api = objectApi(adminKubeConfig());
    const created = await api.create(validOsc('osc', ns));
    const changed: Osc = { ...created, spec: { ...created.spec, purpose: 'provision' } };
    const r = await refusal(() => api.replace(changed));
    expect(r.code).toBe(422);
    expect(r.message).toContain('spec.purpose:');
    expect(r.message).toContain('purpose is immutable: create a new OperatingSystemConfig instead');
  });

  it('refuses a name over 63 characters, naming the field and why; 63 is taken (red-team round 3)', async () => {
    const ns = await createTestNamespace('longname');
    const api = objectApi(adminKubeConfig());
    await api.create(validOsc('a'.repeat(63), ns));
    const r = await refusal(() => api.create(validOsc('a'.repeat(64), ns)));
    expect(r.code).toBe(422);
    expect(r.message).toContain('metadata.name must be at most 63 characters');
    expect(r.message).toContain('oscar.dev/osc=<name>');
  });
});

describe('examples/*.yaml', () => {
  it('are all accepted and read back unchanged', async () => {
    const dir = join(repoRoot, 'examples');
    const files = (await readdir(dir)).filter((f) => f.endsWith('.yaml')).sort();
    expect(files.length).toBeGreaterThan(0);
    const ns = await createTestNamespace('examples');
    const api = objectApi(adminKubeConfig());
    for (const file of files) {
      const docs = (await readFile(join(dir, file), 'utf8'))
        .split(/^---$/m)
        .map((d) => parse(d) as Osc | null)
        .filter((d): d is Osc => d !== null);
      for (const doc of docs) {
        const obj: Osc = { ...doc, metadata: { ...doc.metadata, namespace: ns } };
        await api.create(obj);
        const back = await api.read<Osc>({
          apiVersion: obj.apiVersion,
          kind: obj.kind,
          metadata: { name: obj.metadata.name, namespace: ns },
        });
        expect(back.spec, `${file}: ${obj.metadata.name}`).toEqual(doc.spec);
        expect(back.metadata.labels, file).toEqual(doc.metadata.labels);
      }
    }
  });
});
