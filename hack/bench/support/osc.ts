/**
 * The benches' OperatingSystemConfig: one shape every API-server bench writes (40 files of ≈0.4 KiB
 * and 10 units by default, ≈24 KiB), its status as the controller writes it, the pool of parallel
 * clients that writes them, and the apply every bench makes of its own OSCs.
 */
import { API_VERSION, OSC_KIND, type OperatingSystemConfigSpec } from '../../../api/schema.js';
import { oscPath } from '../../../controller/osc/writer.js';
import { CONTENT_APPLY_PATCH, type KubeHttp } from '../../../kube/client.js';

export interface BenchOscShape {
  /** Default 40. */
  files?: number;
  /** Default 10; each unit names the file with its own number. */
  units?: number;
  /** Written into the first file, so that a change makes a new rendering. Default 0. */
  generation?: number;
  /** A Secret (key "token") an extra file references; none by default. */
  secretRef?: string;
}

/** The spec of bench OSC `i` (a node pool's): files under /etc/bench and units that read them. */
export function benchOscSpec(i: number, shape: BenchOscShape = {}): OperatingSystemConfigSpec {
  const generation = String(shape.generation ?? 0);
  const files: NonNullable<OperatingSystemConfigSpec['files']> = Array.from(
    { length: shape.files ?? 40 },
    (_, f) => ({
      path: `/etc/bench/app-${String(f)}.conf`,
      permissions: '0644',
      content: {
        inline: {
          data: `# config ${String(f)} of node pool ${String(i)}\n${'key=value\n'.repeat(40)}gen=${f === 0 ? generation : '0'}\n`,
        },
      },
    }),
  );
  const units = Array.from({ length: shape.units ?? 10 }, (_, u) => ({
    name: `bench-${String(u)}.service`,
    content: `[Unit]\nDescription=bench ${String(u)}\n\n[Service]\nExecStart=/bin/sleep infinity\n\n[Install]\nWantedBy=multi-user.target\n`,
    filePaths: [`/etc/bench/app-${String(u)}.conf`],
  }));
  if (shape.secretRef !== undefined) {
    files.push({
      path: '/etc/bench/token',
      permissions: '0600',
      content: { secretRef: { name: shape.secretRef, key: 'token' } },
    });
  }
  return { type: 'ubuntu', purpose: 'reconcile', files, units };
}

/**
 * A Ready status of an OSC's first generation, of the size the controller writes; `note` goes into
 * each condition's message, so that successive writes differ (a bench of updates).
 */
export function benchOscStatus(note?: string): Record<string, unknown> {
  const now = new Date().toISOString();
  const cond = (type: string): Record<string, unknown> => ({
    type,
    status: 'True',
    reason: type,
    message: `${type} message of some length, as the controller writes it${note === undefined ? '' : ` (${note})`}.`,
    lastTransitionTime: now,
    observedGeneration: 1,
  });
  return {
    observedGeneration: 1,
    conditions: [cond('Valid'), cond('Rendered'), cond('Ready')],
    secretRef: { name: 'oscar-x-reconcile' },
    checksum: 'a'.repeat(64),
    checksumShort: 'a'.repeat(12),
    format: 'cloud-config',
    size: 30000,
    nodes: { total: 0, updated: 0, degraded: 0, drifted: 0 },
  };
}

/** Runs fn(0) … fn(n - 1) on `clients` parallel clients; returns the wall time in ms. */
export async function inPool(
  n: number,
  clients: number,
  fn: (i: number) => Promise<void>,
): Promise<number> {
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (next < n) await fn(next++);
    }),
  );
  return performance.now() - t0;
}

/** Server-side applies OSC `name` with `spec` as the field manager "bench" (forced). */
export function applyBenchOsc(
  http: KubeHttp,
  ns: string,
  name: string,
  spec: OperatingSystemConfigSpec,
): Promise<unknown> {
  return http.request('PATCH', oscPath(ns, name), {
    query: { fieldManager: 'bench', force: true },
    contentType: CONTENT_APPLY_PATCH,
    body: { apiVersion: API_VERSION, kind: OSC_KIND, metadata: { name, namespace: ns }, spec },
  });
}
