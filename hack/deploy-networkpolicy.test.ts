/**
 * deploy/: every Deployment a kustomization installs is fenced by a NetworkPolicy listed in the
 * same kustomization (docs/identity.md, "Tenancy"; docs/operations.md#metrics). The policy must
 * select the Deployment's pods, restrict Ingress, have no rule open to every source, open only
 * ports the pods declare, and admit to the metrics port only namespaces labelled
 * oscar.dev/metrics-scraper: "true" — so a new Deployment without a policy, or a policy widened to
 * everyone, fails here rather than in a tenant's hands.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments, parse } from 'yaml';
import { repoRoot } from '../test/support/tools.js';

const scraperLabel = { 'oscar.dev/metrics-scraper': 'true' };

interface Port {
  name?: string;
  containerPort: number;
}
interface Peer {
  namespaceSelector?: { matchLabels?: Record<string, string> };
  podSelector?: { matchLabels?: Record<string, string> };
  ipBlock?: unknown;
}
interface Rule {
  from?: Peer[];
  ports?: { protocol?: string; port?: number | string }[];
}
interface Manifest {
  kind?: string;
  metadata?: { name?: string; namespace?: string };
  spec?: {
    podSelector?: { matchLabels?: Record<string, string> };
    policyTypes?: string[];
    ingress?: Rule[];
    template?: {
      metadata?: { labels?: Record<string, string> };
      spec?: { containers?: { ports?: Port[] }[] };
    };
  };
}

const subset = (want: Record<string, string> = {}, have: Record<string, string> = {}): boolean =>
  Object.entries(want).every(([k, v]) => have[k] === v);

/** Why `policy` does not fence `deployment`, or undefined when it does. */
export function fenceProblem(deployment: Manifest, policy: Manifest): string | undefined {
  const labels = deployment.spec?.template?.metadata?.labels ?? {};
  const selector = policy.spec?.podSelector?.matchLabels ?? {};
  if (Object.keys(selector).length === 0 || !subset(selector, labels))
    return 'does not select its pods';
  if (policy.metadata?.namespace !== deployment.metadata?.namespace) return 'another namespace';
  if (!policy.spec?.policyTypes?.includes('Ingress')) return 'does not restrict Ingress';
  const ports = (deployment.spec?.template?.spec?.containers ?? []).flatMap((c) => c.ports ?? []);
  const metrics = ports.find((p) => p.name === 'metrics')?.containerPort;
  for (const rule of policy.spec.ingress ?? []) {
    if (!rule.from?.length) return 'a rule open to every source';
    if (!rule.ports?.length) return 'a rule open on every port';
    for (const { port } of rule.ports) {
      if (!ports.some((p) => p.containerPort === port || p.name === port))
        return `opens port ${String(port)}, which its pods do not declare`;
      const scrapersOnly = rule.from.every(
        (peer) =>
          peer.podSelector === undefined &&
          peer.ipBlock === undefined &&
          JSON.stringify(peer.namespaceSelector?.matchLabels) === JSON.stringify(scraperLabel),
      );
      if ((port === metrics || port === 'metrics') && !scrapersOnly)
        return 'its metrics port is open to more than namespaces labelled oscar.dev/metrics-scraper';
    }
  }
  return undefined;
}

/** The objects of the files (not folders) a kustomization lists, by folder. */
async function kustomizations(): Promise<Map<string, Manifest[]>> {
  const deploy = join(repoRoot, 'deploy');
  const out = new Map<string, Manifest[]>();
  for (const entry of await readdir(deploy, { withFileTypes: true })) {
    if (!entry.isDirectory()) continue;
    const dir = join(deploy, entry.name);
    const kustomization = await readFile(join(dir, 'kustomization.yaml'), 'utf8').catch(() => '');
    if (!kustomization) continue;
    const resources = ((parse(kustomization) as { resources?: string[] }).resources ?? []).filter(
      (r) => r.endsWith('.yaml'),
    );
    const objects: Manifest[] = [];
    for (const file of resources) {
      const text = await readFile(join(dir, file), 'utf8');
      for (const doc of parseAllDocuments(text)) objects.push(doc.toJS() as Manifest);
    }
    out.set(entry.name, objects);
  }
  return out;
}

describe('deploy/: every Deployment is fenced by a NetworkPolicy', () => {
  it('each Deployment has a policy in its kustomization that fences it', async () => {
    const byDir = await kustomizations();
    const deployments: string[] = [];
    for (const [dir, objects] of byDir) {
      const policies = objects.filter((o) => o.kind === 'NetworkPolicy');
      for (const d of objects.filter((o) => o.kind === 'Deployment')) {
        const name = `${dir}/${d.metadata?.name ?? '?'}`;
        deployments.push(name);
        const problems = policies.map((p) => fenceProblem(d, p));
        expect(
          problems.includes(undefined),
          `${name}: ${problems.join('; ') || 'no NetworkPolicy'}`,
        ).toBe(true);
      }
    }
    // Both are found, so the walk itself cannot pass by finding nothing.
    expect(deployments).toEqual(
      expect.arrayContaining(['controller/oscar-controller', 'extension/oscar-extension']),
    );
  });

  const deployment: Manifest = {
    kind: 'Deployment',
    metadata: { name: 'd', namespace: 'oscar-system' },
    spec: {
      template: {
        metadata: { labels: { app: 'd' } },
        spec: { containers: [{ ports: [{ name: 'metrics', containerPort: 8080 }] }] },
      },
    },
  };
  const policy = (ingress: Rule[], labels = { app: 'd' }): Manifest => ({
    kind: 'NetworkPolicy',
    metadata: { name: 'd', namespace: 'oscar-system' },
    spec: { podSelector: { matchLabels: labels }, policyTypes: ['Ingress'], ingress },
  });
  const scrapers: Peer = { namespaceSelector: { matchLabels: scraperLabel } };

  it('accepts metrics open to labelled namespaces only, and refuses every widening', () => {
    expect(fenceProblem(deployment, policy([{ from: [scrapers], ports: [{ port: 8080 }] }]))).toBe(
      undefined,
    );
    expect(fenceProblem(deployment, policy([{ ports: [{ port: 8080 }] }]))).toMatch(/every source/);
    expect(fenceProblem(deployment, policy([{ from: [scrapers] }]))).toMatch(/every port/);
    expect(fenceProblem(deployment, policy([{ from: [{}], ports: [{ port: 8080 }] }]))).toMatch(
      /metrics port/,
    );
    expect(
      fenceProblem(deployment, policy([{ from: [scrapers], ports: [{ port: 9090 }] }])),
    ).toMatch(/9090/);
    expect(fenceProblem(deployment, policy([], { app: 'other' }))).toMatch(/select/);
  });
});
