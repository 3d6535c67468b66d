/**
 * deploy/monitoring: the alerting rules pass `promtool check rules` and their unit tests
 * (`promtool test rules`, Debian's prometheus package: hack/deps.sh); every dashboard query is
 * valid PromQL (checked by promtool as a recording rule); and every oscar metric the rules and the
 * dashboard read is one the controller or the agent exports — a renamed metric fails here, not
 * silently in someone's Grafana.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { repoRoot, requireTool } from '../test/support/tools.js';

const execFileP = promisify(execFile);
const dir = join(repoRoot, 'deploy', 'monitoring');

async function promtool(args: string[], cwd = dir): Promise<string> {
  const r = await execFileP('promtool', args, { cwd });
  return `${r.stdout}${r.stderr}`;
}

interface Dashboard {
  uid: string;
  panels: { title: string; targets: { expr: string }[] }[];
}

const dashboard = async (): Promise<Dashboard> =>
  JSON.parse(await readFile(join(dir, 'oscar-dashboard.json'), 'utf8')) as Dashboard;

/** Every metric name the controller, the extension and the agent register. */
async function exported(): Promise<Set<string>> {
  const names = new Set<string>();
  for (const file of [
    'controller/runtime/metrics.ts',
    'controller/extension/metrics.ts',
    'agent/metrics.ts',
  ]) {
    const text = await readFile(join(repoRoot, file), 'utf8');
    for (const m of text.matchAll(/name: '(oscar_[a-z_]+)'/g)) if (m[1]) names.add(m[1]);
  }
  return names;
}

/** oscar_* names in a query, without a histogram's _bucket/_sum/_count suffix. */
const metricsIn = (expr: string): string[] =>
  [...expr.matchAll(/\b(oscar_[a-z_]+)/g)].map((m) =>
    (m[1] ?? '').replace(/_(bucket|sum|count)$/, ''),
  );

describe('deploy/monitoring', () => {
  it('the alerting rules pass promtool check rules and their unit tests', async () => {
    if (!requireTool('promtool', 'apt-get install prometheus (hack/deps.sh)')) return;
    expect(await promtool(['check', 'rules', 'oscar-alerts.yaml'])).toMatch(
      /SUCCESS: \d+ rules found/,
    );
    expect(await promtool(['test', 'rules', 'oscar-alerts.test.yaml'])).toContain('SUCCESS');
  });

  it('a rule that fires too early fails its unit test (the tests can fail)', async () => {
    if (!requireTool('promtool', 'apt-get install prometheus (hack/deps.sh)')) return;
    const work = await mkdtemp(join(tmpdir(), 'oscar-rules-'));
    try {
      const rules = await readFile(join(dir, 'oscar-alerts.yaml'), 'utf8');
      const broken = rules.replace(/(expr: oscar_agent_in_sync == 0\n\s+for: )15m/, '$15m');
      expect(broken).not.toBe(rules);
      await writeFile(join(work, 'oscar-alerts.yaml'), broken);
      await writeFile(
        join(work, 'oscar-alerts.test.yaml'),
        await readFile(join(dir, 'oscar-alerts.test.yaml')),
      );
      const failed = await promtool(['test', 'rules', 'oscar-alerts.test.yaml'], work).catch(
        (e: unknown) => {
          const { stdout, stderr } = e as { stdout: string; stderr: string };
          return `${stdout}${stderr}`;
        },
      );
      expect(failed).toMatch(/FAILED[\s\S]*OscarNodeDegraded/);
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  });

  it('every dashboard query is valid PromQL', async () => {
    if (!requireTool('promtool', 'apt-get install prometheus (hack/deps.sh)')) return;
    const d = await dashboard();
    const rules = d.panels.flatMap((p, i) =>
      p.targets.map((t, j) => ({ record: `oscar:panel${String(i)}_${String(j)}`, expr: t.expr })),
    );
    expect(rules.length).toBeGreaterThan(10);
    const work = await mkdtemp(join(tmpdir(), 'oscar-dashboard-'));
    try {
      await writeFile(join(work, 'q.yaml'), stringify({ groups: [{ name: 'dashboard', rules }] }));
      expect(await promtool(['check', 'rules', 'q.yaml'], work)).toContain('SUCCESS');
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  });

  it('reads only metrics oscar exports', async () => {
    const names = await exported();
    expect(names.size).toBeGreaterThan(15);
    const rules = await readFile(join(dir, 'oscar-alerts.yaml'), 'utf8');
    const used = [
      ...metricsIn(rules),
      ...(await dashboard()).panels.flatMap((p) => p.targets.flatMap((t) => metricsIn(t.expr))),
    ];
    expect(used.length).toBeGreaterThan(20);
    expect(used.filter((m) => !names.has(m))).toEqual([]);
  });
});
