// Decompression bombs fed to the controller as its own process (what its Deployment runs): one
// OSC whose gzip+b64 inline file would inflate to 700 MiB, in under 1 MiB of text. The controller
// refuses it by its field and stays alive inside a memory cgroup limited to its Deployment's memory
// limit (deploy/controller/deployment.yaml: 512Mi; test/support/memory-cgroup.ts), so the kernel,
// not a comparison, holds the limit; an ordinary OSC beside it renders (positive control). Before bounded decoding (api/gunzip.ts) the controller inflated the whole file first.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OperatingSystemConfigSpec } from '../../api/schema.js';
import {
  Api,
  demoSpec,
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

/** The controller Deployment's memory limit. */
const CONTROLLER_LIMIT = 512 * MiB;

const api = clusterUnavailable === null ? new Api() : undefined;
let ns = '';
let removeNamespace: (() => Promise<void>) | undefined;
let controller: ControllerProcess | undefined;
let cgroup: MemoryCgroup | undefined;

beforeAll(async () => {
  if (!api) return;
  const suite = await createSuiteNamespace('bombs');
  ns = suite.name;
  removeNamespace = suite.remove;
  // the Deployment's limit as the kernel enforces it: the controller in a memory cgroup of its own
  cgroup = memoryCgroup(uniqueName('oscar-bomb-controller'), CONTROLLER_LIMIT);
  controller = spawnOscar(
    'controller',
    [
      '--kubeconfig',
      testEnvInfo().kubeconfigPath,
      '--namespace',
      ns,
      '--metrics-addr=0',
      '--no-bootstrap',
    ],
    cgroup?.wrap.bind(cgroup),
  );
});

afterAll(async () => {
  if (controller) await stopProcess(controller);
  await cgroup?.remove();
  await removeNamespace?.();
});

describe.skipIf(clusterUnavailable !== null)('a decompression bomb in an OSC', () => {
  it('is refused by its field; the controller lives on under its memory limit and renders the next OSC', async () => {
    const zipped = await bomb(700);
    const data = zipped.toString('base64');
    expect(data.length).toBeLessThan(MiB); // within the schema's inline limit: the API takes it
    const demo = demoSpec('reconcile');
    const spec: OperatingSystemConfigSpec = {
      ...demo,
      files: [
        ...(demo.files ?? []),
        {
          path: '/etc/bomb',
          content: { inline: { encoding: 'gzip+b64', data } },
        },
      ],
    };
    await api?.applyOsc(ns, 'bomb', spec);
    const refused = await api?.waitCondition(ns, 'bomb', 'Valid', 'False', 90_000);
    const pid = controller?.child.pid ?? 0;
    expect(controller?.child.exitCode).toBeNull();
    const peak = peakRss(pid);
    console.info(`controller peak RSS after the bomb: ${(peak / MiB).toFixed(0)} MiB`);
    expect(peak).toBeLessThan(CONTROLLER_LIMIT);
    if (cgroup) {
      console.info(
        `controller cgroup (${cgroup.path}): peak ${(cgroup.peak() / MiB).toFixed(0)} MiB, OOM kills ${String(cgroup.oomKills())}`,
      );
      expect(cgroup.oomKills()).toBe(0);
    }
    const valid = refused?.status?.conditions?.find((c) => c.type === 'Valid');
    expect(valid?.message).toMatch(/spec\.files\[1\]\.content\.inline\.data.*more than 1\.0 MiB/);
    // positive control: the same process renders an ordinary OSC afterwards
    await api?.applyOsc(ns, 'fine', demoSpec('reconcile'));
    await api?.waitReady(ns, 'fine', 90_000);
    await waitFor('controller alive', () => Promise.resolve(controller?.child.exitCode === null));
  }, 180_000);
});
