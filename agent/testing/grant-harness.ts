/**
 * The grant-mode agent on a directory root with the real executor, planner, journal and try
 * state on disk; the grant source, the report and the probes are small in-memory seams. Shared
 * by agent/rollout/grant-admission.test.ts and agent/rollout/rollback-boot.test.ts.
 */
import { silentLogger } from '../../log/logger.js';
import { mkdtemp, readFile, rm, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RevisionReport } from '../../api/schema.js';
import { LocalSystemd } from '../systemd.js';
import { config, desiredOf, file, unit } from './fixtures.js';
import type { ApplyResult } from '../apply.js';
import type { Desired } from '../state.js';
import type { Check, Grant } from '../rollout/grant.js';
import type { GrantedDesired, GrantEvents } from '../rollout/grant-source.js';
import type { Agent } from '../agent.js';
import { nodeApplier } from '../applier.js';
import {
  grantedAgent,
  type GrantAdmission,
  type GrantFeed,
  type GrantReporter,
} from '../rollout/grant-admission.js';
import type { CheckResult, UnitState } from '../rollout/health.js';
import { TryState } from '../rollout/try-state.js';
import type { DriftPolicy } from '../../api/constants.js';
import { DriftMonitor } from '../drift/monitor.js';
import { RevertBackoff } from '../drift/policy.js';
import { RebootHooks } from '../reboot/reboot.js';
import type { NodeReadiness } from '../reboot/node-ready.js';

/** What a test must undo: each test file runs them after each test (afterEach). */
export const cleanups: (() => Promise<void>)[] = [];

/** Runs and forgets the cleanups, last first. */
export async function cleanUp(): Promise<void> {
  for (const c of cleanups.splice(0).reverse()) await c();
}

export function version(
  n: string,
  extra: ReturnType<typeof file>[] = [],
  driftPolicy?: DriftPolicy,
): Desired {
  const c = config(
    [unit('app.service', { filePaths: ['/etc/app/app.conf'] })],
    [file('/etc/app/app.conf', `version ${n}\n`), ...extra],
  );
  return desiredOf(driftPolicy ? { ...c, driftPolicy } : c);
}

export class Feed implements GrantFeed {
  description = 'test grants';
  events: GrantEvents | undefined;
  restarts = 0;
  /** resourceVersions the "watch" has delivered; undefined: the watch is cut off. */
  deliver = true;
  start(events: GrantEvents) {
    this.events = events;
    return Promise.resolve();
  }
  stop() {
    return Promise.resolve();
  }
  restartWatch() {
    this.restarts++;
  }
  waitForVersion() {
    return this.deliver ? Promise.resolve() : new Promise<void>(() => undefined);
  }
  grant(g: GrantedDesired): void {
    this.events?.onGrant(g);
  }
}

export class Reporter implements GrantReporter {
  reports: RevisionReport[] = [];
  /** What failed() was told (the node's Degraded reason is the error's name). */
  failures: string[] = [];
  /** Revision phases and drift reverts, in the order they happened. */
  sequence: string[] = [];
  writes = true;
  source: string | undefined;
  setSource(source: 'Grant') {
    this.source = source;
  }
  setRevision(r: RevisionReport) {
    this.reports.push(r);
    this.sequence.push(r.phase);
  }
  reverted(r: ApplyResult) {
    this.sequence.push(`reverted: ${r.touchedUnits.map((u) => `${u.action} ${u.name}`).join()}`);
  }
  mark() {
    return 1;
  }
  writtenAfter() {
    return this.writes ? Promise.resolve('7') : new Promise<string>(() => undefined);
  }
  restored() {}
  desired() {}
  applied(_r: ApplyResult) {}
  failed(_checksum: string, e: Error) {
    this.failures.push(e.name);
  }
  sourceFailed() {}
  phases(): string[] {
    return this.reports.map((r) => `${r.phase}${r.reason === r.phase ? '' : ` ${r.reason}`}`);
  }
  async until(phase: string, timeoutMs = 5000): Promise<RevisionReport> {
    const t = Date.now() + timeoutMs;
    for (;;) {
      const r = this.reports.find((x) => x.phase === phase);
      if (r) return r;
      if (Date.now() > t) throw new Error(`no ${phase} report; got ${this.phases().join(', ')}`);
      await new Promise((res) => setTimeout(res, 20));
    }
  }
}

export interface Setup {
  root: string;
  stateDir: string;
  feed: Feed;
  reporter: Reporter;
  agent: Agent<GrantAdmission>;
  checkOk: { value: boolean };
  unitState: { value: Partial<UnitState> };
  newAgent(): Agent<GrantAdmission>;
  read(path: string): Promise<string>;
  /** With { drift: true }: what the drift monitor reported, items per report. */
  drifted: string[][];
  /** The reboots the agent asked for (issue 25), by why. */
  reboots: string[];
  /** What a reboot does to a directory root: /run empties, a new agent starts. */
  reboot(): Promise<Agent<GrantAdmission>>;
  /** systemd restarted the agent, but the machine did not reboot: /run stays. */
  restartAgent(): Promise<Agent<GrantAdmission>>;
  /** What the agent's own Node looks like after a reboot (Ready unless a test says otherwise). */
  nodeReady: { value: NodeReadiness; reads: number };
}

