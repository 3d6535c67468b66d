/**
 * Every metric the controller and the agent register follows Prometheus' naming conventions and
 * is documented in docs/operations.md with its type and labels — and every documented metric
 * exists.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { AgentMetrics } from '../../agent/metrics.js';
import { createMetrics } from '../../controller/runtime/metrics.js';
import { createExtensionMetrics } from '../../controller/extension/metrics.js';

interface Described {
  name: string;
  type: string;
  labels: string[];
}

async function described(registry: Registry): Promise<Described[]> {
  const json = await registry.getMetricsAsJSON();
  return json.map((m) => ({
    name: m.name,
    type: String(m.type),
    labels: [
      ...new Set(
        m.values.flatMap((v) =>
          Object.keys(v.labels).filter((l) => l !== 'le' && l !== 'quantile'),
        ),
      ),
    ].sort(),
  }));
}

/** The metrics table of docs/operations.md: name → type and label names. */
function documented(): Map<string, { type: string; labels: string[] }> {
  const text = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'operations.md'), 'utf8');
  const out = new Map<string, { type: string; labels: string[] }>();
  for (const m of text.matchAll(/^\| `(oscar_[a-z_]+)` \| (\w+) \|([^|]*)\|/gm)) {
    // a label is named before its values (`result`: `written`, …) or its note (`namespace` (…));
    // a cell of names only (`version`, `nodejs`) lists labels whose values are free
    const cell = m[3] ?? '';
    const named = [...cell.matchAll(/`([a-z]+)`(?=:| \()/g)].map((l) => l[1] ?? '');
    const labels =
      named.length > 0 ? named : [...cell.matchAll(/`([a-z]+)`/g)].map((l) => l[1] ?? '');
    out.set(m[1] ?? '', { type: m[2] ?? '', labels: [...new Set(labels)].sort() });
  }
  return out;
}

async function everyMetric(): Promise<Described[]> {
  const controller = createMetrics({ version: '0.0.0' });
  // put one sample on each labelled metric, so its label names show
  controller.reconciles.inc({ result: 'written' });
  controller.writes.inc({ resource: 'secrets', verb: 'apply' });
  controller.referencedSecretReads.inc({ result: 'found' });
  controller.watchErrors.inc({ informer: 'configmaps', namespace: '' });
  controller.rolloutReconciles.inc({ result: 'ok' });
  controller.identityDenials.inc({ reason: 'WrongSubject' });
  controller.sources.oscs = () => [
    { status: { rollout: { phase: 'Paused', pauseReason: 'FailureThreshold' } } },
  ];
  const extension = createExtensionMetrics({ version: '0.0.0', defaultMetrics: false });
  extension.requests.inc({ hook: 'Discovery', status: 'Success' });
  extension.requestDuration.observe({ hook: 'Discovery' }, 0.01);
  const agent = new AgentMetrics('0.0.0');
  agent.collectProcessMetrics();
  agent.applies.inc({ result: 'success' });
  agent.unitJobs.inc({ job: 'restart' });
  agent.driftItems.set({ kind: 'path', policy: 'Report' }, 1);
  agent.driftDetected.inc({ kind: 'path', trigger: 'watch' });
  agent.driftReverts.inc({ result: 'success' });
  agent.driftChecked('audit', 3);
  return [
    ...(await described(controller.registry)),
    ...(await described(agent.registry)),
    ...(await described(extension.registry)),
  ];
}

describe('metrics', () => {
  it('follow the naming conventions: namespace, _total on counters only, units on histograms', async () => {
    for (const m of await everyMetric()) {
      expect(m.name, m.name).toMatch(/^[a-z][a-z0-9_]*$/);
      expect(m.name, `${m.name}: oscar's own or the standard process/nodejs ones`).toMatch(
        /^(oscar_(controller|agent|extension)_|process_|nodejs_)/,
      );
      if (!m.name.startsWith('oscar_')) continue; // prom-client's standard set, as it names them
      if (m.type === 'counter') expect(m.name, m.name).toMatch(/_total$/);
      else expect(m.name, m.name).not.toMatch(/_total$/);
      if (m.type === 'histogram') expect(m.name, m.name).toMatch(/_(seconds|bytes)$/);
      expect(m.name, `${m.name} uses base units`).not.toMatch(
        /_(ms|milliseconds|microseconds|minutes|hours|kb|mb|kib|mib)(_|$)/,
      );
      if (m.name.includes('timestamp')) expect(m.name).toMatch(/_timestamp_seconds$/);
    }
  });

  it('are each documented in docs/operations.md with their type and labels, and only those', async () => {
    const docs = documented();
    const ours = (await everyMetric()).filter((m) => m.name.startsWith('oscar_'));
    expect(ours.length).toBeGreaterThanOrEqual(16);
    for (const m of ours) {
      const doc = docs.get(m.name);
      expect(doc, `${m.name} is in the table`).toBeDefined();
      expect(doc?.type, `${m.name}'s type`).toBe(m.type);
      expect(doc?.labels, `${m.name}'s labels`).toEqual(m.labels);
    }
    expect([...docs.keys()].sort()).toEqual(ours.map((m) => m.name).sort());
  });
});

describe('the controller’s gauges read from its caches at scrape time', () => {
  it('count paused rollouts by pauseReason and OscarConfigs waiting at NotRequested', async () => {
    const m = createMetrics({ defaultMetrics: false });
    const text = async (): Promise<string> => m.registry.metrics();
    // no sources yet (a standby's caches do not run): nothing paused, nothing waiting
    expect(await text()).toContain('oscar_controller_oscarconfigs_identity_not_requested 0');
    expect(await text()).not.toMatch(/oscar_controller_rollouts_paused\{/);
    const paused = (reason?: string) => ({
      status: { rollout: { phase: 'Paused', ...(reason ? { pauseReason: reason } : {}) } },
    });
    let oscs = [
      paused('FailureThreshold'),
      paused('FailureThreshold'),
      paused('Manual'),
      { status: { rollout: { phase: 'Progressing' } } },
      {},
    ];
    m.sources.oscs = () => oscs;
    const identity = (status: string, reason: string) => ({
      status: { conditions: [{ type: 'NodeIdentity', status, reason }] },
    });
    m.sources.configs = () => [
      identity('False', 'NotRequested'),
      identity('False', 'Awaiting'),
      identity('True', 'Issued'),
      { status: { conditions: [{ type: 'Ready', status: 'False', reason: 'NotRequested' }] } },
    ];
    const first = await text();
    expect(first).toContain('oscar_controller_rollouts_paused{reason="FailureThreshold"} 2');
    expect(first).toContain('oscar_controller_rollouts_paused{reason="Manual"} 1');
    expect(first).toContain('oscar_controller_oscarconfigs_identity_not_requested 1');
    // resumed: the series goes, it does not stay at its last value
    oscs = [paused('Manual')];
    const second = await text();
    expect(second).not.toContain('reason="FailureThreshold"');
    expect(second).toContain('oscar_controller_rollouts_paused{reason="Manual"} 1');
  });
});
