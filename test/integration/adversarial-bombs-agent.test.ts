// A decompression bomb fed to the agent as its own process (bin/oscar.js agent, what a node runs):
// its reconcile Secret's config.json.gz inflates to 700 MiB from under 1 MiB. The agent refuses it
// (Degraded, the reason in its report), keeps its last good state on disk, stays alive inside a
// memory cgroup limited to the shipped unit's MemoryMax (controller/bootstrap/additions.ts: 512M;
// test/support/memory-cgroup.ts: the kernel holds the limit), and
// applies the next good Secret (positive control). Before bounded decoding (api/gunzip.ts) the
// agent inflated the whole payload first.
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { config, desiredOf, file, unit } from '../../agent/testing/fixtures.js';
import { ANNOTATION_CHECKSUM, encodeConfigData, KEY_CONFIG_GZIP } from '../../api/secret.js';
import type { OperatingSystemConfigNode } from '../../api/schema.js';
import { AGENT_MEMORY_MAX } from '../../controller/bootstrap/additions.js';
import { isNotFound } from '../../kube/client.js';
import {
  Api,
  spawnOscar,
  stopProcess,
  waitFor,
  type ControllerProcess,
} from './controller-support.js';
import { bomb, MiB, peakRss } from '../support/bombs.js';
import { memoryCgroup, type MemoryCgroup } from '../support/memory-cgroup.js';
import {
  clusterUnavailable,
  createSuiteNamespace,
  kubectl,
  testEnvInfo,
  uniqueName,
} from './support/cluster.js';

const SECRET = 'oscar-w-reconcile';

function version(n: string) {
  return desiredOf(
    config(
      [unit('app.service', { filePaths: ['/etc/app/app.conf'] })],
      [file('/etc/app/app.conf', `version ${n}\n`)],
    ),
  );
}

const api = clusterUnavailable === null ? new Api() : undefined;
let ns = '';
let removeNamespace: (() => Promise<void>) | undefined;
let root = '';
const node = uniqueName('bomb-node');
let agent: ControllerProcess | undefined;
let cgroup: MemoryCgroup | undefined;

async function putSecret(data: Record<string, Buffer>, checksum: string): Promise<void> {
  if (!api) return;
  const path = `/api/v1/namespaces/${ns}/secrets/${SECRET}`;
  const body = {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: SECRET, namespace: ns, annotations: { [ANNOTATION_CHECKSUM]: checksum } },
    data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, v.toString('base64')])),
  };
  try {
    await api.http.request('PUT', path, { body });
  } catch (error) {
    if (!isNotFound(error)) throw error;
    await api.http.request('POST', `/api/v1/namespaces/${ns}/secrets`, { body });
  }
}

async function nodeStatus(): Promise<OperatingSystemConfigNode['status']> {
  try {
    const o = await api?.http.request<OperatingSystemConfigNode>(
      'GET',
      `/apis/oscar.dev/v1alpha1/operatingsystemconfignodes/${node}`,
    );
    return o?.status;
  } catch (error) {
    if (isNotFound(error)) return undefined;
    throw error;
  }
}

const applied = (checksum: string) =>
  waitFor(
    `applied ${checksum.slice(0, 8)}`,
    async () => {
      const st = await nodeStatus();
      return st?.appliedChecksum === checksum ? st : undefined;
    },
    { timeoutMs: 60_000, onTimeout: () => agent?.output() ?? '' },
  );

beforeAll(async () => {
  if (!api) return;
  const suite = await createSuiteNamespace('bombs-agent');
  ns = suite.name;
  removeNamespace = suite.remove;
  root = await mkdtemp(join(tmpdir(), 'oscar-bomb-agent-'));
  await mkdir(join(root, 'var/lib/oscar'), { recursive: true, mode: 0o700 });
});

afterAll(async () => {
  if (agent) await stopProcess(agent);
  await cgroup?.remove();
  await removeNamespace?.();
  await kubectl(['delete', 'operatingsystemconfignode', node, '--ignore-not-found']);
  if (root) await rm(root, { recursive: true, force: true });
});

describe.skipIf(clusterUnavailable !== null)('a decompression bomb in the agent’s Secret', () => {
  it('is refused and reported; the agent keeps its last good state, lives on under its MemoryMax and applies the next Secret', async () => {
    const v1 = version('1');
    await putSecret(encodeConfigData(v1.bytes), v1.checksum);
    // the unit's MemoryMax as the kernel enforces it: the agent in a memory cgroup of its own
    cgroup = memoryCgroup(uniqueName('oscar-bomb-agent'), AGENT_MEMORY_MAX);
    agent = spawnOscar(
      'agent',
      [
        '--kubeconfig',
        testEnvInfo().kubeconfigPath,
        '--namespace',
        ns,
        '--secret',
        SECRET,
        '--node',
        node,
        '--root',
        root,
      ],
      cgroup?.wrap.bind(cgroup),
    );
    await applied(v1.checksum);

    const zipped = await bomb(700);
    expect(zipped.length).toBeLessThan(MiB); // a Secret holds it
    const v2 = version('2');
    await putSecret({ [KEY_CONFIG_GZIP]: zipped }, v2.checksum);
    const refused = await waitFor(
      'the bomb refused in the report',
      async () => {
        const st = await nodeStatus();
        const d = st?.conditions?.find((c) => c.type === 'Degraded');
        return d?.status === 'True' && /more than 32\.0 MiB/.test(st?.lastError?.message ?? '')
          ? st
          : undefined;
      },
      { timeoutMs: 60_000, onTimeout: () => agent?.output() ?? '' },
    );
    expect(refused.appliedChecksum).toBe(v1.checksum);
    expect(await readFile(join(root, 'etc/app/app.conf'), 'utf8')).toBe('version 1\n');
    expect(agent.child.exitCode).toBeNull();
    const peak = peakRss(agent.child.pid ?? 0);
    console.info(`agent peak RSS after the bomb: ${(peak / MiB).toFixed(0)} MiB`);
    expect(peak).toBeLessThan(AGENT_MEMORY_MAX);
    if (cgroup) {
      console.info(
        `agent cgroup (${cgroup.path}): peak ${(cgroup.peak() / MiB).toFixed(0)} MiB, OOM kills ${String(cgroup.oomKills())}`,
      );
      expect(cgroup.oomKills()).toBe(0);
    }

    // positive control: the same process applies the next good Secret
    await putSecret(encodeConfigData(v2.bytes), v2.checksum);
    await applied(v2.checksum);
    expect(await readFile(join(root, 'etc/app/app.conf'), 'utf8')).toBe('version 2\n');
  }, 180_000);
});