export async function setup(opts: { drift?: boolean; stateRel?: string } = {}): Promise<Setup> {
  const root = await mkdtemp(join(tmpdir(), 'oscar-granted-'));
  cleanups.push(() => rm(root, { recursive: true, force: true }));
  const stateDir = join(root, opts.stateRel ?? 'var/lib/oscar');
  await mkdir(stateDir, { recursive: true });
  const feed = new Feed();
  const reporter = new Reporter();
  const checkOk = { value: true };
  const unitState = { value: {} as Partial<UnitState> };
  const drifted: string[][] = [];
  const reboots: string[] = [];
  const nodeReady: Setup['nodeReady'] = {
    value: { kind: 'ready', message: 'Node n Ready in this boot' },
    reads: 0,
  };
  const newAgent = (): Agent<GrantAdmission> => {
    const late: { agent?: Agent<GrantAdmission> } = {};
    const drift = opts.drift
      ? new DriftMonitor({
          root,
          owners: false,
          auditIntervalMs: 0,
          debounceMs: 20,
          report: (r) => drifted.push(r.items.map((i) => `${i.path ?? i.unit ?? ''} ${i.reason}`)),
          requestRevert: () => late.agent?.revert(),
          log: silentLogger(),
          backoff: new RevertBackoff({ baseMs: 0, maxMs: 0 }),
        })
      : undefined;
    const applier = nodeApplier({
      root,
      stateDir,
      systemd: new LocalSystemd(root, join(stateDir, 'would-run.log')),
      owners: false,
    });
    const tryState = new TryState(stateDir, root);
    const reboot = new RebootHooks({
      root,
      stateDir,
      tryState,
      applier,
      nodeReady: {
        node: 'n',
        check: () => {
          nodeReady.reads++;
          return Promise.resolve(nodeReady.value);
        },
      },
      nodeReadyIntervalMs: 20,
      rebooter: {
        reboot: (why) => {
          reboots.push(why);
          return Promise.resolve();
        },
      },
    });
    const a = grantedAgent({
      ...(drift ? { drift } : {}),
      verifySteps: [reboot.step()],
      lifecycle: reboot,
      source: feed,
      reporter,
      applier,
      tryState,
      health: {
        run: (c: Check): Promise<CheckResult> =>
          Promise.resolve({
            name: c.name,
            ok: checkOk.value,
            message: checkOk.value ? 'ok' : 'exit 1: down',
          }),
      },
      units: {
        state: () =>
          Promise.resolve({
            active: 'active',
            sub: 'running',
            result: 'success',
            type: 'simple',
            restarts: 0,
            ...unitState.value,
          }),
      },
      scope: { namespace: 'ns', osc: 'w' },
      owners: false,
      log: silentLogger(),
      tickMs: 20,
      retryBaseMs: 50,
    });
    late.agent = a;
    cleanups.push(() => a.stop());
    return a;
  };
  return {
    root,
    stateDir,
    feed,
    reporter,
    agent: newAgent(),
    checkOk,
    unitState,
    newAgent,
    read: (p) => readFile(join(root, p), 'utf8'),
    drifted,
    reboots,
    nodeReady,
    reboot: async () => {
      await rm(join(root, 'run'), { recursive: true, force: true });
      const next = newAgent();
      await next.start();
      return next;
    },
    restartAgent: async () => {
      const next = newAgent();
      await next.start();
      return next;
    },
  };
}

/** Polls `ok` until it holds (bounded): the agent works on its own loop. */
export async function waitUntil(ok: () => boolean, timeoutMs = 5_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 10));
  }
}

export let generation = 0;
export function grantOf(
  d: Desired,
  opts: { try?: boolean; soakMs?: number; deadlineMs?: number; failureThreshold?: number } = {},
): GrantedDesired {
  const grant: Grant = {
    generation: ++generation,
    osc: 'w',
    number: generation,
    secretName: 'oscar-w-rev-0',
    checksum: d.checksum,
    grantedTime: new Date().toISOString(),
    canary: false,
  };
  if (opts.try !== false) {
    grant.try = {
      soakMs: opts.soakMs ?? 150,
      deadlineMs: opts.deadlineMs ?? 800,
      checks: [
        {
          name: 'app',
          kind: 'exec',
          command: ['/bin/true'],
          timeoutMs: 1000,
          periodMs: 20,
          failureThreshold: opts.failureThreshold ?? 1000,
        },
      ],
    };
  }
  return { grant, desired: d };
}

/** A node on v1, confirmed (a plain grant, as the controller gives a node that joins). */
export async function onV1(s: Setup): Promise<void> {
  await s.agent.start();
  s.feed.grant(grantOf(version('1'), { try: false }));
  await s.reporter.until('Confirmed');
  s.reporter.reports = [];
}

/** A node on v1, then granted a Reboot-level v2 (one file with `onChange: reboot`) as a try. */
export async function grantRebootLevel(
  s: Setup,
  rollout: Parameters<typeof grantOf>[1],
): Promise<GrantedDesired> {
  await onV1(s);
  const grub = file('/etc/default/grub.d/oscar.cfg', 'v2\n', { onChange: 'reboot' });
  const granted = grantOf(version('2', [grub]), rollout);
  s.feed.grant(granted);
  return granted;
}
