// A decompression bomb fed to Cluster API's extension as its own process (`oscar extension serve`,
// what deploy/extension/deployment.yaml runs): one unauthenticated CanUpdateMachine request naming
// an OSC whose reconcile Secret's config.json.gz inflates to 700 MiB. The extension answers with
// the verdict only (not in place), logs the refusal, stays alive and answering with its peak RSS
// under its Deployment's memory limit (256Mi, read from the manifest), and answers the next
// request (positive control). Before bounded decoding (api/gunzip.ts) one such request OOM-killed
// it. The limit is the kernel's, not a comparison: the extension runs in a memory cgroup of its
// own limited to the Deployment's figure (test/support/memory-cgroup.ts); with the bound removed
// the kernel OOM-kills it there and the test fails.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ANNOTATION_CHECKSUM,
  KEY_CONFIG_GZIP,
  LABEL_OSC,
  LABEL_PURPOSE,
} from '../../api/secret.js';
import { handlerPath } from '../../controller/extension/hooks.js';
import {
  Api,
  spawnOscar,
  stopProcess,
  waitFor,
  type ControllerProcess,
} from './controller-support.js';
import { bomb, MiB, peakRss } from '../support/bombs.js';
import {
  clusterUnavailable,
  createSuiteNamespace,
  testEnvInfo,
  uniqueName,
} from './support/cluster.js';
import { memoryCgroup, type MemoryCgroup } from '../support/memory-cgroup.js';
import { loopbackServingCert } from '../support/serving-cert.js';

/** The extension Deployment's memory limit, as shipped. */
function shippedLimit(): number {
  const text = readFileSync(
    new URL('../../deploy/extension/deployment.yaml', import.meta.url),
    'utf8',
  );
  const deployment = parseAllDocuments(text)
    .map(
      (d) =>
        d.toJS() as {
          kind?: string;
          spec?: {
            template: { spec: { containers: { resources?: { limits?: { memory?: string } } }[] } };
          };
        },
    )
    .find((d) => d.kind === 'Deployment');
  const memory = deployment?.spec?.template.spec.containers[0]?.resources?.limits?.memory ?? '';
  const m = /^(\d+)Mi$/.exec(memory);
  if (!m) throw new Error(`deploy/extension/deployment.yaml: memory limit ${memory} is not NNNMi`);
  return Number(m[1]) * MiB;
}

const api = clusterUnavailable === null ? new Api() : undefined;
let ns = '';
let removeNamespace: (() => Promise<void>) | undefined;
let dir = '';
let ext: ControllerProcess | undefined;
let url = '';
let ca: Buffer = Buffer.alloc(0);
let cgroup: MemoryCgroup | undefined;

function post(path: string, body: unknown): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { method: 'POST', ca }, (res) => {
      let b = '';
      res.on('data', (d: Buffer) => (b += d.toString()));
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, body: b });
      });
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

function canUpdate(from: string, to: string) {
  const config = (osc: string) => ({
    apiVersion: 'bootstrap.oscar.dev/v1alpha1',
    kind: 'OscarConfig',
    metadata: { name: 'm', namespace: ns },
    spec: { reconcileRef: { name: osc } },
  });
  return post(handlerPath('CanUpdateMachine'), {
    apiVersion: 'hooks.runtime.cluster.x-k8s.io/v1alpha1',
    kind: 'CanUpdateMachineRequest',
    current: { bootstrapConfig: config(from) },
    desired: { bootstrapConfig: config(to) },
  });
}

/** The serving certificate the extension loads, written into `dir` as tls.crt / tls.key. */
async function servingCertificate(): Promise<void> {
  const serving = await loopbackServingCert(dir);
  await writeFile(join(dir, 'tls.crt'), serving.cert);
  await writeFile(join(dir, 'tls.key'), serving.key);
  ca = serving.ca;
}

