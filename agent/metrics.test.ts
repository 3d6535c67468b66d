import { afterEach, describe, expect, it } from 'vitest';
import { AgentMetrics, startHealthServer, type HealthServer } from './metrics.js';

let server: HealthServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

describe('the agent health server', () => {
  it('serves /healthz with the applied checksum and /metrics with the agent counters', async () => {
    const metrics = new AgentMetrics();
    metrics.apiRequests.inc();
    metrics.apiRequests.inc();
    const state: { applied?: string } = {};
    server = await startHealthServer('127.0.0.1:0', metrics, () => state.applied);
    const base = `http://${server.address}`;
    expect(await (await fetch(`${base}/healthz`)).text()).toBe('ok applied=none\n');
    state.applied = 'abc123';
    expect(await (await fetch(`${base}/healthz?verbose`)).text()).toBe('ok applied=abc123\n');
    const res = await fetch(`${base}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/plain');
    const text = await res.text();
    expect(text).toMatch(/^oscar_agent_api_requests_total 2$/m);
    expect(text).toMatch(/^process_cpu_seconds_total /m); // process metrics when served
  });

  it('answers 404 for other paths and 405 for other methods', async () => {
    server = await startHealthServer('127.0.0.1:0', new AgentMetrics(), () => undefined);
    const base = `http://${server.address}`;
    const missing = await fetch(`${base}/nope`);
    expect(missing.status).toBe(404);
    expect(await missing.text()).toMatch(/\/healthz/);
    const post = await fetch(`${base}/healthz`, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
    const head = await fetch(`${base}/healthz`, { method: 'HEAD' });
    expect(head.status).toBe(200);
  });

  it('refuses a bad address with the flag name', async () => {
    await expect(
      startHealthServer('localhost:http', new AgentMetrics(), () => undefined),
    ).rejects.toThrow(/--metrics-addr must be host:port/);
  });
});

describe('the agent metrics reporter', () => {
  const value = async (m: AgentMetrics, name: string): Promise<number | undefined> =>
    (await m.registry.getSingleMetric(name)?.get())?.values[0]?.value;

  it('is in sync after a restart when the desired state is the one restored from disk', async () => {
    const metrics = new AgentMetrics();
    const r = metrics.reporter();
    r.restored?.('a'.repeat(64));
    r.desired('a'.repeat(64));
    expect(await value(metrics, 'oscar_agent_in_sync')).toBe(1);
    r.desired('b'.repeat(64));
    expect(await value(metrics, 'oscar_agent_in_sync')).toBe(0);
  });
});

describe('the drift metrics', () => {
  it('counts drifted items by kind and policy, detections by trigger, reverts by result', async () => {
    const metrics = new AgentMetrics();
    const r = metrics.reporter();
    const item = (key: string, policy: 'Report' | 'Revert') => ({
      key,
      reason: 'x',
      expected: 'e',
      found: 'f',
      policy,
      since: new Date(),
    });
    const items = [
      item('path:/a', 'Report'),
      item('path:/b', 'Revert'),
      item('unit:u', 'Revert'),
      item('package:chrony', 'Report'),
    ];
    r.drift?.({ items, added: items, resolved: [], trigger: 'watch', reverted: false });
    r.reverted?.({ checksum: 'c', actions: [], resumed: false, touchedUnits: [] }, 1);
    r.revertFailed?.(new Error('x'));
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/^oscar_agent_drift_items\{kind="path",policy="Report"\} 1$/m);
    expect(text).toMatch(/^oscar_agent_drift_items\{kind="unit",policy="Revert"\} 1$/m);
    expect(text).toMatch(/^oscar_agent_drift_detected_total\{kind="path",trigger="watch"\} 2$/m);
    expect(text).toMatch(/^oscar_agent_drift_items\{kind="package",policy="Report"\} 1$/m);
    expect(text).toMatch(/^oscar_agent_drift_detected_total\{kind="package",trigger="watch"\} 1$/m);
    expect(text).toMatch(/^oscar_agent_drift_reverts_total\{result="success"\} 1$/m);
    expect(text).toMatch(/^oscar_agent_drift_reverts_total\{result="failure"\} 1$/m);
    r.drift?.({ items: [], added: [], resolved: items, trigger: 'revert', reverted: true });
    expect(await metrics.registry.metrics()).toMatch(
      /^oscar_agent_drift_items\{kind="unit",policy="Revert"\} 0$/m,
    );
  });
});
