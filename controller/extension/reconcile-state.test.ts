import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { canonicalWithChecksum } from '../../api/canonical.js';
import {
  ANNOTATION_CHECKSUM,
  encodeConfigData,
  LABEL_OSC,
  LABEL_PURPOSE,
} from '../../api/secret.js';
import type { ResolvedConfig } from '../../api/resolved.js';
import type { KubeHttp } from '../../kube/client.js';
import { KubeReconcileStates } from './reconcile-state.js';

const MiB = 1024 * 1024;

function serving(data: Record<string, Buffer>, checksum: string): KubeHttp {
  const secret = {
    metadata: {
      labels: { [LABEL_OSC]: 'v1', [LABEL_PURPOSE]: 'reconcile' },
      annotations: { [ANNOTATION_CHECKSUM]: checksum },
    },
    data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, v.toString('base64')])),
  };
  return {
    request: <T>() => Promise.resolve(secret as T),
    stream: () => Promise.reject(new Error('no watch here')),
  };
}

describe('the extension reads a reconcile Secret a request names', () => {
  it('a gzip bomb in it is refused without inflating it (the extension answers on)', async () => {
    const bomb = gzipSync(Buffer.alloc(100 * MiB), { level: 1 });
    const before = process.memoryUsage().arrayBuffers;
    const states = new KubeReconcileStates(serving({ 'config.json.gz': bomb }, 'sha256:x'));
    const got = await states.get('pools', 'v1');
    expect(got).toMatchObject({ missing: expect.stringMatching(/more than 32.0 MiB/) as unknown });
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(64 * MiB);
  });
  it('an ordinary one is read (positive control)', async () => {
    const config = { type: 'ubuntu', purpose: 'reconcile', units: [], files: [], packages: [] };
    const { bytes, checksum } = canonicalWithChecksum(config as unknown as ResolvedConfig);
    const states = new KubeReconcileStates(serving(encodeConfigData(bytes), checksum));
    expect(await states.get('pools', 'v1')).toMatchObject({ osc: 'v1', checksum });
  });
});
