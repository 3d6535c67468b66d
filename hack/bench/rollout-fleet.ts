// One process of simulated nodes for hack/bench/rollout.ts (forked by it, IPC for figures): each
// node is the real grant-mode agent (followGrants: the grant source, the node reporter, try mode
// with its connectivity proof) with its own HTTP client and connections to the real API server;
// only the apply is simulated (a fixed time, into memory) and health checks are left out.
//   argv: KUBECONFIG NAMESPACE OSC PREFIX FIRST COUNT APPLY_MS WORKDIR
import { createLogger } from '../../log/logger.js';
import { channel } from 'node:diagnostics_channel';
import type { Socket } from 'node:net';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import type { ApplyResult } from '../../agent/apply.js';
import { followGrants, type GrantWiring } from '../../agent/wiring/follow-grants.js';
import type { Applier } from '../../agent/applier.js';
import { LOCAL_UNIT_PROBE } from '../../agent/rollout/health.js';
import { TryState } from '../../agent/rollout/try-state.js';
import type { Desired } from '../../agent/state.js';
import { LocalSystemd } from '../../agent/systemd.js';
import { HttpKubeClient } from '../../kube/client.js';

const [kubeconfig, namespace, osc, prefix, firstText, countText, applyMsText, work] =
  process.argv.slice(2);
if (!kubeconfig || !namespace || !osc || !prefix || !work) {
  throw new Error(
    'usage: rollout-fleet.ts KUBECONFIG NAMESPACE OSC PREFIX FIRST COUNT APPLY_MS WORKDIR',
  );
}
const first = Number(firstText);
const count = Number(countText);
const applyMs = Number(applyMsText);

// HTTP bytes (headers and bodies, as the TLS socket counts them: before encryption) of every
// connection this process opens — all of them API connections: each socket's counters, taken
// when it closes and at each report.
let closedBytes = 0;
const live = new Set<Socket>();
// (the channel object is kept: a channel nobody holds may be collected with its subscribers)
const sockets = channel('net.client.socket');
sockets.subscribe((message) => {
  const socket = (message as { socket: Socket }).socket;
  live.add(socket);
  socket.once('close', () => {
    live.delete(socket);
    closedBytes += socket.bytesRead + socket.bytesWritten;
  });
});
const wireBytes = (): number => {
  let n = closedBytes;
  for (const s of live) n += s.bytesRead + s.bytesWritten;
  return n;
};

/** The apply, simulated: a fixed time, the state kept in memory. */
class MemoryApplier implements Applier {
  private last: Desired | undefined;
  lastApplied(): Promise<Desired | undefined> {
    return Promise.resolve(this.last);
  }
  async apply(desired: Desired): Promise<ApplyResult> {
    await new Promise((r) => setTimeout(r, applyMs));
    this.last = desired;
    return { checksum: desired.checksum, actions: [], resumed: false, touchedUnits: [] };
  }
  markApplied(desired: Desired): Promise<void> {
    this.last = desired;
    return Promise.resolve();
  }
}

let requests = 0;
let errors = 0;
/** grant → apply start, per revision number: ms. */
const latencies = new Map<number, number[]>();
const nodes: GrantWiring[] = [];

async function main(): Promise<void> {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig ?? '');
  for (let i = first; i < first + count; i++) {
    const name = `${prefix ?? ''}-${String(i).padStart(5, '0')}`;
    const dir = join(work ?? '', name);
    await mkdir(dir, { recursive: true });
    const wiring = followGrants(kc, {
      namespace: namespace ?? '',
      osc: osc ?? '',
      node: name,
      deps: {
        root: dir,
        stateDir: dir,
        systemd: new LocalSystemd(dir, join(dir, 'would-run.log')),
        owners: false,
      },
      pollIntervalMs: 120_000,
      // every warning or error the agents log (a failed or refused grant, a broken watch)
      log: createLogger({
        component: 'bench-agent',
        level: 'warn',
        destination: {
          write: () => {
            errors++;
          },
        },
      }),
      http: new HttpKubeClient(kc),
      onRequest: () => {
        requests++;
      },
      applier: new MemoryApplier(),
      health: { run: (c) => Promise.resolve({ name: c.name, ok: true, message: '' }) },
      units: LOCAL_UNIT_PROBE,
      tryState: new TryState(dir, dir, '/boot-token'),
      onApplyStart: (grant) => {
        const ms = Date.now() - Date.parse(grant.grantedTime);
        const list = latencies.get(grant.number) ?? [];
        list.push(ms);
        latencies.set(grant.number, list);
      },
    });
    nodes.push(wiring);
    await wiring.agent.start();
    await new Promise((r) => setTimeout(r, 5)); // a fleet does not start in one instant
  }
  process.send?.({ kind: 'started', nodes: nodes.length });
}

process.on('message', (m: { kind: string; revision?: number }) => {
  if (m.kind === 'stats') {
    process.send?.({
      kind: 'stats',
      requests,
      bytes: wireBytes(),
      errors,
      latencies: latencies.get(m.revision ?? 0) ?? [],
      rss: process.memoryUsage().rss,
    });
  } else if (m.kind === 'stop') {
    void Promise.all(
      nodes.map(async (n) => {
        await n.agent.stop();
        n.reporter.stop();
      }),
    ).finally(() => process.exit(0));
  }
});

main().catch((error: unknown) => {
  process.stderr.write(`fleet ${prefix}: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
