// A decompression bomb fed to Cluster API's extension as its own process (`oscar extension serve`,
// what deploy/extension/deployment.yaml runs): one unauthenticated CanUpdateMachine request naming
// an OSC whose reconcile Secret's config.json.gz inflates to 700 MiB. The extension answers with
// the verdict only (not in place), logs the refusal, stays alive and answering with its peak RSS
// under its Deployment's memory limit (256Mi, read from the manifest), and answers the next
// request (positive control). Before bounded decoding (api/gunzip.ts) one such request OOM-killed
// it.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import { parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestPki } from '../../hack/testenv/certs.js';
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
import { clusterUnavailable, kubectl, testEnvInfo, uniqueName } from './support/cluster.js';

const MiB = 1024 * 1024;

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

/** gzip of `mib` MiB of zeros, made in a stream (the test never holds the inflated bytes). */
async function bomb(mib: number): Promise<Buffer> {
  const zero = Buffer.alloc(MiB);
  const out: Buffer[] = [];
  await pipeline(
    Readable.from(
      (function* () {
        for (let i = 0; i < mib; i++) yield zero;
      })(),
    ),
    createGzip({ level: 9 }),
    async (zipped: AsyncIterable<Buffer>) => {
      for await (const c of zipped) out.push(c);
    },
  );
  return Buffer.concat(out);
}

/** Peak resident memory of a process (Linux /proc VmHWM), in bytes. */
function peakRss(pid: number): number {
  const line = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${String(pid)}/status`, 'utf8'));
  return Number(line?.[1] ?? 'NaN') * 1024;
}

const api = clusterUnavailable === null ? new Api() : undefined;
let ns = '';
let dir = '';
let ext: ControllerProcess | undefined;
let url = '';
let ca: Buffer = Buffer.alloc(0);

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

beforeAll(async () => {
  if (!api) return;
  ns = uniqueName('bombs-ext');
  const created = await kubectl(['create', 'namespace', ns]);
  if (created.code !== 0) throw new Error(created.stderr);
  dir = await mkdtemp(join(tmpdir(), 'oscar-bomb-ext-'));
  const pki = new TestPki(dir);
  await pki.init();
  const pair = await pki.issueServing(['127.0.0.1'], []);
  await writeFile(join(dir, 'tls.crt'), await readFile(pair.certPath));
  await writeFile(join(dir, 'tls.key'), await readFile(pair.keyPath));
  ca = await readFile(join(dir, 'ca.crt'));
  ext = spawnOscar('extension', [
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
  ]);
  url = await waitFor(
    'the extension listening',
    () => {
      const line = ext
        ?.output()
        .split('\n')
        .find((l) => l.includes('"listening"') && l.includes('"url"'));
      return Promise.resolve(line ? (JSON.parse(line) as { url: string }).url : undefined);
    },
    { timeoutMs: 60_000, onTimeout: () => ext?.output() ?? '' },
  );
});

afterAll(async () => {
  if (ext) await stopProcess(ext);
  if (ns) await kubectl(['delete', 'namespace', ns, '--wait=false']);
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
      // positive control: alive and answering
      const again = await canUpdate('fine', 'fine');
      expect(JSON.parse(again.body)).toMatchObject({
        status: 'Success',
        message: 'reconcileRef unchanged (fine)',
      });
    }, 120_000);
  },
);
