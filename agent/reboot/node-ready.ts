/**
 * After a reboot into a tried revision, the node's Kubernetes Node must be Ready again before the
 * try may be confirmed (docs/rollouts.md#reboot-inside-try-mode): kubelet came back in this boot,
 * reached the API server and found its runtime and network ready.
 *
 * The rules (judgeNode is pure):
 * - Ready means the Node's Ready condition is True **and** it was reported by kubelet in this boot:
 *   its status.nodeInfo.bootID is the machine's boot id now. Right after a reboot the Node still
 *   says Ready from the boot before (the node lifecycle controller marks it Unknown only after its
 *   grace period, 40 s by default); only a report carrying the new boot id is kubelet's of now. A
 *   Node without a bootID (not written by a kubelet) or a machine whose boot id cannot be read is
 *   judged by the condition alone.
 * - No Node of the agent's name (404): a machine without kubelet (an OSC that runs no kubelet,
 *   or one not registered) — nothing to wait for, the check is skipped and the verdict says so.
 *   A kubelet that registered before the reboot left its Node behind, so after a reboot a missing
 *   Node is never "not yet".
 * - The agent's identity may not read its Node (403, RBAC of an older oscar): skipped and said, so
 *   an upgrade does not roll back every reboot; the rights are in deploy/agent-rbac.yaml and
 *   deploy/identity/node.yaml.
 * - Otherwise (NotReady, an old boot's report, the API server not answering) it looks again until
 *   the try's deadline, then fails: NodeNotReady, or APIUnreachable when the Node could not be
 *   read at all.
 */
import { readFile } from 'node:fs/promises';
import { ApiError, type KubeHttp } from '../../kube/client.js';
import type { Verdict, VerifyStepContext } from '../rollout/soak.js';

/** The parts of a Node this check reads. */
export interface NodeFacts {
  status?: {
    conditions?: { type?: string; status?: string; reason?: string; message?: string }[];
    nodeInfo?: { bootID?: string };
  };
}

export type NodeReadiness =
  | { kind: 'ready'; message: string }
  | { kind: 'notReady'; message: string }
  | { kind: 'absent'; message: string }
  | { kind: 'forbidden'; message: string }
  | { kind: 'unreachable'; message: string };

/** Whether kubelet of this boot reported the Node Ready. Pure. */
export function judgeNode(
  name: string,
  node: NodeFacts,
  bootId: string | undefined,
): NodeReadiness {
  const ready = node.status?.conditions?.find((c) => c.type === 'Ready');
  const nodeBoot = node.status?.nodeInfo?.bootID;
  if (bootId && nodeBoot && nodeBoot !== bootId) {
    return {
      kind: 'notReady',
      message: `Node ${name} still carries the boot before the reboot (bootID ${nodeBoot}, this boot ${bootId}): kubelet has not reported since`,
    };
  }
  if (ready?.status !== 'True') {
    const why = [ready?.reason, ready?.message].filter(Boolean).join(': ');
    return {
      kind: 'notReady',
      message: `Node ${name} is not Ready (${ready ? `Ready=${ready.status ?? '?'}` : 'no Ready condition'}${why ? `, ${why}` : ''})`,
    };
  }
  return { kind: 'ready', message: `Node ${name} Ready in this boot` };
}

/** Reads the agent's own Node and judges it. */
export interface NodeReadinessProbe {
  readonly node: string;
  check(): Promise<NodeReadiness>;
}

/** The machine's boot id as kubelet reports it (cAdvisor reads the same file). */
export async function machineBootId(root = '/'): Promise<string | undefined> {
  const text = await readFile(`${root.replace(/\/$/, '')}/proc/sys/kernel/random/boot_id`, 'utf8')
    .then((t) => t.trim())
    .catch(() => '');
  return text || undefined;
}

/** GET /api/v1/nodes/NAME with the agent's own identity (its own Node only: docs/rollouts.md#rbac). */
export class KubeNodeReadiness implements NodeReadinessProbe {
  constructor(
    private readonly http: KubeHttp,
    readonly node: string,
    private readonly bootId: () => Promise<string | undefined> = () => machineBootId(),
  ) {}

  async check(): Promise<NodeReadiness> {
    const path = `/api/v1/nodes/${encodeURIComponent(this.node)}`;
    try {
      const node = await this.http.request<NodeFacts>('GET', path, { timeoutMs: 10_000 });
      return judgeNode(this.node, node, await this.bootId());
    } catch (error) {
      return readError(this.node, error);
    }
  }
}

function readError(node: string, error: unknown): NodeReadiness {
  if (error instanceof ApiError && error.status === 404) {
    return {
      kind: 'absent',
      message: `no Node named ${node} (a machine without kubelet): Ready not checked`,
    };
  }
  if (error instanceof ApiError && error.status === 403) {
    return {
      kind: 'forbidden',
      message: `this agent may not read Node ${node} (403; grant get on nodes/${node}: deploy/agent-rbac.yaml): Ready not checked`,
    };
  }
  return {
    kind: 'unreachable',
    message: `cannot read Node ${node}: ${error instanceof Error ? error.message : String(error)}`,
  };
}

export interface WaitNodeReadyOptions {
  probe: NodeReadinessProbe;
  /** The try's deadline (ms since the epoch). */
  deadline: number;
  signal: AbortSignal;
  ctx: VerifyStepContext;
  intervalMs?: number;
  now?: () => number;
}

/**
 * Looks at the Node until it is Ready in this boot (or there is none to wait for), reporting
 * Verifying/NodeNotReady while it is not; at the deadline the try fails.
 */
export async function waitNodeReady(o: WaitNodeReadyOptions): Promise<Verdict> {
  const now = o.now ?? Date.now;
  let reported = '';
  for (;;) {
    if (o.signal.aborted) return { kind: 'interrupted' };
    const r = await o.probe.check();
    if (r.kind === 'ready' || r.kind === 'absent' || r.kind === 'forbidden') {
      return { kind: 'confirmed', message: r.message };
    }
    if (now() >= o.deadline) {
      return {
        kind: 'failed',
        reason: r.kind === 'unreachable' ? 'APIUnreachable' : 'NodeNotReady',
        message: `not Ready by the deadline after the reboot: ${r.message}`,
      };
    }
    if (r.message !== reported) {
      reported = r.message;
      o.ctx.report('NodeNotReady', `waiting for the Node after the reboot: ${r.message}`);
    }
    await pause(Math.min(o.intervalMs ?? 2000, Math.max(0, o.deadline - now())), o.signal);
  }
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const t = setTimeout(done, ms);
    signal.addEventListener('abort', done);
  });
}