/** `oscar extension serve` as its own process, in a memory cgroup of the Deployment's limit. */
function spawnExtension(): ControllerProcess {
  // the Deployment's limit as the kernel enforces it: the extension in a memory cgroup of its own
  cgroup = memoryCgroup(uniqueName('oscar-bomb-ext'), shippedLimit());
  return spawnOscar(
    'extension',
    [
      'serve',
      '--kubeconfig',
      testEnvInfo().kubeconfigPath,
      '--listen',
      '127.0.0.1:0',
      '--tls-cert',
      join(dir, 'tls.crt'),
      '--tls-key',
      join(dir, 'tls.key'),
      '--log-format',
      'json',
    ],
    cgroup?.wrap.bind(cgroup),
  );
}

/** The URL from the process's JSON "listening" line. */
function listeningUrl(p: ControllerProcess): Promise<string> {
  return waitFor(
    'the extension listening',
    () => {
      const line = p
        .output()
        .split('\n')
        .find((l) => l.includes('"listening"') && l.includes('"url"'));
      return Promise.resolve(line ? (JSON.parse(line) as { url: string }).url : undefined);
    },
    { timeoutMs: 60_000, onTimeout: () => p.output() },
  );
}

beforeAll(async () => {
  if (!api) return;
  const suite = await createSuiteNamespace('bombs-ext');
  ns = suite.name;
  removeNamespace = suite.remove;
  dir = await mkdtemp(join(tmpdir(), 'oscar-bomb-ext-'));
  await servingCertificate();
  ext = spawnExtension();
  url = await listeningUrl(ext);
});

afterAll(async () => {
  if (ext) await stopProcess(ext);
  await cgroup?.remove();
  await removeNamespace?.();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe.skipIf(clusterUnavailable !== null)(
  'a decompression bomb named by an extension request',
  () => {
    it('is refused with the verdict only; the extension lives on under its memory limit and answers the next request', async () => {
      const limit = shippedLimit();
      const zipped = await bomb(700);
      expect(zipped.length).toBeLessThan(MiB); // a Secret holds it
      await api?.http.request('POST', `/api/v1/namespaces/${ns}/secrets`, {
        body: {
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: {
            name: 'oscar-bomb-reconcile',
            namespace: ns,
            // labelled as the OSC controller labels a reconcile Secret: the extension reads it
            labels: { [LABEL_OSC]: 'bomb', [LABEL_PURPOSE]: 'reconcile' },
            annotations: { [ANNOTATION_CHECKSUM]: 'a'.repeat(64) },
          },
          data: { [KEY_CONFIG_GZIP]: zipped.toString('base64') },
        },
      });
      const reply = await canUpdate('fine', 'bomb');
      expect(reply.status).toBe(200);
      const answer = JSON.parse(reply.body) as { status: string; message?: string };
      expect(answer.message).toMatch(
        /^not in place: reconcile OSCs fine and bomb do not both have a rendering/,
      );
      expect(reply.body).not.toMatch(/MiB|gzip/); // the reason stays in the log
      await waitFor(
        'the refusal in the extension log',
        () => Promise.resolve(/more than 32\.0 MiB/.test(ext?.output() ?? '') ? true : undefined),
        { timeoutMs: 20_000, onTimeout: () => ext?.output() ?? '' },
      );
      expect(ext?.child.exitCode).toBeNull();
      const peak = peakRss(ext?.child.pid ?? 0);
      console.info(
        `extension peak RSS after the bomb: ${(peak / MiB).toFixed(0)} MiB (limit ${String(limit / MiB)} MiB)`,
      );
      expect(peak).toBeLessThan(limit);
      if (cgroup) {
        console.info(
          `extension cgroup (${cgroup.path}, limit ${String(limit / MiB)} MiB): peak ${(cgroup.peak() / MiB).toFixed(0)} MiB, OOM kills ${String(cgroup.oomKills())}`,
        );
        expect(cgroup.oomKills()).toBe(0);
      }
      // positive control: alive and answering
      const again = await canUpdate('fine', 'fine');
      expect(JSON.parse(again.body)).toMatchObject({
        status: 'Success',
        message: 'reconcileRef unchanged (fine)',
      });
    }, 120_000);
  },
);
