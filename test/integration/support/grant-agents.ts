/**
 * Real grant-mode agents (followGrants: the grant source, the node reporter, try mode with real
 * health checks) for the rollout suites: each node its own least-privilege identity
 * (deploy/agent-rbac.yaml, the service account `oscar-agent-<node>`), each applying into its own
 * directory root, which never reboots (or, for the `lost` ones, never comes back; the
 * `lostOnTheWayBack` ones reboot once — the agent stopped, the root's /run emptied, a new agent
 * started on the same root — and never come back from their reboot back).
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { followGrants, type GrantWiring } from '../../../agent/wiring/follow-grants.js';
import type { KubeReporter } from '../../../agent/report.js';
import { LocalSystemd } from '../../../agent/systemd.js';
import { silentLogger } from '../../../log/logger.js';
import { kubeConfigFor, kubectl } from './cluster.js';
import { agentIdentity, agentRbacManifest } from '../../support/agent-identity.js';

export interface GrantAgent {
  name: string;
  root: string;
  agent: GrantWiring['agent'];
  reporter: KubeReporter;
}

export interface GrantAgentsOptions {
  namespace: string;
  osc: string;
  /** The node names, one agent each. */
  names: string[];
  /** Where each undo goes (the suite's cleanups, run in reverse after each test). */
  cleanups: (() => Promise<void>)[];
  /** The prefix of each agent's temporary root. */
  rootPrefix: string;
  /**
   * Nodes whose reboot never ends: the agent asks for the reboot (journals its intent, reports
   * Verifying/Rebooting) and is stopped, as systemd stops it, and nothing boots again.
   */
  lost?: string[];
  /**
   * Nodes whose first reboot (into a Reboot-level try) happens and whose second (the reboot back
   * after that try rolled back) never ends.
   */
  lostOnTheWayBack?: string[];
}

/** Applies the agents' RBAC, starts one agent per name, registers their undo; returns them started. */
export async function startGrantAgents(o: GrantAgentsOptions): Promise<GrantAgent[]> {
  await applyAgentRbac(o);
  const agents: GrantAgent[] = [];
  for (const name of o.names) agents.push(await grantAgent(o, name));
  await Promise.all(agents.map((x) => x.agent.start()));
  return agents;
}

async function applyAgentRbac(o: GrantAgentsOptions): Promise<void> {
  const rbac = await agentRbacManifest({ node: o.names, namespace: o.namespace, osc: o.osc });
  const applied = await kubectl(['apply', '-f', '-'], { input: rbac });
  expect(applied.code, applied.stderr).toBe(0);
  o.cleanups.push(async () => {
    await kubectl([
      'delete',
      'clusterrole,clusterrolebinding',
      ...o.names.map((x) => `oscar-agent-${x}`),
    ]);
    await kubectl(['delete', 'oscnode', ...o.names, '--ignore-not-found']);
  });
}

/** What the nth reboot of this node does: it boots again (a new agent), or it is gone for good. */
type Reboot = (n: number) => 'boots' | 'gone';

function rebootOf(o: GrantAgentsOptions, name: string): Reboot | undefined {
  if (o.lost?.includes(name)) return () => 'gone';
  if (o.lostOnTheWayBack?.includes(name)) return (n) => (n === 1 ? 'boots' : 'gone');
  return undefined;
}

async function grantAgent(o: GrantAgentsOptions, name: string): Promise<GrantAgent> {
  const kc = await kubeConfigFor(agentIdentity(o.namespace, name));
  const root = await mkdtemp(join(tmpdir(), o.rootPrefix));
  const stateDir = join(root, 'var/lib/oscar');
  await mkdir(stateDir, { recursive: true });
  const reboot = rebootOf(o, name);
  let reboots = 0;
  const wire = (): GrantWiring => {
    const wiring = followGrants(kc, {
      ...(reboot
        ? {
            rebooter: {
              reboot: () => {
                // after the step returns, as systemd's stop
                const then = reboot(++reboots);
                setTimeout(() => void (then === 'boots' ? bootAgain() : current.agent.stop()), 0);
                return Promise.resolve();
              },
            },
          }
        : {}),
      namespace: o.namespace,
      osc: o.osc,
      node: name,
      deps: {
        root,
        stateDir,
        systemd: new LocalSystemd(root, join(stateDir, 'would-run.log')),
        owners: false,
      },
      pollIntervalMs: 60_000,
      log: silentLogger(),
      backoffMaxMs: 2_000,
      tickMs: 200,
    });
    return wiring;
  };
  let current = wire();
  /** A reboot of a directory root: the agent stops, /run (a tmpfs) starts empty, a new agent. */
  const bootAgain = async (): Promise<void> => {
    await current.agent.stop();
    current.reporter.stop();
    await rm(join(root, 'run'), { recursive: true, force: true });
    current = wire();
    await current.agent.start();
  };
  o.cleanups.push(async () => {
    await current.agent.stop();
    current.reporter.stop();
    await rm(root, { recursive: true, force: true });
  });
  return { name, root, agent: current.agent, reporter: current.reporter };
}
